// make_bpe_from_gguf: tokenizer.ggml.model "gpt2" vocabularies, read the way llama.cpp reads them.
#include <fmt/format.h>

#include "bpe_pre_types.h"
#include "bpe_tokenizer.h"
#include "factories.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"

namespace mo::tok {

namespace {

// llama_token_type in llama.cpp.
enum TokenType : std::int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const std::vector<gguf::Value>& require_array(const gguf::File& f, const char* key, gguf::ValueType elem) {
  const gguf::Value* v = f.find(key);
  if (!v) throw Error(fmt::format("{}: metadata key '{}' is missing", f.path, key));
  if (v->type != gguf::ValueType::array || v->elem_type != elem) {
    throw Error(
        fmt::format("{}: metadata key '{}' is {}, expected array of {}", f.path, key, gguf::type_name(v->type), gguf::type_name(elem)));
  }
  return v->as_array();
}

std::optional<bool> get_bool_opt(const gguf::File& f, const char* key) {
  const gguf::Value* v = f.find(key);
  if (!v) return std::nullopt;
  try {
    return v->as_bool();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: metadata key '{}': {}", f.path, key, e.what()));
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_from_gguf(const gguf::File& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2") throw Error(fmt::format("{}: tokenizer.ggml.model is '{}', not 'gpt2'", f.path, model));

  BpeSetup s;
  s.source = f.path;
  const auto pre_opt = f.find("tokenizer.ggml.pre");
  s.pre_name = pre_opt ? f.get_string("tokenizer.ggml.pre") : "default";
  const GgufPreType* pre = find_gguf_pre_type(s.pre_name);
  if (!pre) throw Error(fmt::format("{}: tokenizer.ggml.pre '{}' is not a supported pre-tokenizer type", f.path, s.pre_name));
  s.pre_tokenizer = std::make_unique<PreTokenizer>(PreTokenizer::from_regexes(pre->regexes, f.path));
  s.model_options.ignore_merges = pre->ignore_merges;
  s.model_options.duplicate_merge_keeps_first = true;  // llama.cpp's bpe_ranks.emplace

  const auto& tokens = require_array(f, "tokenizer.ggml.tokens", gguf::ValueType::string);
  const gguf::Value* types_v = f.find("tokenizer.ggml.token_type");
  const std::vector<gguf::Value>* types = types_v ? &require_array(f, "tokenizer.ggml.token_type", types_v->elem_type) : nullptr;
  if (types && types->size() < tokens.size()) {
    throw Error(
        fmt::format("{}: metadata key 'tokenizer.ggml.token_type' has {} entries for {} tokens", f.path, types->size(), tokens.size()));
  }
  const std::size_t n = tokens.size();
  s.text.resize(n);
  s.form.resize(n, BpeSetup::mapped);
  s.special.resize(n, 0);
  s.model_vocab.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::int32_t>(i);
    s.text[i] = tokens[i].as_string();
    const std::int64_t type = types ? (*types)[i].as_int() : kNormal;
    switch (type) {
      case kControl:
      case kUnknown:
      case kUserDefined:
        // Stored as raw text; llama.cpp finds user-defined tokens in any text, control and unknown ones
        // only when parsing special tokens.
        s.form[i] = BpeSetup::raw;
        s.special[i] = type != kUserDefined;
        if (!s.text[i].empty()) s.added.push_back({s.text[i], id, type != kUserDefined});
        break;
      case kByte: s.form[i] = BpeSetup::byte; break;
      default: s.model_vocab.emplace(s.text[i], id);
    }
  }

  const auto& merges = require_array(f, "tokenizer.ggml.merges", gguf::ValueType::string);
  s.merges.reserve(merges.size());
  for (const auto& m : merges) {
    const std::string& line = m.as_string();
    const std::size_t space = line.find(' ', 1);
    if (space == std::string::npos) continue;  // llama.cpp keeps it as an unusable ("", "") pair
    s.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }

  SpecialTokens& st = s.special_tokens;
  const auto id_key = [&](const char* key) -> std::optional<std::int32_t> {
    const auto v = f.get_int_opt(key);
    if (!v || *v < 0 || static_cast<std::size_t>(*v) >= n) return std::nullopt;  // llama.cpp ignores bad ids too
    return static_cast<std::int32_t>(*v);
  };
  st.bos = id_key("tokenizer.ggml.bos_token_id");
  st.eos = id_key("tokenizer.ggml.eos_token_id");
  st.unk = id_key("tokenizer.ggml.unknown_token_id");
  st.pad = id_key("tokenizer.ggml.padding_token_id");
  st.add_bos = get_bool_opt(f, "tokenizer.ggml.add_bos_token").value_or(pre->add_bos);
  st.add_eos = get_bool_opt(f, "tokenizer.ggml.add_eos_token").value_or(false);
  if (st.add_bos && !st.bos) {
    throw Error(f.path + ": tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  }
  if (st.add_eos && !st.eos) {
    throw Error(f.path + ": tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
  }
  if (st.add_bos) s.prefix.push_back(*st.bos);
  if (st.add_eos) s.suffix.push_back(*st.eos);
  return std::make_unique<BpeTokenizer>(std::move(s));
}

}  // namespace mo::tok
