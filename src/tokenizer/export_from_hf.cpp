// tokenizer.json (+ tokenizer_config.json) -> GGUF tokenizer keys, following convert_hf_to_gguf.py:
// _set_vocab_llama_hf for SentencePiece-style BPE (byte_fallback), _set_vocab_gpt2 / get_vocab_base
// for byte-level BPE.
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "export_internal.h"
#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/tokenizer/tokenizer_export.h"

namespace mo::tok {

namespace {

using gguf::Value;
using nlohmann::json;
using namespace hfx;

constexpr const char* kSource = "tokenizer.json";

bool is_byte_token(const std::string& t) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
  return s;
}

// SentencePiece's dummy prefix: Prepend("▁") (legacy layout) or a Metaspace that prepends.
bool spm_adds_space_prefix(const json& tj) {
  const auto prepends = [](const json& n, const auto& self) -> bool {
    if (!n.is_object()) return false;
    const std::string type = n.value("type", "");
    if (type == "Sequence") {
      for (const auto& key : {"normalizers", "pretokenizers"})
        if (n.contains(key))
          for (const auto& step : n[key])
            if (self(step, self)) return true;
      return false;
    }
    if (type == "Prepend") return n.value("prepend", "") == kSpmSpace;
    if (type == "Metaspace") {
      if (n.contains("prepend_scheme")) return n["prepend_scheme"] != "never";
      return n.value("add_prefix_space", true);
    }
    return false;
  };
  return prepends(tj.value("normalizer", json(nullptr)), prepends) || prepends(tj.value("pre_tokenizer", json(nullptr)), prepends);
}

// llama.cpp normalizes nothing but SentencePiece's spaces, so any other normalizer would change
// the ids. NFC is let through as convert_hf_to_gguf.py does for Qwen (its texts are NFC already).
void check_normalizer(const json& n, bool spm) {
  if (n.is_null()) return;
  const std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const auto& step : n.value("normalizers", json::array())) check_normalizer(step, spm);
    return;
  }
  const bool ok =
      spm ? (type == "Prepend" && n.value("prepend", "") == kSpmSpace) || (type == "Replace" && n.value("content", "") == kSpmSpace)
          : type == "NFC";
  if (!ok)
    throw Error(std::string(kSource) + ": normalizer " + n.dump() + " has no llama.cpp equivalent for a " +
                (spm ? "SentencePiece-style" : "byte-level") + " vocabulary");
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
};

