#pragma once
// One decoder layer through the pipeline: capture its linears' inputs on the calibration tokens (and
// GPTQ's Hessians, stage by stage), quantize each linear as planned (with the sensitivity fallback), then run the
// quantized layer so `hidden` holds the next layer's inputs.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/engine/device_model.h"
#include "mo/quant/layer_plan.h"
#include "mo/quant/awq.h"
#include "mo/formats/fp8.h"
#include "mo/quant/gptq.h"
#include "mo/quant/layer_select.h"
#include "mo/quant/quantize.h"
#include "source_model.h"

namespace mo::quant {

struct PipelineSettings {
  Method method = Method::awq;  // rtn | awq | gptq | fp8
  OutputLayout layout = OutputLayout::gptq;
  CheckpointFormat checkpoint_format = CheckpointFormat::automatic;  // rtn/gptq: the layout written once all layers are done
  int bits = 4, group_size = 128, fallback_bits = 8;
  bool sym = true, fp8_per_channel = true;
  bool sensitivity_check = true;
  double threshold = 0.98;  // output cosine below this falls back
  GptqOptions gptq;
  AwqOptions awq;
  LayerSelector skip;
  std::int64_t capture_tokens = 4096;  // calibration tokens kept per layer for AWQ's search and the sensitivity check
  engine::Backend* device = nullptr;   // where the calibration hidden states, GPTQ's Hessians and solve live
  // Non-null: the calibration passes stream each layer to this model on `device` (a GPU); null: they run on
  // the source's CPU engine (host memory).
  engine::DeviceModel* device_model = nullptr;
};

struct QuantizedModule {
  engine::LinearId id = engine::LinearId::q;
  LinearPlan plan;
  formats::QuantizedLinear q;  // plan.kind == integer
  formats::Fp8Linear f8;       // plan.kind == fp8
  std::vector<float> f16;      // plan.kind == f16: the weights, already rounded to f16
};

struct LayerOutcome {
  std::vector<QuantizedModule> modules;  // in kAllLinears order
  std::vector<LinearDecision> decisions;
  std::vector<float> attn_norm, ffn_norm;  // as written (AWQ may have folded scales in), f16-rounded
  std::string awq_summary;                 // one line per layer for the log (AWQ only)
};

// The calibration samples a method's layer captures read: GPTQ's Hessians take every token; AWQ's search
// and the sensitivity check take every token of every stride-th sample up to capture_tokens, so the
// other samples need never be run (indices into `lengths`, in order).
std::vector<std::size_t> observed_samples(const std::vector<std::int64_t>& lengths, const PipelineSettings& s);

// hidden: [total, hidden] f32 in s.device's memory, the samples back to back (sample s starts at row
// starts[s]); for methods other than GPTQ, only the observed_samples().
LayerOutcome quantize_layer(SourceModel& src, int layer, float* hidden, std::int64_t total, const std::vector<std::int64_t>& starts,
                            const PipelineSettings& s);

}  // namespace mo::quant
