#pragma once
// The elementwise and per-row ops of the Llama block, f32 on the CPU.
#include <cstdint>
#include <span>

#include "mo/engine/weights.h"

namespace mo::ops {

// out[i] = x[i] / sqrt(mean(x²) + eps) * w[i], for each of n rows of length d. out may alias x.
void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps);

// Rotates each head of x ([n_heads, head_dim], one token) for position `pos`. Pair i (i < head_dim/2)
// uses angle pos * freq_scale * theta^(-2i/head_dim) / factors[i] (factors empty = 1); `normal` pairs
// dims (2i, 2i+1), `neox` pairs (i, i + head_dim/2).
void rope(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int64_t pos, float theta, float freq_scale,
          std::span<const float> factors, engine::RopeStyle style);

// gate[i] = silu(gate[i]) * up[i]
void silu_mul(float* gate, const float* up, std::int64_t n);

// In-place softmax of x[0, n).
void softmax(float* x, std::int64_t n);

}  // namespace mo::ops
