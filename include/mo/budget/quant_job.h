#pragma once
// The memory a quantize job (rtn, awq, gptq, fp8) holds at its peak, term by term, as this build runs it:
// the calibration hidden states and the captured linear inputs, one decoder layer's weights (only one
// layer is resident at a time), and for GPTQ the Hessian of the widest linear input with its working
// copies. quantize prints it before it starts and refuses, with the num_samples that would fit, when the
// machine does not have it.
#include <cstdint>
#include <string>

#include "mo/model/model_shape.h"

namespace mo::budget {

struct QuantJobRequest {
  model::Hparams hp;
  std::string method = "awq";  // rtn | awq | gptq | fp8
  bool sensitivity_check = true;
  std::int64_t samples = 128, seq_len = 512;
  std::int64_t capture_tokens = 4096;  // the pipeline's per-layer capture budget (layer_quantizer.h)
  bool hessians_on_gpu = false;        // --device cuda: GPTQ's Hessians and solve live in GPU memory
};

struct QuantJobMemory {
  std::uint64_t hidden = 0;    // calibration hidden states: tokens x hidden x 4 bytes
  std::uint64_t captures = 0;  // the linears' inputs kept for AWQ's search and the sensitivity check
  std::uint64_t layer = 0;     // one decoder layer in f32, as read and as written
  std::uint64_t hessians = 0;  // GPTQ: the widest input's Hessian (f64, with its host and damped copies) + its factor
  bool hessians_on_gpu = false;
  std::uint64_t host() const { return hidden + captures + layer + (hessians_on_gpu ? 0 : hessians); }
  std::uint64_t gpu() const { return hessians_on_gpu ? hessians : 0; }
  // "hidden states 1.0 GiB + captured inputs 380.0 MiB + one layer 1.5 GiB + GPTQ Hessians 3.5 GiB (GPU)"
  std::string terms() const;
};

QuantJobMemory quant_job_memory(const QuantJobRequest& r);

// The largest num_samples (at the request's seq_len) whose job fits `host_bytes` of RAM and `gpu_bytes`
// of GPU memory; 0 when not even one sample does.
std::int64_t max_samples_that_fit(QuantJobRequest r, std::uint64_t host_bytes, std::uint64_t gpu_bytes);

}  // namespace mo::budget
