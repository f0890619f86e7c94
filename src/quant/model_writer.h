#pragma once
// Tensors of the quantized model under their HF names, in the layout of the output format (AWQ GEMM,
// GPTQ v1, compressed-tensors FP8, f16 for what stays unquantized); Q/K rows are put back into HF's
// rotate-half order when the source was a GGUF file.
#include <string>

#include "layer_quantizer.h"
#include "mo/quant/shard_writer.h"

namespace mo::quant {

// Writes a layer's tensors; returns the bytes per module into the decisions.
void write_layer(ShardWriter& out, const SourceModel& src, int layer, LayerOutcome& outcome, OutputLayout layout);

// embed_tokens / norm / lm_head (f16); returns lm_head's decision (tied heads get none).
void write_non_layer_tensors(ShardWriter& out, const SourceModel& src, std::vector<LinearDecision>& decisions);

}  // namespace mo::quant
