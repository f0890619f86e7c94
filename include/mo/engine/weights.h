#pragma once
// The model's weights as the engine uses them: matrices stay in their stored format (F32, F16,
// BF16 or GGUF blocks) and point into the mapped file, so resident memory is about the file size;
// only the small vectors (norms, biases, RoPE factors) are decoded to f32.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mo/model/model_files.h"

namespace mo::engine {

// A [rows, cols] matrix, row-major, each row `row_bytes` long in ggml type `type`.
struct Matrix {
  std::string name;
  std::uint32_t type = 0;
  std::int64_t rows = 0;  // output features
  std::int64_t cols = 0;  // input features (the row length)
  std::size_t row_bytes = 0;
  std::span<const std::uint8_t> bytes;
  bool empty() const { return rows == 0; }
  const std::uint8_t* row(std::int64_t r) const { return bytes.data() + static_cast<std::size_t>(r) * row_bytes; }
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [hidden]
  Matrix wq, wk, wv, wo;                   // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  std::vector<float> bq, bk, bv;           // empty unless the model has q/k/v bias
  Matrix w_gate, w_up, w_down;             // [ffn, hidden] x2, [hidden, ffn]
};

// How RoPE pairs the dimensions of a head: `normal` rotates (2i, 2i+1) — GGUF Llama, whose Q/K rows
// were permuted at conversion; `neox` rotates (i, i + d/2) — HF checkpoints and Qwen2.
enum class RopeStyle { normal, neox };

struct ModelWeights {
  model::Hparams hp;
  Matrix token_embd;                       // [vocab, hidden]
  Matrix output;                           // [vocab, hidden]; token_embd when tied
  std::vector<float> output_norm;          // [hidden]
  std::vector<LayerWeights> layers;
  RopeStyle rope_style = RopeStyle::normal;
  std::vector<float> rope_freq_factors;    // [head_dim / 2] for llama3 scaling, else empty
  std::vector<std::vector<std::uint8_t>> owned;  // backing store for generated (dummy) weights
  std::uint64_t matrix_bytes() const;
};

// Binds the tensors of `files` (kept alive by the caller) to the engine's layout. Throws Error naming
// the missing or mis-shaped tensor.
ModelWeights bind_weights(const model::ModelFiles& files);

// Random weights with the shapes of `hp` in ggml type `type` (F32, F16, BF16 or any GGUF block type
// up to Q6_K), for speed tests of large shapes without files (--load-format dummy) and for per-format
// tests. Deterministic for a given seed.
ModelWeights dummy_weights(const model::Hparams& hp, std::uint32_t type, std::uint64_t seed = 1);

}  // namespace mo::engine
