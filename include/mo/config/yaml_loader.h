#pragma once
#include <string>

#include "mo/config/schema.h"

namespace mo::config {

// Reads a YAML mapping from `path` into the fields of `schema`. Unknown keys, wrong types and
// out-of-range values throw UsageError naming the file, the line, the key, the value and what was
// expected (with a "did you mean" for near-miss keys). A missing file is a UsageError naming it.
void load_yaml_file(const Schema& schema, const std::string& path);

// The same for YAML text; `source` names it in errors.
void load_yaml_text(const Schema& schema, const std::string& text, const std::string& source);

}  // namespace mo::config
