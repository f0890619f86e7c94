#include "mo/model/model_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/io/gguf.h"
#include "mo/io/gguf_dequant.h"
#include "mo/model/tensor_names.h"

namespace mo::model {
namespace {

// HF users read shapes outermost first (PyTorch's order), GGUF users ne[0] first (llama.cpp's).
std::string shape_text(const ModelFiles& m, std::vector<std::uint64_t> ne) {
  if (m.format() != "gguf") std::reverse(ne.begin(), ne.end());
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

void check_stored(const ModelFiles& m, const StoredTensor& t, const std::string& layers_key) {
  const std::string& name = t.file_name;
  const std::size_t max = m.format() == "gguf" ? kMaxGgufTensorName : kMaxHfTensorName;
  if (name.empty()) throw Error(fmt::format("{}: a tensor has an empty name", m.path()));
  if (name.size() > max)
    throw Error(fmt::format("{}: tensor '{}': the name is {} bytes long (at most {})", m.path(), shown_name(name), name.size(), max));
  if (std::any_of(name.begin(), name.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    throw Error(fmt::format("{}: tensor '{}': the name holds control characters", m.path(), shown_name(name)));
  if (t.ne.empty()) throw Error(fmt::format("{}: tensor '{}' has no dimensions", m.path(), name));
  if (std::find(t.ne.begin(), t.ne.end(), 0) != t.ne.end())
    throw Error(fmt::format("{}: tensor '{}' has a dimension of 0 (shape {})", m.path(), name, shape_text(m, t.ne)));
  // A layer the block count leaves out would be dropped without a word, and the model would run without it.
  const std::int64_t layers = m.shape().hp.num_layers;
  if (const auto layer = layer_index(name); layer && *layer >= layers)
    throw Error(fmt::format("{}: tensor '{}' belongs to layer {}, but {} is {} (layers 0 to {})", m.path(), name, *layer, layers_key,
                            layers, layers - 1));
}

void check_expected(const ModelFiles& m, const std::string& name, Role role, std::vector<std::uint64_t> want) {
  const StoredTensor* t = m.find(name);
  const std::string shown = m.format() == "gguf" ? name : gguf_to_hf_name(name).value_or(name);
  if (!t) {
    // No output matrix: the embedding is the head (tied), as llama.cpp and Transformers read it. Q/K/V
    // biases are optional per tensor, as llama.cpp's Llama loader has them.
    if (role == Role::output || role == Role::bias) return;
    throw Error(fmt::format("{}: tensor '{}' is missing", m.path(), shown));
  }
  if (t->ne != want)
    throw Error(
        fmt::format("{}: tensor '{}': expected shape {}, found {}", m.path(), t->file_name, shape_text(m, want), shape_text(m, t->ne)));
  if (!t->ggml_type || !gguf::can_dequantize(*t->ggml_type))
    throw Error(fmt::format("{}: tensor '{}': type {} is not one we read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K)",
                            m.path(), t->file_name, t->dtype));
}

void check_tensors(const ModelFiles& m) {
  Hparams hp = m.shape().hp;
  const std::string layers_key = m.gguf() ? m.gguf()->get_string("general.architecture") + ".block_count" : "num_hidden_layers";
  for (const auto& t : m.tensors()) check_stored(m, t, layers_key);
  // Linears of AWQ/GPTQ/FP8 checkpoints are stored in their own layouts, checked where the engine decodes them.
  const bool quantized = !m.quantization_config().is_null();
  hp.tied_embeddings = false;  // an output matrix is optional, but one that is there must fit
  for (const WeightTensor& w : tensors_from_hparams(hp)) {
    if (quantized && (is_quantizable_linear(w.role) || w.role == Role::output)) continue;
    const bool vector = w.role == Role::norm || w.role == Role::bias;
    check_expected(m, w.name, w.role, vector ? std::vector<std::uint64_t>{w.cols} : std::vector<std::uint64_t>{w.cols, w.rows});
  }
  if (m.find("rope_freqs.weight")) check_expected(m, "rope_freqs.weight", Role::other, {static_cast<std::uint64_t>(hp.head_dim / 2)});
}

std::unique_ptr<tok::Tokenizer> check_tokenizer(const ModelFiles& m, TokenizerUse use) {
  if (m.tokenizer_path().empty()) {
    if (use == TokenizerUse::optional) return nullptr;
    throw UsageError(fmt::format("{}: the model has no tokenizer ({})", m.path(),
                                 m.gguf() ? "no tokenizer.ggml.model key" : "no tokenizer.json in the directory"));
  }
  auto tok = load_tokenizer(m);
  // An id past the embedding would index outside it the first time a text holds that token.
  const std::int64_t vocab = m.shape().hp.vocab_size;
  if (tok->vocab_size() > vocab) {
    std::int32_t id = static_cast<std::int32_t>(vocab);
    while (id + 1 < tok->vocab_size() && tok->token_text(id).empty()) ++id;
    throw Error(fmt::format("{}: token '{}' has id {}, outside the model's vocabulary of {} ({})", m.tokenizer_path(),
                            shown_name(tok->token_text(id)), id, vocab, m.gguf() ? "token_embd.weight rows" : "vocab_size in config.json"));
  }
  return tok;
}

}  // namespace

std::unique_ptr<tok::Tokenizer> load_tokenizer(const ModelFiles& m) {
  if (m.tokenizer_path().empty()) return nullptr;
  return m.gguf() ? tok::load_tokenizer_gguf(*m.gguf()) : tok::load_tokenizer_json(m.tokenizer_path());
}

std::unique_ptr<tok::Tokenizer> check_model(const ModelFiles& m, TokenizerUse use) {
  if (m.shape().hp.num_experts > 0) throw UsageError(fmt::format("{}: mixture-of-experts models are not supported yet", m.path()));
  check_tensors(m);
  return check_tokenizer(m, use);
}

}  // namespace mo::model
