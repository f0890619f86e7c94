#pragma once
// `diagnose`: runs an original and a quantized model on the same samples and measures, per decoder
// layer and per linear sub-layer, how far the quantized outputs are from the original ones:
//  - local: the quantized weights fed the ORIGINAL model's inputs (the layer's own damage);
//  - cumulative: the quantized model fed its own hidden states (the damage accumulated so far).
// Plus weight statistics of the original linears, the final next-token KL divergence / top-1
// agreement, and advice (skip_layers patterns, fallback_bits) with its size cost.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/core/device.h"
#include "mo/diagnose/metrics.h"
#include "mo/quant/sensitivity.h"

namespace mo::diagnose {

struct DiagnoseOptions {
  std::string original;             // HF directory or .gguf
  std::string quantized;            // HF directory (AWQ/GPTQ/INT8/FP8 quantization_config) or .gguf
  std::string data = "general";     // JSON/JSONL/text file or a built-in calibration set
  std::string data_field = "auto";  // where a record's text is (calibration_field of quantize)
  double threshold = 0.98;          // local cosine under which a linear / layer is flagged
  std::int64_t num_samples = 32;
  std::int64_t max_seq_len = 256;  // tokens per sample
  std::uint64_t seed = 0;
  Device device = Device::cpu;      // cuda: both models on the GPU
  bool device_path_on_cpu = false;  // tests: the GPU's code path on the CPU backend in device layouts
};

struct LinearDiag {
  int layer = 0;
  std::string name;           // "q_proj" ... "down_proj"
  std::string module;         // "model.layers.3.self_attn.q_proj" (what skip_layers matches)
  std::int64_t params = 0;    // rows * cols
  std::string original_type;  // stored type: "f16", "q4_1", "awq int4 g128", ...
  std::string quantized_type;
  std::uint64_t original_bytes = 0;  // bytes on disk (weights + scales/zeros)
  std::uint64_t quantized_bytes = 0;
  Metrics local, cumulative;
  quant::WeightStats weights;  // of the original weights
  bool flagged = false;        // local cosine < threshold
};

struct LayerDiag {
  int layer = 0;
  Metrics local;       // the layer's residual update (output - input) on the original inputs
  Metrics cumulative;  // the hidden state after the layer, quantized model vs original
  std::vector<LinearDiag> linears;
  bool flagged = false;      // one of its linears under the threshold (what skip_layers can fix)
  bool block_below = false;  // the whole block's local cosine under the threshold, whether or not a linear is
};

struct OutputDiag {
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;  // nats, next-token distribution
  double top1_agreement = 1;                   // fraction of tokens with the same argmax
  std::int64_t tokens = 0;
};

struct AdviceItem {
  std::string linear;       // "down_proj"
  std::vector<int> layers;  // flagged layers of that linear, ascending
  std::string pattern;      // "model.layers.28-31.mlp.down_proj" (one per contiguous range, ", "-joined)
  std::vector<std::string> patterns;
  double min_cosine = 1, max_cosine = 1;
  double skip_cost_mb = 0;         // keeping them in 16 bits, over the quantized size (fused partners included)
  std::vector<std::string> fused;  // partners kept with them in HF outputs (vLLM's qkv_proj / gate_up_proj)
  double int8_cost_mb = 0;         // storing them in 8 bits instead
};

struct Advice {
  std::vector<AdviceItem> items;         // one per linear name with flagged layers
  std::vector<std::string> skip_layers;  // all patterns, for `skip_layers: [...]`
  double skip_cost_mb = 0, int8_cost_mb = 0;
  std::string pattern_summary;     // where the damage sits (e.g. concentrated in the last layers)
  std::vector<std::string> lines;  // the advice as sentences, config included
};

struct DiagnoseResult {
  std::string original, quantized;
  std::string original_format, quantized_format;  // "gguf q4_1", "safetensors awq int4 g128", ...
  std::string data;                               // calibration description
  std::int64_t samples = 0, tokens = 0;
  double threshold = 0.98;
  std::vector<LayerDiag> layers;
  OutputDiag output;
  Advice advice;
  std::vector<std::string> notes;
  double seconds = 0;
};

// Throws UsageError naming the path for models that cannot be compared (different shapes or
// vocabularies, no tokenizer) and for bad data files.
DiagnoseResult run_diagnose(const DiagnoseOptions& opt);

// Fills result.advice from the layers (pure; run_diagnose calls it).
Advice make_advice(const std::vector<LayerDiag>& layers, double threshold, bool quantized_is_gguf);

// "model.layers.28-31.mlp.down_proj" for layers {28,29,30,31} of down_proj; one pattern per
// contiguous run of layers.
std::vector<std::string> layer_patterns(const std::string& linear, const std::vector<int>& layers);

}  // namespace mo::diagnose
