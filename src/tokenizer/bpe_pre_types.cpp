#include "bpe_pre_types.h"

#include <map>

#include "bpe_pretokenize.h"
#include "pre_regexes.h"

namespace mo::tok {

namespace {

const char* const kDeepseek3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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
    m["deepseek-llm"] = {{"[\r\n]", kDeepseekLettersRegex, kDeepseekPunctRegex, R"(\s+$)", kCjkRegex, R"(\p{N}+)"}};
    m["deepseek-coder"] = {{"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkRegex, R"(\p{N})"}};
    m["deepseek-v3"] = {{R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)", kDeepseek3Main}};
    m["falcon"] = {{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"}};
    for (const char* n : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"}) m[n] = starcoder;
    for (const char* n :
         {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en",
          "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling"})
      m[n] = gpt2;
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"})
      m[n] = qwen2;
    m["qwen35"] = {
        {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}};
    m["seed-coder"] = {
        {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}};
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
