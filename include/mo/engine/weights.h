#pragma once
// The model's weights as the engine uses them: matrices stay in their stored format (F32, F16,
// BF16 or GGUF blocks) and point into the mapped file, so resident memory is about the file size;
// only the small vectors (norms, biases, RoPE factors) are decoded to f32.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mo/engine/rope_style.h"
#include "mo/model/model_files.h"

namespace mo::engine {

// An AWQ or GPTQ linear's tensors exactly as the checkpoint stores them (layouts in backend.h's
// LinearKind), kept beside the CPU form so a device backend runs its fused int4/int8 kernels on them.
// The spans point into the mapped files (or ModelWeights::owned for dummy weights).
struct PackedIntLinear {
  bool awq = false;  // else GPTQ
  int bits = 4;
  std::int64_t group_size = 0;  // inputs per group (cols for one group per row)
  std::int64_t groups = 0;
  bool zero_minus_one = false;                                   // GPTQ v1
  std::span<const std::uint8_t> qweight, qzeros, scales, g_idx;  // int32, int32, f16, int32 (g_idx may be empty)
};

// Matrix::type of a linear that has only its packed form (dummy AWQ weights): the CPU reads it with
// the reference kernel of the device layout.
inline constexpr std::uint32_t kPackedOnlyType = 0xFFFF;
// Matrix::type of AWQ / GPTQ INT4 linears on the CPU: blocks of 32 {stored f16 scale, zero, nibbles}
// (src/engine/cpu/q4z.h), dotted in integers with 8-bit activations.
inline constexpr std::uint32_t kQ4zType = 0x1001;

// A [rows, cols] matrix, row-major, each row `row_bytes` long in ggml type `type`.
struct Matrix {
  std::string name;
  std::uint32_t type = 0;
  std::int64_t rows = 0;  // output features
  std::int64_t cols = 0;  // input features (the row length)
  std::size_t row_bytes = 0;
  std::span<const std::uint8_t> bytes;
  std::shared_ptr<const PackedIntLinear> packed;  // AWQ / GPTQ checkpoints: the stored tensors
  // GPTQ act-order: stored column i is input in_perm[i] (groups made contiguous); linear gathers x so.
  std::shared_ptr<const std::vector<std::int32_t>> in_perm;
  bool empty() const { return rows == 0; }
  const std::uint8_t* row(std::int64_t r) const { return bytes.data() + static_cast<std::size_t>(r) * row_bytes; }
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [hidden]
  Matrix wq, wk, wv, wo;                   // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  std::vector<float> bq, bk, bv;           // empty unless the model has q/k/v bias
  Matrix w_gate, w_up, w_down;             // [ffn, hidden] x2, [hidden, ffn]
};

struct ModelWeights {
  model::Hparams hp;
  Matrix token_embd;               // [vocab, hidden]
  Matrix output;                   // [vocab, hidden]; token_embd when tied
  std::vector<float> output_norm;  // [hidden]
  std::vector<LayerWeights> layers;
  RopeStyle rope_style = RopeStyle::normal;
  std::vector<float> rope_freq_factors;          // [head_dim / 2] for llama3 scaling, else empty
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

// Random AWQ GEMM 4-bit weights (group `group_size`) for every layer linear, f16 embeddings and head:
// the shape of an AutoAWQ checkpoint, for device speed tests (--dummy-type awq). Matrices are
// kPackedOnlyType.
ModelWeights dummy_awq_weights(const model::Hparams& hp, std::int64_t group_size = 128, std::uint64_t seed = 1);

}  // namespace mo::engine
