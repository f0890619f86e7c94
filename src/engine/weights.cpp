#include "mo/engine/weights.h"

#include <fmt/format.h>

#include <cstring>
#include <random>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/io/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/model/rope.h"

namespace mo::engine {
namespace {

Matrix matrix_of(const model::StoredTensor& t, std::int64_t rows, std::int64_t cols) {
  if (!t.ggml_type) throw Error(fmt::format("{}: tensors of type {} are not supported by the engine", t.file_name, t.dtype));
  if (t.ne.size() != 2 || static_cast<std::int64_t>(t.ne[0]) != cols || static_cast<std::int64_t>(t.ne[1]) != rows)
    throw Error(fmt::format("{}: expected shape [{}, {}] (rows, cols), found ne {}", t.file_name, rows, cols, fmt::join(t.ne, "x")));
  Matrix m;
  m.name = t.name;
  m.type = *t.ggml_type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = ggml_row_bytes(m.type, static_cast<std::uint64_t>(cols));
  m.bytes = t.bytes;
  return m;
}

std::vector<float> vector_of(const model::StoredTensor& t, std::int64_t n) {
  if (!t.ggml_type || t.n_elements() != static_cast<std::uint64_t>(n))
    throw Error(fmt::format("{}: expected {} elements of a float type, found {} of {}", t.file_name, n, t.n_elements(), t.dtype));
  std::vector<float> v(n);
  gguf::dequantize_row(*t.ggml_type, t.bytes.data(), v.data(), n);
  return v;
}

const model::StoredTensor& need(const model::ModelFiles& f, const std::string& name) {
  const auto* t = f.find(name);
  if (!t) throw Error(fmt::format("{}: tensor '{}' is missing", f.path(), name));
  return *t;
}

}  // namespace

std::uint64_t ModelWeights::matrix_bytes() const {
  std::uint64_t n = token_embd.bytes.size() + (output.bytes.data() != token_embd.bytes.data() ? output.bytes.size() : 0);
  for (const auto& l : layers)
    for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) n += m->bytes.size();
  return n;
}

ModelWeights bind_weights(const model::ModelFiles& f) {
  ModelWeights w;
  w.hp = f.shape().hp;
  const auto& hp = w.hp;
  if (hp.num_experts > 0) throw UsageError(fmt::format("{}: mixture-of-experts models are not supported by the engine yet", f.path()));
  const std::int64_t h = hp.hidden_size, q = hp.num_heads * hp.head_dim, kv = hp.num_kv_heads * hp.head_dim, ffn = hp.intermediate_size;
  w.token_embd = matrix_of(need(f, "token_embd.weight"), hp.vocab_size, h);
  w.output = f.find("output.weight") ? matrix_of(*f.find("output.weight"), hp.vocab_size, h) : w.token_embd;
  w.output_norm = vector_of(need(f, "output_norm.weight"), h);
  for (int i = 0; i < hp.num_layers; ++i) {
    auto n = [i](const char* part) { return fmt::format("blk.{}.{}", i, part); };
    LayerWeights l;
    l.attn_norm = vector_of(need(f, n("attn_norm.weight")), h);
    l.ffn_norm = vector_of(need(f, n("ffn_norm.weight")), h);
    l.wq = matrix_of(need(f, n("attn_q.weight")), q, h);
    l.wk = matrix_of(need(f, n("attn_k.weight")), kv, h);
    l.wv = matrix_of(need(f, n("attn_v.weight")), kv, h);
    l.wo = matrix_of(need(f, n("attn_output.weight")), h, q);
    l.w_gate = matrix_of(need(f, n("ffn_gate.weight")), ffn, h);
    l.w_up = matrix_of(need(f, n("ffn_up.weight")), ffn, h);
    l.w_down = matrix_of(need(f, n("ffn_down.weight")), h, ffn);
    if (const auto* b = f.find(n("attn_q.bias"))) l.bq = vector_of(*b, q);
    if (const auto* b = f.find(n("attn_k.bias"))) l.bk = vector_of(*b, kv);
    if (const auto* b = f.find(n("attn_v.bias"))) l.bv = vector_of(*b, kv);
    w.layers.push_back(std::move(l));
  }
  // HF checkpoints keep Q/K rows in rotate-half order; GGUF Llama files were permuted to pairs.
  w.rope_style = (f.format() == "safetensors" || hp.arch == "qwen2") ? RopeStyle::neox : RopeStyle::normal;
  if (const auto* rf = f.find("rope_freqs.weight")) w.rope_freq_factors = vector_of(*rf, hp.head_dim / 2);
  else if (hp.rope_scaling.type == "llama3") w.rope_freq_factors = model::llama3_rope_factors(hp);
  return w;
}

