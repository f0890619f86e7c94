// make_spm_from_gguf: a GGUF "llama" vocabulary read the way llama.cpp's llama_vocab::impl::load does,
// including the token attributes it derives from token names (control-looking end-of-turn tokens,
// Phi-3's rstrip on its special tokens).
#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>

#include "factories.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/io/gguf.h"
#include "spm_tokenizer.h"

namespace mo::tok {

using namespace spm;

namespace {

// GGUF tokenizer.ggml.token_type values (llama_token_type).
uint32_t attr_of_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return 0;  // undefined
  }
}

// Tokens llama.cpp treats as end of turn / generation and therefore forces to control type.
constexpr std::array<std::string_view, 21> kEndOfGenerationNames = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
};

const std::vector<gguf::Value>& array_key(const gguf::File& f, std::string_view key, gguf::ValueType elem) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) throw Error(f.path + ": metadata key '" + std::string(key) + "' is missing");
  if (v->type != gguf::ValueType::array || v->elem_type != elem) {
    throw Error(f.path + ": metadata key '" + std::string(key) + "' is " + gguf::type_name(v->type) +
                (v->type == gguf::ValueType::array ? " of " + gguf::type_name(v->elem_type) : "") + ", expected array of " +
                gguf::type_name(elem));
  }
  return v->as_array();
}

bool bool_key(const gguf::File& f, std::string_view key, bool fallback) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) return fallback;
  try {
    return v->as_bool();
  } catch (const Error& e) {
    throw Error(f.path + ": metadata key '" + std::string(key) + "': " + e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_from_gguf(const gguf::File& file) {
  SpmConfig cfg;
  cfg.source = file.path;
  cfg.algorithm = SpmAlgorithm::llama_cpp;
  if (const gguf::Value* pre = file.find("tokenizer.ggml.pre")) cfg.pre = pre->as_string();

  const auto& texts = array_key(file, "tokenizer.ggml.tokens", gguf::ValueType::string);
  const std::size_t n = texts.size();
  if (n == 0) throw Error(file.path + ": metadata key 'tokenizer.ggml.tokens' is an empty array");
  const std::vector<gguf::Value>* scores = nullptr;
  if (const gguf::Value* v = file.find("tokenizer.ggml.scores")) {
    if (v->type != gguf::ValueType::array || (v->elem_type != gguf::ValueType::f32 && v->elem_type != gguf::ValueType::i32)) {
      throw Error(file.path + ": metadata key 'tokenizer.ggml.scores' must be an array of f32 or i32");
    }
    scores = &v->as_array();
    if (scores->size() < n) {
      throw Error(file.path + ": metadata key 'tokenizer.ggml.scores' has " + std::to_string(scores->size()) + " entries for " +
                  std::to_string(n) + " tokens");
    }
  }
  const std::vector<gguf::Value>* types = nullptr;
  if (file.find("tokenizer.ggml.token_type")) {
    types = &array_key(file, "tokenizer.ggml.token_type", gguf::ValueType::i32);
    if (types->size() < n) {
      throw Error(file.path + ": metadata key 'tokenizer.ggml.token_type' has " + std::to_string(types->size()) + " entries for " +
                  std::to_string(n) + " tokens");
    }
  }

  cfg.tokens.resize(n);
  std::unordered_map<std::string, std::int32_t> seen;
  seen.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    SpmToken& t = cfg.tokens[i];
    t.text = texts[i].as_string();
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    auto [it, inserted] = seen.emplace(t.text, static_cast<std::int32_t>(i));
    if (!inserted) {
      throw Error(file.path + ": metadata key 'tokenizer.ggml.tokens': duplicate token '" + t.text + "' (ids " +
                  std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
    if (scores) t.score = static_cast<float>((*scores)[i].as_number());
    t.attr = types ? attr_of_type((*types)[i].as_int()) : kAttrNormal;
  }

  // Special ids: llama.cpp's SPM defaults, replaced by the metadata when it names a token in range.
  auto special_id = [&](std::string_view key, std::optional<std::int32_t> fallback) -> std::optional<std::int32_t> {
    if (fallback && static_cast<std::size_t>(*fallback) >= n) fallback.reset();
    const auto v = file.get_int_opt(key);
    if (v && *v >= 0 && static_cast<std::size_t>(*v) < n) return static_cast<std::int32_t>(*v);
    return fallback;
  };
  SpecialTokens& sp = cfg.special;
  sp.bos = special_id("tokenizer.ggml.bos_token_id", 1);
  sp.eos = special_id("tokenizer.ggml.eos_token_id", 2);
  sp.unk = special_id("tokenizer.ggml.unknown_token_id", 0);
  sp.pad = special_id("tokenizer.ggml.padding_token_id", std::nullopt);
  sp.add_bos = bool_key(file, "tokenizer.ggml.add_bos_token", true);
  sp.add_eos = bool_key(file, "tokenizer.ggml.add_eos_token", false);
  if (sp.add_bos && !sp.bos) throw Error(file.path + ": tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  if (sp.add_eos && !sp.eos) throw Error(file.path + ": tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
  if (sp.add_bos) cfg.prefix_ids = {*sp.bos};
  if (sp.add_eos) cfg.suffix_ids = {*sp.eos};
  cfg.add_space_prefix = bool_key(file, "tokenizer.ggml.add_space_prefix", true);

  for (auto& t : cfg.tokens) {
    if (std::find(kEndOfGenerationNames.begin(), kEndOfGenerationNames.end(), t.text) != kEndOfGenerationNames.end()) {
      t.attr |= kAttrControl;
    }
  }

  // Added tokens are matched longest first, like llama.cpp's cache_special_tokens.
  std::vector<std::int32_t> order;
  for (std::size_t i = 0; i < n; ++i) {
    if (cfg.tokens[i].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) order.push_back(static_cast<std::int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return cfg.tokens[a].text.size() > cfg.tokens[b].text.size(); });

  // Phi-3: special tokens swallow the whitespace after them, except <unk>, <s> and <|endoftext|>.
  std::string name;
  if (const gguf::Value* v = file.find("general.name"); v && v->type == gguf::ValueType::string) name = to_lower(v->as_string());
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (std::int32_t id : order) cfg.tokens[id].attr |= kAttrRstrip;
    auto set = [&](std::string_view text, bool on) {
      if (auto it = seen.find(std::string(text)); it != seen.end()) {
        auto& a = cfg.tokens[it->second].attr;
        a = on ? (a | kAttrRstrip) : (a & ~kAttrRstrip);
      }
    };
    set("</s>", true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, false);
  }

  for (std::int32_t id : order) {
    const uint32_t a = cfg.tokens[id].attr;
    cfg.added.push_back({id, (a & (kAttrControl | kAttrUnknown)) != 0, (a & kAttrLstrip) != 0, (a & kAttrRstrip) != 0, false});
  }
  return std::make_unique<SpmTokenizer>(std::move(cfg));
}

}  // namespace mo::tok