// get_vocab_base / LlamaHfVocab: ids the tokenizer does not use become "[PAD<id>]" of type UNUSED.
Vocab collect_vocab(const json& tj, const json& config, bool spm, std::int64_t vocab_size) {
  const json& vocab = tj.at("model").at("vocab");
  if (!vocab.is_object()) throw Error(std::string(kSource) + ": model.vocab is not an object");
  const json added = tj.value("added_tokens", json::array());
  // Ids index the vocabulary table: bounded so a hostile id cannot ask for gigabytes.
  auto token_id = [](const json& id, const std::string& field) {
    const auto v = json_int<std::int64_t>(id, kSource, field);
    if (v < 0 || v >= (1 << 24)) throw Error(fmt::format("{}: '{}' is {}, expected a token id in [0, {})", kSource, field, v, 1 << 24));
    return v;
  };
  std::int64_t n = 0;
  for (const auto& [text, id] : vocab.items()) n = std::max<std::int64_t>(n, token_id(id, "model.vocab." + text) + 1);
  for (const auto& t : added) n = std::max<std::int64_t>(n, token_id(t.at("id"), "added_tokens.id") + 1);
  if (vocab_size > 0) {
    if (n > vocab_size)
      throw Error(std::string(kSource) + ": token id " + std::to_string(n - 1) + " does not fit vocab_size " + std::to_string(vocab_size) +
                  " (config.json)");
    n = vocab_size;
  }

  Vocab v;
  v.tokens.resize(n);
  v.types.assign(n, kTypeUnused);
  for (std::int64_t i = 0; i < n; ++i) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [text, id_json] : vocab.items()) {
    const auto id = token_id(id_json, "model.vocab." + text);
    v.tokens[id] = text;
    v.types[id] = spm && is_byte_token(text) ? kTypeByte : kTypeNormal;
  }
  std::optional<std::string> unk = config_token(config, "unk_token");
  if (!unk && tj["model"].value("unk_token", json(nullptr)).is_string()) unk = tj["model"]["unk_token"].get<std::string>();
  for (const auto& t : added) {
    const auto id = token_id(t.at("id"), "added_tokens.id");
    const std::string content = t.at("content").get<std::string>();
    if (t.value("special", false) || token_looks_special(content)) {
      v.tokens[id] = content;
      v.types[id] = spm && content == unk ? kTypeUnknown : kTypeControl;
    } else {
      // llama.cpp matches user-defined tokens in raw text, so their spaces are real spaces.
      v.tokens[id] = replace_all(content, kSpmSpace, " ");
      v.types[id] = kTypeUserDefined;
    }
  }
  std::unordered_map<std::string_view, std::int64_t> seen;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto [it, fresh] = seen.emplace(v.tokens[i], i);
    if (!fresh)
      throw Error(std::string(kSource) + ": token '" + v.tokens[i] + "' has ids " + std::to_string(it->second) + " and " +
                  std::to_string(i) + "; llama.cpp rejects duplicate tokens");
  }
  return v;
}

// gguf-py SpecialVocab: a space inside a merge part (new ["a", "b"] format) is written as U+0120.
std::vector<std::string> gguf_merges(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (const auto& [l, r] : merges) out.push_back(replace_all(l, " ", "\xc4\xa0") + " " + replace_all(r, " ", "\xc4\xa0"));
  return out;
}

}  // namespace

std::vector<std::pair<std::string, gguf::Value>> gguf_tokenizer_kv_from_hf(const json& tj, const json& config, std::int64_t vocab_size) {
  if (!tj.is_object() || !tj.contains("model")) throw Error(std::string(kSource) + ": no \"model\" object");
  const json& model = tj["model"];
  const std::string type = model.value("type", "");
  if (type != "BPE")
    throw Error(std::string(kSource) + ": model type '" + type +
                "' is not supported (only BPE: SentencePiece-style with byte_fallback, or byte-level)");
  const bool spm = model.value("byte_fallback", false);
  check_normalizer(tj.value("normalizer", json(nullptr)), spm);
  const std::string pre = spm ? "default" : gguf_pre_from_hf(tj, config, kSource);
  const Vocab v = collect_vocab(tj, config, spm, vocab_size);
  const auto merges = parse_hf_merges(model.value("merges", json::array()), kSource);

  KeyValues out;
  out.emplace_back("tokenizer.ggml.model", Value::str(spm ? "llama" : "gpt2"));
  out.emplace_back("tokenizer.ggml.pre", Value::str(pre));
  out.emplace_back("tokenizer.ggml.tokens", Value::array_of_strings(v.tokens));
  if (spm) out.emplace_back("tokenizer.ggml.scores", Value::array_of_f32(spm_scores_from_merges(v.tokens, v.types, merges)));
  out.emplace_back("tokenizer.ggml.token_type", Value::array_of_i32(v.types));
  // llama.cpp puts a space in front of SPM text unless told otherwise, so only "false" is written.
  if (spm && !spm_adds_space_prefix(tj)) out.emplace_back("tokenizer.ggml.add_space_prefix", Value::boolean(false));
  if (!spm) out.emplace_back("tokenizer.ggml.merges", Value::array_of_strings(gguf_merges(merges)));
  append_special_kv(tj, config, v.tokens.size(), out);
  return out;
}

}  // namespace mo::tok
