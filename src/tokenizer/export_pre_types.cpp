// llama.cpp's byte-level pre-tokenizer types (src/llama-vocab.cpp, llm_tokenizer_bpe and
// llama_vocab::impl::load) as Hugging Face Split patterns, grouped by the patterns they share.
// Non-ASCII characters are written as \x{...} escapes and turned into UTF-8 by canonical_regex.
#include <string>
#include <string_view>
#include <vector>

#include "export_internal.h"
#include "pre_regexes.h"

namespace mo::tok::hfx {

const std::string kGpt2Regex = tok::kGpt2Regex;
const std::string kPunctuationContiguous = "<Punctuation:Contiguous>";

namespace {

// llama.cpp's GPT-2 regex lacks HF's final "|\s+"; with Isolated splitting both give the same pieces.
const std::string kGpt2LlamaCpp = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Where llama.cpp rewrote a tokenizer.json regex for its own engine ("adapted"), the HF original is
// what we write and both are recognised.
const std::string kLlama3 = tok::kLlama3Regex;
const std::string kLlama3Adapted =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 = tok::kQwen2Regex;
const std::string kQwen2Adapted =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen35Adapted =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kTekken = tok::kTekkenRegex;
const std::string kTekkenAdapted =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kGpt4o = tok::kGpt4oRegex;
const std::string kGpt4oAdapted =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::string kCjk = tok::kCjkRegex;
const std::string kDeepseekLetters = tok::kDeepseekLettersRegex;
const std::string kDeepseekPunct = tok::kDeepseekPunctRegex;
const std::string kBloom = tok::kBloomRegex;

std::vector<PreFamily> build_families() {
  std::vector<PreFamily> f;
  f.push_back({{{"default", true, false}}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2LlamaCpp, R"(\p{N}+)", "[0-9][0-9][0-9]"}, {}, false});
  f.push_back({{{"llama-bpe", true, true},
                {"llama3", true, true},
                {"llama-v3", true, true},
                {"falcon3", true, true},
                {"falcon-h1", true, true},
                {"pixtral", true, true},
                {"midm-2.0", true, true},
                {"lfm2", true, true},
                {"jina-v5-nano", true, true}},
               {kLlama3},
               {{kLlama3Adapted}},
               true});
  f.push_back({{{"smaug-bpe", true, false}, {"dbrx", true, false}, {"chatglm-bpe", true, false}, {"glm4", true, false}},
               {kLlama3},
               {{kLlama3Adapted}},
               false});
  f.push_back({{{"qwen2", false, false},
                {"deepseek-r1-qwen", false, false},
                {"kormo", false, false},
                {"f2llmv2", false, false},
                {"hunyuan", false, false},
                {"solar-open", false, false},
                {"grok-2", false, false},
                {"stablelm2", true, false},
                {"megrez", true, false}},
               {kQwen2},
               {{kQwen2Adapted}},
               false});
  f.push_back({{{"qwen35", false, false}}, {kQwen35}, {{kQwen35Adapted}}, false});
  f.push_back({{{"gpt-2", true, false},
                {"mpt", true, false},
                {"olmo", true, false},
                {"phi-2", true, false},
                {"jais", true, false},
                {"exaone4", true, false},
                {"a.x-4.0", true, false},
                {"mellum", true, false},
                {"gigachat", true, false},
                {"jina-es", true, false},
                {"jina-de", true, false},
                {"jina-v2-es", true, false},
                {"jina-v2-de", true, false},
                {"modern-bert", true, false},
                {"trillion", false, false},
                {"granite-docling", false, false}},
               {kGpt2Regex},
               {{kGpt2LlamaCpp}},
               false});
  f.push_back({{{"starcoder", true, false},
                {"refact", true, false},
                {"codeshell", true, false},
                {"exaone", true, false},
                {"minerva-7b", true, false},
                {"mellum2", true, false},
                {"smollm", false, false},
                {"command-r", false, false}},
               {R"(\p{N})", kGpt2Regex},
               {{R"(\p{N})", kGpt2LlamaCpp}},
               false});
  // HF's falcon-7b: Punctuation, ByteLevel, Digits, Split("[0-9][0-9][0-9]"); llama.cpp folds the
  // ASCII symbols Punctuation also takes into its first regex.
  f.push_back({{{"falcon", true, false}},
               {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2LlamaCpp, "[0-9][0-9][0-9]"},
               {{kPunctuationContiguous, kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
               false});
  f.push_back({{{"deepseek-llm", false, false}}, {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjk, R"(\p{N}+)"}, {}, false});
  f.push_back({{{"deepseek-coder", false, false}}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}, {}, false});
  f.push_back({{{"deepseek-v3", false, false}, {"hunyuan-dense", false, false}, {"joyai-llm", false, false}, {"hy_v4", false, false}},
               {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
                "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
                "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
               {},
               false});
  f.push_back({{{"bloom", true, false}, {"gpt3-finnish", true, false}, {"poro-chat", false, false}}, {kBloom}, {}, false});
  f.push_back({{{"viking", false, false}}, {kBloom, R"(\p{N})"}, {}, false});
  f.push_back({{{"tekken", false, true}}, {kTekken}, {{kTekkenAdapted}}, true});
  f.push_back({{{"gpt-4o", false, false},
                {"llama4", false, false},
                {"kanana2", false, false},
                {"talkie", false, false},
                {"minimax-m2", false, false}},
               {kGpt4o},
               {{kGpt4oAdapted}},
               false});
  for (auto& family : f) {
    for (auto& r : family.regexes) r = canonical_regex(r);
    for (auto& v : family.variants)
      for (auto& r : v) r = canonical_regex(r);
  }
  return f;
}

const std::vector<PreFamily>& families() {
  static const std::vector<PreFamily> table = build_families();
  return table;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string canonical_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\' || i + 1 >= p.size()) {
      out += p[i];
      continue;
    }
    if (p[i + 1] == 'x' && i + 2 < p.size() && p[i + 2] == '{') {
      const std::size_t close = p.find('}', i + 3);
      const std::string_view hex = close == std::string_view::npos ? std::string_view{} : p.substr(i + 3, close - i - 3);
      char32_t cp = 0;
      bool ok = !hex.empty() && hex.size() <= 6;
      for (char c : hex) {
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) ok = false;
        cp = cp * 16 + static_cast<char32_t>(d < 0 ? 0 : d);
      }
      // ASCII escapes keep their meaning as regex syntax; only letters beyond ASCII are spelled out.
      if (ok && cp >= 0x80 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
        append_utf8(out, cp);
        i = close;
        continue;
      }
    }
    out += p[i];
    out += p[i + 1];
    ++i;
  }
  return out;
}

const PreFamily* find_pre_family(std::string_view name, const PreName** which) {
  for (const auto& family : families()) {
    for (const auto& entry : family.names) {
      if (name == entry.name) {
        if (which) *which = &entry;
        return &family;
      }
    }
  }
  return nullptr;
}

std::vector<const PreFamily*> match_pre_families(const std::vector<std::string>& patterns, bool ignore_merges) {
  std::vector<const PreFamily*> out;
  for (const auto& family : families()) {
    if (family.ignore_merges != ignore_merges) continue;
    bool match = family.regexes == patterns;
    for (const auto& v : family.variants) match = match || v == patterns;
    if (match) out.push_back(&family);
  }
  return out;
}

std::vector<std::string> known_pre_names() {
  std::vector<std::string> out;
  for (const auto& family : families())
    for (const auto& entry : family.names) out.emplace_back(entry.name);
  return out;
}

}  // namespace mo::tok::hfx
