#pragma once
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "mo/core/error.h"

namespace mo::io {

// Parses a whole JSON file (config.json, tokenizer.json, ...). Throws UsageError when the file
// cannot be opened and Error("<path>: invalid JSON at byte N: ...") when it does not parse.
nlohmann::json read_json(const std::string& path);

// Writes `j` as Transformers writes its JSON files (indent 2, UTF-8 as is, trailing newline). Throws
// Error naming the path when it cannot be written.
void write_json(const std::string& path, const nlohmann::json& j);

// Runs `read`, which reads values out of the JSON of `source`: a value of the wrong type or out of range there
// (nlohmann's type_error / out_of_range) becomes a UsageError naming `source`, not an exception without a file.
template <class Read>
auto reading_json(const std::string& source, Read&& read) -> decltype(std::forward<Read>(read)()) {
  try {
    return std::forward<Read>(read)();
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("{}: a value has an unexpected type or range: {}", source, e.what()));
  }
}

}  // namespace mo::io
