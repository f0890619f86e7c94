#pragma once
#include <vector>

#include "mo/model/model_shape.h"

namespace mo::model {

// Per-frequency RoPE factors of llama3 scaling ([head_dim / 2], the angle of pair i is divided by
// factor i), computed as llama.cpp's converter does for rope_freqs.weight.
std::vector<float> llama3_rope_factors(const Hparams& hp);

// The factor positions are multiplied by: 1 / factor for linear scaling; 1 otherwise (llama3 scaling
// uses the per-pair factors above instead).
inline float rope_freq_scale(const Hparams& hp) {
  return hp.rope_scaling.type == "linear" ? static_cast<float>(1.0 / hp.rope_scaling.factor) : 1.0f;
}

}  // namespace mo::model
