#pragma once
#include <vector>

#include "mo/model/model_shape.h"

namespace mo::model {

// Per-frequency RoPE factors of llama3 scaling ([head_dim / 2], the angle of pair i is divided by
// factor i), computed as llama.cpp's converter does for rope_freqs.weight.
std::vector<float> llama3_rope_factors(const Hparams& hp);

}  // namespace mo::model
