#pragma once
// Typed reads out of parsed JSON whose errors name the file and the field (config.json,
// quantization_config, tokenizer.json): nlohmann's own exceptions name neither.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "mo/core/error.h"

namespace mo {

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

// The integer at `field` of `source` as T. nlohmann's get<int>() converts a float such as 1e99 unchecked
// (undefined behaviour) and wraps an out-of-range integer: only JSON integers within T's range pass; anything
// else is a UsageError naming the file, the field and the value.
template <class T>
T json_int(const nlohmann::json& v, const std::string& source, std::string_view field) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  bool fits = false;
  if (v.is_number_unsigned()) {
    fits = v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    fits = i >= 0 ? static_cast<std::uint64_t>(i) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                  : std::is_signed_v<T> && i >= static_cast<std::int64_t>(std::numeric_limits<T>::min());
  } else {
    throw UsageError(fmt::format("{}: '{}' must be an integer, got {}", source, field, v.dump()));
  }
  if (!fits) throw UsageError(fmt::format("{}: '{}' is out of range ({})", source, field, v.dump()));
  return v.is_number_unsigned() ? static_cast<T>(v.get<std::uint64_t>()) : static_cast<T>(v.get<std::int64_t>());
}

}  // namespace mo
