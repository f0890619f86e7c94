#pragma once
// One decoder layer decoded to f32 for quantization, and the inputs its linear layers saw on the
// calibration tokens. The quantizers transform these in place (AWQ folds scales into the norms and
// linears, clipping clamps weights); the pipeline then quantizes each linear and writes it out.
#include <cstdint>
#include <vector>

#include "mo/engine/engine.h"

namespace mo::quant {

struct LayerF32 {
  std::int64_t hidden = 0, q_dim = 0, kv_dim = 0, ffn = 0;
  std::vector<float> attn_norm, ffn_norm;  // [hidden]
  std::vector<float> q, k, v, o, gate, up,
      down;  // row-major [out, in]: [q_dim|kv_dim|kv_dim, hidden], [hidden, q_dim], [ffn, hidden] x2, [hidden, ffn]
  std::vector<float>& weight(engine::LinearId id);
  const std::vector<float>& weight(engine::LinearId id) const;
  std::int64_t rows(engine::LinearId id) const;
  std::int64_t cols(engine::LinearId id) const;
  // The dimensions of a layer of `hp` (no weights yet).
  static LayerF32 dims_of(const model::Hparams& hp);
};

// Inputs of the linears on (a subsample of) the calibration tokens, rows in token order.
struct LayerInputs {
  std::int64_t n = 0;                           // tokens captured
  std::vector<float> attn_in;                   // [n, hidden]: input of q/k/v (after input_layernorm)
  std::vector<float> o_in;                      // [n, q_dim]:  input of o_proj (attention output)
  std::vector<float> mlp_in;                    // [n, hidden]: input of gate/up (after post_attention_layernorm)
  std::vector<float> down_in;                   // [n, ffn]:    input of down_proj (silu(gate) * up)
  std::vector<float>& of(engine::LinearId id);  // q/k/v -> attn_in, gate/up -> mlp_in
  const std::vector<float>& of(engine::LinearId id) const;
};

inline constexpr engine::LinearId kAllLinears[] = {engine::LinearId::q,    engine::LinearId::k,  engine::LinearId::v,   engine::LinearId::o,
                                                   engine::LinearId::gate, engine::LinearId::up, engine::LinearId::down};

}  // namespace mo::quant
