#pragma once
// Where evaluation text and task files come from: a path, or a built-in name looked up in the
// evaluation data folder ($MO_EVAL_DATA, else the shared data folder beside the checkout,
// <checkout>/../shared/data, which holds text/ and tasks/).
//   text:  wikitext2 (text/wikitext2-test-raw.txt), tinystories (text/tinystories-sample.txt)
//   tasks: arc_easy, piqa, copa, boolq, winogrande, lambada_openai (tasks/<name>.jsonl)
#include <string>
#include <vector>

namespace mo::eval {

// $MO_EVAL_DATA as given, else the shared folder relative to the working directory ("../shared/data"
// when run from the checkout), so reports show the path a user would type, not the build's absolute one.
std::string eval_data_dir();
std::vector<std::string> builtin_text_names();

// A file path as given when it exists, else the built-in file of that name. Throws UsageError naming
// `key` (the config key) and the looked-up place when neither exists.
std::string resolve_text_path(const std::string& spec, const std::string& key);
std::string resolve_task_path(const std::string& spec, const std::string& key);

// The file's text with CRLF (and lone CR) turned into LF and one trailing LF dropped, so a file
// scores the same whichever line endings it was saved with.
std::string read_eval_text(const std::string& path);

}  // namespace mo::eval
