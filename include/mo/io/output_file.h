#pragma once
// One overwrite policy for everything a command writes, models, reports and results alike (docs/cli.md,
// "Outputs"): nothing that exists is replaced unless the user passes --force, and then only what
// model-optimizer wrote; a path that appears while a command runs is never replaced: the command's own
// output is kept under another name and the error says where.
#include <string>

namespace mo::io {

// What marks a report or results file as ours: the first line of the Markdown / SVG files we write, and
// the key our JSON files carry ("written_by": "model-optimizer <version>").
inline constexpr const char* kFileMarkerComment = "<!-- written by model-optimizer; --force may replace this file -->";
inline constexpr const char* kWrittenByKey = "written_by";

// `text` with kFileMarkerComment as its first line (Markdown, SVG), and the value of kWrittenByKey.
std::string with_file_marker(const std::string& text);
std::string written_by_value();

// True for what model-optimizer writes: a model directory holding model-optimizer.json, a GGUF file with
// the model-optimizer.source key, a file that starts with kFileMarkerComment (Markdown, SVG), a JSON object
// with kWrittenByKey, a decisions .jsonl (every line an object with "module"). Never a link, a device, a FIFO.
bool written_by_us(const std::string& path);

// Before any work: throws UsageError naming `key` and `path` when the command may not write `path`: it
// exists and `force` is off, or it exists and is not written_by_us.
void check_new_output(const std::string& path, bool force, const std::string& key);

// Moves the finished `from` (a file or a directory) to `to`: onto nothing, atomically (a `to` that appears
// at the same moment is not replaced), or with `force` onto something written_by_us (exchanged atomically,
// then the displaced one removed). When `to` is there and may not be replaced, `to` is left untouched,
// `from` goes to a free name beside it, and Error names both.
void move_into_place(const std::string& from, const std::string& to, bool force, const std::string& key);

// `text` into `path` under the same rules: written to `<path>.tmp-<pid>`, then move_into_place.
void write_output_file(const std::string& path, const std::string& text, bool force, const std::string& key);

}  // namespace mo::io
