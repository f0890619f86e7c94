#pragma once
#include <spdlog/spdlog.h>

#include <string>

// One logging wrapper for the whole project: lifecycle messages on stderr, never one per token.
namespace mo::log {

// Sets the level from `level` ("trace", "debug", "info", "warn", "error", "off"); an empty string
// falls back to $MO_LOG_LEVEL, then "info". Throws UsageError on an unknown name.
void init(const std::string& level = "");

template <typename... Args>
void debug(spdlog::format_string_t<Args...> f, Args&&... args) {
  spdlog::debug(f, std::forward<Args>(args)...);
}
template <typename... Args>
void info(spdlog::format_string_t<Args...> f, Args&&... args) {
  spdlog::info(f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(spdlog::format_string_t<Args...> f, Args&&... args) {
  spdlog::warn(f, std::forward<Args>(args)...);
}
template <typename... Args>
void error(spdlog::format_string_t<Args...> f, Args&&... args) {
  spdlog::error(f, std::forward<Args>(args)...);
}

}  // namespace mo::log
