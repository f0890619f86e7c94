// Small helpers of the GGUF <-> HF tokenizer conversion: UTF-8 indexing, added-token entries,
// merge parsing and convert_hf_to_gguf.py's "looks special" test.
#include <string>
#include <string_view>
#include <vector>

#include "export_internal.h"
#include "mo/core/error.h"

namespace mo::tok::hfx {

std::vector<std::size_t> utf8_char_starts(std::string_view s) {
  std::vector<std::size_t> starts;
  starts.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    // Continuation bytes (10xxxxxx) never start a character; invalid bytes count as one each.
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  return starts;
}

bool token_looks_special(std::string_view t) {
  static constexpr std::string_view kFullBar = "\xef\xbd\x9c";  // "｜", DeepSeek's fullwidth bar
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() && t.size() >= close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped(std::string("<").append(kFullBar), std::string(kFullBar).append(">")) || wrapped("<unused", ">");
}

nlohmann::json added_token_json(std::int64_t id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

std::vector<std::pair<std::string, std::string>> parse_hf_merges(const nlohmann::json& merges, const std::string& source) {
  std::vector<std::pair<std::string, std::string>> out;
  if (merges.is_null()) return out;
  if (!merges.is_array()) throw Error(source + ": model.merges is not a list");
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const auto& m = merges[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ', 1);
      if (space == std::string::npos) throw Error(source + ": merge " + std::to_string(i) + " '" + s + "' is not 'left right'");
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw Error(source + ": merge " + std::to_string(i) + " is neither \"left right\" nor [left, right]");
    }
  }
  return out;
}

}  // namespace mo::tok::hfx
