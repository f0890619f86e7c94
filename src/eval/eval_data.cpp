#include "mo/eval/eval_data.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mo/core/error.h"
#include "mo/core/file_read.h"
#include "mo/core/strings.h"

namespace fs = std::filesystem;

namespace mo::eval {
namespace {

struct BuiltinText {
  const char* name;
  const char* file;
};
constexpr BuiltinText kTexts[] = {{"wikitext2", "text/wikitext2-test-raw.txt"}, {"tinystories", "text/tinystories-sample.txt"}};

// Reports name the files they read; the built-in folder is printed as a user would type it, relative
// to the working directory ("../shared/data" from the checkout), unless the two share only "/".
std::string relative_to_cwd(const fs::path& dir) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec || !dir.is_absolute()) return dir.string();
  auto d = dir.begin(), c = cwd.begin();
  if (++d == dir.end() || ++c == cwd.end() || *d != *c) return dir.string();
  return dir.lexically_proximate(cwd).string();
}

}  // namespace

std::string eval_data_dir() {
  if (const char* env = std::getenv("MO_EVAL_DATA"); env && *env) return env;
#ifdef MO_DEFAULT_CALIBRATION_DIR
  // The build knows the checkout only through the calibration folder, <checkout>/.cache/calibration.
  return relative_to_cwd(
      (fs::path(MO_DEFAULT_CALIBRATION_DIR).parent_path().parent_path().parent_path() / "shared" / "data").lexically_normal());
#else
  return "../shared/data";
#endif
}

std::vector<std::string> builtin_text_names() {
  std::vector<std::string> out;
  for (const auto& t : kTexts) out.emplace_back(t.name);
  return out;
}

std::string resolve_text_path(const std::string& spec, const std::string& key) {
  if (spec.empty())
    throw UsageError(fmt::format("{}: empty; expected a text file or a built-in set ({})", key, join(builtin_text_names())));
  if (fs::is_regular_file(spec)) return spec;
  if (std::error_code ec; fs::exists(spec, ec) && !fs::is_directory(spec, ec)) ::close(open_regular_file(spec, key));  // a FIFO, a device
  for (const auto& t : kTexts) {
    if (spec != t.name) continue;
    const std::string path = (fs::path(eval_data_dir()) / t.file).string();
    if (!fs::is_regular_file(path))
      throw UsageError(
          fmt::format("{}: built-in text '{}' not found at {} (set MO_EVAL_DATA to the folder holding text/ and tasks/)", key, spec, path));
    return path;
  }
  throw UsageError(fmt::format("{}: '{}' is neither a file nor a built-in text ({})", key, spec, join(builtin_text_names())));
}

std::string resolve_task_path(const std::string& spec, const std::string& key) {
  if (fs::is_regular_file(spec)) return spec;
  if (std::error_code ec; fs::exists(spec, ec) && !fs::is_directory(spec, ec)) ::close(open_regular_file(spec, key));  // a FIFO, a device
  const bool bare = spec.find('/') == std::string::npos && !spec.ends_with(".jsonl");
  const std::string builtin = (fs::path(eval_data_dir()) / "tasks" / (spec + ".jsonl")).string();
  if (bare && fs::is_regular_file(builtin)) return builtin;
  throw UsageError(fmt::format("{}: task '{}' not found (a JSONL file, or a name of a file in {})", key, spec,
                               (fs::path(eval_data_dir()) / "tasks").string()));
}

std::string read_eval_text(const std::string& path) {
  const std::string raw = read_regular_file(path, "text file", 4096 * kMiB);
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\r')
      out.push_back(raw[i]);
    else if (i + 1 >= raw.size() || raw[i + 1] != '\n')
      out.push_back('\n');
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace mo::eval
