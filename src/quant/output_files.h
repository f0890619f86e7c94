#pragma once
// Everything in the output directory besides the tensors: config.json with quantization_config,
// quantize_config.json (GPTQ), tokenizer / chat template / generation config, the
// model-optimizer.json manifest and decisions.jsonl. Also fills the report's summary and name.
#include <string>

#include "layer_quantizer.h"
#include "mo/quant/options.h"
#include "mo/quant/quantize.h"

namespace mo::quant {

void write_output_files(const std::string& dir, const SourceModel& src, const QuantizeOptions& cfg, const PipelineSettings& s,
                        QuantizeReport& rep);

// "AWQ INT4 g64: 180 linears int4 g64, 30 f16; lm_head f16; calibration: ..." from the decisions.
std::string quantization_summary(const QuantizeReport& rep);

// True when some linear (lm_head aside) was written in another format than requested: a GPTQ layout then
// needs GPTQModel `dynamic` rules, which Transformers' GPTQ loader ignores.
bool mixed_precision(const std::vector<LinearDecision>& decisions);

}  // namespace mo::quant
