#include "mo/model/rope.h"

#include <cmath>
#include <numbers>

namespace mo::model {

std::vector<float> llama3_rope_factors(const Hparams& hp) {
  const auto& rs = hp.rope_scaling;
  const double old_ctx = static_cast<double>(rs.original_max_position_embeddings);
  const double low_wavelen = old_ctx / rs.low_freq_factor, high_wavelen = old_ctx / rs.high_freq_factor;
  std::vector<float> factors;
  for (std::int64_t i = 0; i < hp.head_dim; i += 2) {
    const double freq = 1.0 / std::pow(hp.rope_theta, static_cast<double>(i) / hp.head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(rs.factor));
    } else {
      const double smooth = (old_ctx / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / rs.factor + smooth)));
    }
  }
  return factors;
}

}  // namespace mo::model
