#pragma once
// Logits of one sequence at positions 0..n-1 through the engine's per-layer entry points (no KV cache,
// no batching): what tests recompute a metric from, beside the forward() path the library uses.
#include <cstdint>
#include <span>
#include <vector>

#include "mo/engine/engine.h"

namespace mo::test {

// [n, vocab]
inline std::vector<float> layer_by_layer_logits(engine::Engine& e, std::span<const std::int32_t> tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::vector<float> hidden(static_cast<std::size_t>(n * e.hparams().hidden_size));
  e.embed(tokens, hidden.data());
  for (int l = 0; l < e.hparams().num_layers; ++l) e.run_layer(l, hidden.data(), n, 0);
  std::vector<float> out(static_cast<std::size_t>(n * e.hparams().vocab_size));
  e.logits(hidden.data(), n, out.data());
  return out;
}

}  // namespace mo::test
