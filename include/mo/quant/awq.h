#pragma once
// AWQ (Lin et al. 2023) as AutoAWQ implements it (awq/quantize/quantizer.py): per scaling group an
// activation-aware scale search over a ratio grid, scales folded into the previous op, then a
// per-(row, group) clipping search. Works on one decoder layer in f32; the final rounding is
// quantize_rtn on the transformed weights.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/engine/backend.h"
#include "mo/quant/layer_f32.h"
#include "mo/formats/quantized_linear.h"

namespace mo::quant {

struct AwqOptions {
  int grid = 20;                      // ratios 0, 1/grid, ..., (grid-1)/grid
  bool duo_scaling = true;            // s = mean|x|^r / mean|w|^(1-r) (AutoAWQ's default)
  std::int64_t search_tokens = 4096;  // tokens of LayerInputs used by the scale search (evenly spaced)
  std::int64_t clip_tokens = 512;     // tokens used by the clip search (AutoAWQ's n_sample_token)
  double max_shrink = 0.5;            // clip search: max|w| * (1 - i/grid), i < max_shrink * grid
  bool clip = true;
};

// What the search chose for one scaling group, for the decision log.
struct AwqGroupReport {
  std::string name;        // "input_layernorm->q,k,v", "v->o", "post_attention_layernorm->gate,up", "up->down"
  bool applied = false;    // false: skipped (v->o when v's rows differ from o's cols under GQA)
  double ratio = 0;        // best grid ratio
  double error_best = 0;   // output MSE with the chosen scales
  double error_plain = 0;  // output MSE of plain RTN (all scales 1)
};

struct AwqLayerReport {
  std::vector<AwqGroupReport> groups;
  double clip_error_before = 0, clip_error_after = 0;  // summed per-(row, group) output MSE
};

// Transforms `layer` in place: scales searched on `inputs` (all groups first, on the original inputs,
// as AutoAWQ does), folded (norm weights / previous linear rows divided, next linear columns
// multiplied), `inputs` divided accordingly, then the clip search (q and k are not clipped, as in
// AutoAWQ) clamps weights. `skip[i]` (indexed like kAllLinears) leaves that linear out of the
// searches' quantization error (it stays 16-bit; scaling it is still exact). The candidates' weight
// errors and their output errors are computed on `device` (the layer and inputs stay host memory).
AwqLayerReport awq_transform_layer(LayerF32& layer, LayerInputs& inputs, const formats::QuantScheme& scheme, const AwqOptions& options,
                                   const bool skip[7], engine::Backend& device);

}  // namespace mo::quant
