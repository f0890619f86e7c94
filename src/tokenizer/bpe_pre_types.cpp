#include "bpe_pre_types.h"

#include <map>

#include "bpe_pretokenize.h"

namespace mo::tok {

// llama.cpp rewrites (?i:...) as (?:'[sS]|...) for std::regex; PCRE2 takes the tokenizer.json originals.
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// DeepSeek's cased-letter class, written with escapes: several of its characters (U+1F7D, U+1FBE,
// U+2126, U+212A, ...) have canonical singletons and must not be NFC-normalized by an editor.
const char* const kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA})"
    R"(\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4})"
    R"(\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC})"
    R"(\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126})"
    R"(\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B})"
    R"(\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2})"
    R"(\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
const char* const kCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

const char* const kDeepseek3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kBloomRegex = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";

const std::map<std::string, GgufPreType>& table() {
  static const std::map<std::string, GgufPreType> t = [] {
    const GgufPreType gpt2{{kGpt2Regex}};
    const GgufPreType llama3{{kLlama3Regex}, true, true};
    const GgufPreType llama3_regex_only{{kLlama3Regex}};
    const GgufPreType qwen2{{kQwen2Regex}};
    const GgufPreType starcoder{{R"(\p{N})", kGpt2Regex}};
    std::map<std::string, GgufPreType> m;
    m["default"] = {{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}};
    for (const char* n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"})
      m[n] = llama3;
    for (const char* n : {"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}) m[n] = llama3_regex_only;
    m["deepseek-llm"] = {{"[\r\n]", kDeepseekLetters, R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
                          R"(\s+$)", kCjk, R"(\p{N}+)"}};
    m["deepseek-coder"] = {{"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}};
    m["deepseek-v3"] = {{R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)", kDeepseek3Main}};
    m["falcon"] = {{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"}};
    for (const char* n : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"})
      m[n] = starcoder;
    for (const char* n : {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                          "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais",
                          "trillion", "granite-docling"})
      m[n] = gpt2;
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"})
      m[n] = qwen2;
    m["qwen35"] = {{R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}};
    m["seed-coder"] = {{R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}};
    m["tekken"] = {{kTekkenRegex}, true, true};
    for (const char* n : {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}) m[n] = {{kGpt4oRegex}};
    for (const char* n : {"poro-chat", "bloom", "gpt3-finnish"}) m[n] = {{kBloomRegex}};
    m["viking"] = {{kBloomRegex, R"(\p{N})"}};
    return m;
  }();
  return t;
}

}  // namespace

const GgufPreType* find_gguf_pre_type(const std::string& name) {
  const auto& t = table();
  const auto it = t.find(name.empty() ? "default" : name);
  return it == t.end() ? nullptr : &it->second;
}

}  // namespace mo::tok