ModelWeights dummy_weights(const model::Hparams& hp, std::uint32_t type, std::uint64_t seed) {
  if (type != 0 && type != 1 && type != 30 && type != 2 && type != 8)
    throw UsageError(fmt::format("load-format dummy: weight type {} is not one of f32, f16, bf16, q4_0, q8_0", type));
  ModelWeights w;
  w.hp = hp;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  // Fills one matrix with N(0, 0.02) weights (block types: random quants with a matching scale).
  auto make = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    Matrix m;
    m.name = std::move(name);
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = ggml_row_bytes(type, static_cast<std::uint64_t>(cols));
    auto& buf = w.owned.emplace_back(m.row_bytes * rows);
    if (type == 2 || type == 8) {
      const std::size_t block = type == 2 ? 18 : 34;
      const std::uint16_t d = f32_to_f16(type == 2 ? 0.02f / 4 : 0.02f / 64);
      for (std::size_t off = 0; off < buf.size(); off += block) {
        std::memcpy(&buf[off], &d, 2);
        for (std::size_t j = 2; j < block; ++j) buf[off + j] = static_cast<std::uint8_t>(rng());
      }
    } else {
      for (std::int64_t i = 0; i < rows * cols; ++i) {
        float v = normal(rng);
        if (type == 0) std::memcpy(&buf[4 * i], &v, 4);
        else {
          std::uint16_t b = type == 1 ? f32_to_f16(v) : f32_to_bf16(v);
          std::memcpy(&buf[2 * i], &b, 2);
        }
      }
    }
    m.bytes = {buf.data(), buf.size()};
    return m;
  };
  const std::int64_t h = hp.hidden_size, q = hp.num_heads * hp.head_dim, kv = hp.num_kv_heads * hp.head_dim, ffn = hp.intermediate_size;
  w.token_embd = make("token_embd.weight", hp.vocab_size, h);
  w.output = hp.tied_embeddings ? w.token_embd : make("output.weight", hp.vocab_size, h);
  w.output_norm.assign(h, 1.0f);
  for (int i = 0; i < hp.num_layers; ++i) {
    LayerWeights l;
    l.attn_norm.assign(h, 1.0f);
    l.ffn_norm.assign(h, 1.0f);
    l.wq = make(fmt::format("blk.{}.attn_q.weight", i), q, h);
    l.wk = make(fmt::format("blk.{}.attn_k.weight", i), kv, h);
    l.wv = make(fmt::format("blk.{}.attn_v.weight", i), kv, h);
    l.wo = make(fmt::format("blk.{}.attn_output.weight", i), h, q);
    l.w_gate = make(fmt::format("blk.{}.ffn_gate.weight", i), ffn, h);
    l.w_up = make(fmt::format("blk.{}.ffn_up.weight", i), ffn, h);
    l.w_down = make(fmt::format("blk.{}.ffn_down.weight", i), h, ffn);
    if (hp.qkv_bias) {
      l.bq.assign(q, 0.0f);
      l.bk.assign(kv, 0.0f);
      l.bv.assign(kv, 0.0f);
    }
    w.layers.push_back(std::move(l));
  }
  w.rope_style = hp.arch == "qwen2" ? RopeStyle::neox : RopeStyle::normal;
  if (hp.rope_scaling.type == "llama3") w.rope_freq_factors = model::llama3_rope_factors(hp);
  return w;
}

}  // namespace mo::engine
