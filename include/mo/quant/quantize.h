#pragma once
// `model-optimizer quantize` for the HF-directory methods (rtn, awq, gptq, fp8): load the model
// (memory-mapped), read calibration samples, then one decoder layer at a time: capture the inputs of
// its linears, transform/quantize them (AWQ scales and clipping, GPTQ's Hessian updates, or RTN),
// check each linear's output similarity and fall back where it is sensitive or where the output
// format cannot hold its shape, write its tensors, and run the quantized layer to produce the next
// layer's inputs. The output directory appears only when complete.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "mo/quant/options.h"
#include "mo/quant/sensitivity.h"

namespace mo::quant {

struct LinearDecision {
  std::string module;  // HF module name: "model.layers.3.mlp.down_proj", "lm_head"
  int layer = -1;
  std::string requested;          // what the configuration asked for, e.g. "int4 g128"
  std::string format;             // what was written: "int4 g128", "int8 per-channel", "fp8 per-channel", "f16"
  int bits = 16, group_size = 0;  // of the written format (16: unquantized)
  bool sym = true;
  std::string reason;             // why it differs from `requested` (empty when it does not)
  double cosine = NAN;            // output cosine similarity of the written format on calibration inputs
  double cosine_requested = NAN;  // the same for the requested format, when it fell back for sensitivity
  double rel_l2 = NAN;
  WeightStats stats;
  std::uint64_t bytes = 0;   // stored bytes of this module's tensors
  std::string line() const;  // the human line of the decision log
};

struct QuantizeReport {
  std::string input, output, method, summary, name_suggestion;
  std::string layout;       // "GPTQ v1", "compressed-tensors pack-quantized", ... (empty for GGUF files)
  std::string loaders;      // which loaders read the output: "vLLM, Transformers (compressed-tensors), model-optimizer"
  std::string calibration;  // one-line description of the calibration data
  std::int64_t calibration_samples = 0, calibration_tokens = 0;
  // What the layer captures read of them (AWQ and the sensitivity check: evenly spaced whole samples up to
  // a token budget; GPTQ: all); the rest are never run.
  std::int64_t calibration_used_samples = 0, calibration_used_tokens = 0;
  std::vector<LinearDecision> decisions;
  std::vector<std::string> notes;  // warnings and method facts, in the order they happened
  std::uint64_t input_bytes = 0, output_bytes = 0;
  double seconds = 0;
  std::uint64_t peak_rss = 0;
  std::uint64_t peak_device = 0;  // GPU memory the job allocated at its peak (--device cuda), else 0
  std::string device;             // where the calibration passes ran: "cuda:0 NVIDIA H100 ...", or empty on the CPU
};

QuantizeReport quantize_model(const QuantizeOptions& opt);

}  // namespace mo::quant
