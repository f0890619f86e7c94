#include "mo/io/json_file.h"

#include <fstream>
#include <string_view>

#include "mo/core/error.h"
#include "mo/core/mapped_file.h"

namespace mo::io {

namespace {

// nlohmann prefixes messages with "[json.exception.parse_error.101] parse error at "; the byte
// offset we print replaces that.
std::string_view strip_prefix(std::string_view what) {
  if (!what.empty() && what.front() == '[') {
    const auto close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  constexpr std::string_view kParseErrorAt = "parse error at ";
  if (what.substr(0, kParseErrorAt.size()) == kParseErrorAt) what.remove_prefix(kParseErrorAt.size());
  return what;
}

}  // namespace

nlohmann::json read_json(const std::string& path) {
  const MappedFile file(path);
  // An empty file maps to nullptr; parse an empty range instead.
  const char* begin = file.size() ? reinterpret_cast<const char*>(file.data()) : "";
  try {
    return nlohmann::json::parse(begin, begin + file.size());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + std::string(strip_prefix(e.what())));
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number such as 1e99999 overflows a double
    throw Error(path + ": invalid JSON: " + std::string(strip_prefix(e.what())));
  }
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::string text;
  try {
    text = j.dump(2, ' ', false) + "\n";
  } catch (const nlohmann::json::type_error& e) {
    throw Error(path + ": cannot write JSON: " + e.what());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw Error(path + ": cannot write file");
}

}  // namespace mo::io
