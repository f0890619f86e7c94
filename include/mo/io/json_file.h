#pragma once
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "mo/core/error.h"
#include "mo/core/json_fields.h"

namespace mo::io {

// Parses a whole JSON file (config.json, tokenizer.json, ...). Throws UsageError when the file
// cannot be opened and Error("<path>: invalid JSON at byte N: ...") when it does not parse.
nlohmann::json read_json(const std::string& path);

// Writes `j` as Transformers writes its JSON files (indent 2, UTF-8 as is, trailing newline). Throws
// Error naming the path when it cannot be written.
void write_json(const std::string& path, const nlohmann::json& j);

}  // namespace mo::io
