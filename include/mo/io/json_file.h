#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace mo::io {

// Parses a whole JSON file (config.json, tokenizer.json, ...). Throws UsageError when the file
// cannot be opened and Error("<path>: invalid JSON at byte N: ...") when it does not parse.
nlohmann::json read_json(const std::string& path);

}  // namespace mo::io
