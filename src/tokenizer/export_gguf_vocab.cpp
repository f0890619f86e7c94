// Reads the tokenizer keys of a GGUF file once, with errors that name the file and key.
#include <string>
#include <string_view>
#include <vector>

#include "export_internal.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"

namespace mo::tok::hfx {

namespace {

using gguf::Value;
using gguf::ValueType;

[[noreturn]] void bad_key(const gguf::File& f, std::string_view key, const std::string& what) {
  throw Error(f.path + ": metadata key '" + std::string(key) + "' " + what);
}

std::string describe(const Value& v) {
  return v.type == ValueType::array ? "array of " + gguf::type_name(v.elem_type) : gguf::type_name(v.type);
}

// The elements of array key `key` (nullptr when absent), checked to hold `n` values if n >= 0.
const std::vector<Value>* array_key(const gguf::File& f, std::string_view key, std::int64_t n = -1) {
  const Value* v = f.find(key);
  if (v == nullptr) return nullptr;
  if (v->type != ValueType::array) bad_key(f, key, "is " + describe(*v) + ", expected an array");
  const auto& elems = v->as_array();
  if (n >= 0 && static_cast<std::int64_t>(elems.size()) != n)
    bad_key(f, key, "has " + std::to_string(elems.size()) + " entries for " + std::to_string(n) + " tokens");
  return &elems;
}

template <typename T, typename Get>
std::vector<T> elements(const gguf::File& f, std::string_view key, const std::vector<Value>& elems, Get get) {
  std::vector<T> out;
  out.reserve(elems.size());
  for (std::size_t i = 0; i < elems.size(); ++i) {
    try {
      out.push_back(get(elems[i]));
    } catch (const Error&) {
      bad_key(f, key, "element " + std::to_string(i) + " is " + describe(elems[i]));
    }
  }
  return out;
}

std::optional<bool> bool_key(const gguf::File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::boolean) bad_key(f, key, "is " + describe(*v) + ", expected bool");
  return v->as_bool();
}

std::optional<std::string> string_key(const gguf::File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::string) bad_key(f, key, "is " + describe(*v) + ", expected string");
  return v->as_string();
}

// llama.cpp ignores a special token id outside the vocabulary (stories260K stores 0xFFFFFFFF for
// "none"), so it becomes "no such token" here too.
std::optional<std::int32_t> id_key(const gguf::File& f, std::string_view key, std::size_t n_tokens) {
  const Value* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_int()) bad_key(f, key, "is " + describe(*v) + ", expected an integer");
  const std::int64_t id = v->as_int();
  if (id < 0 || id >= static_cast<std::int64_t>(n_tokens)) return std::nullopt;
  return static_cast<std::int32_t>(id);
}

}  // namespace

GgufVocab read_gguf_vocab(const gguf::File& f) {
  GgufVocab v;
  v.path = f.path;
  const auto model = string_key(f, "tokenizer.ggml.model");
  if (!model) throw Error(f.path + ": metadata key 'tokenizer.ggml.model' is missing (no tokenizer in this file)");
  v.model = *model;
  v.pre = string_key(f, "tokenizer.ggml.pre");

  const auto* tokens = array_key(f, "tokenizer.ggml.tokens");
  if (tokens == nullptr) throw Error(f.path + ": metadata key 'tokenizer.ggml.tokens' is missing");
  v.tokens = elements<std::string>(f, "tokenizer.ggml.tokens", *tokens, [](const Value& e) { return e.as_string(); });
  const auto n = static_cast<std::int64_t>(v.tokens.size());

  if (const auto* scores = array_key(f, "tokenizer.ggml.scores", n))
    v.scores = elements<float>(f, "tokenizer.ggml.scores", *scores, [](const Value& e) { return static_cast<float>(e.as_number()); });
  if (const auto* types = array_key(f, "tokenizer.ggml.token_type", n))
    v.types = elements<std::int32_t>(f, "tokenizer.ggml.token_type", *types,
                                     [](const Value& e) { return static_cast<std::int32_t>(e.as_int()); });
  else
    v.types.assign(v.tokens.size(), kTypeNormal);
  if (const auto* merges = array_key(f, "tokenizer.ggml.merges"))
    v.merges = elements<std::string>(f, "tokenizer.ggml.merges", *merges, [](const Value& e) { return e.as_string(); });

  v.bos = id_key(f, "tokenizer.ggml.bos_token_id", v.tokens.size());
  v.eos = id_key(f, "tokenizer.ggml.eos_token_id", v.tokens.size());
  v.unk = id_key(f, "tokenizer.ggml.unknown_token_id", v.tokens.size());
  v.pad = id_key(f, "tokenizer.ggml.padding_token_id", v.tokens.size());
  v.add_bos = bool_key(f, "tokenizer.ggml.add_bos_token");
  v.add_eos = bool_key(f, "tokenizer.ggml.add_eos_token");
  v.add_space_prefix = bool_key(f, "tokenizer.ggml.add_space_prefix");

  v.chat_template = string_key(f, "tokenizer.chat_template");
  constexpr std::string_view kNamedTemplate = "tokenizer.chat_template.";
  for (const auto& [key, value] : f.metadata) {
    if (key.size() > kNamedTemplate.size() && key.compare(0, kNamedTemplate.size(), kNamedTemplate) == 0)
      v.named_chat_templates.emplace_back(key.substr(kNamedTemplate.size()), *string_key(f, key));
  }
  if (const auto arch = string_key(f, "general.architecture")) {
    const std::string key = *arch + ".context_length";
    if (const Value* ctx = f.find(key); ctx != nullptr && ctx->is_int()) v.context_length = ctx->as_int();
  }
  return v;
}

}  // namespace mo::tok::hfx
