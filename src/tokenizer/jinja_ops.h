#pragma once
// Python's operators on interpreter values: arithmetic, `in`, and slicing.
#include <optional>
#include <string>

#include "jinja_value.h"

namespace mo::tok::jinja {

// op is one of + - * / // % **. Throws kRuntime as Python raises TypeError / ZeroDivisionError.
Value binary_op(const std::string& op, const Value& a, const Value& b, const Loc& loc);
Value negate(const Value& v, const Loc& loc);
// `item in container`.
bool contains(const Value& container, const Value& item, const Loc& loc);
// container[start:stop:step] of a str (by code point) or a list; absent bounds are Python's None.
Value slice(const Value& container, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step, const Loc& loc);

}  // namespace mo::tok::jinja
