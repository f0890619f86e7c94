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
  bool on_gpu = false;                 // --device cuda: the hidden states, the layer run and GPTQ's solve live in GPU memory
};

struct QuantJobMemory {
  std::uint64_t hidden = 0;     // calibration hidden states: tokens x hidden x 4 bytes
  std::uint64_t captures = 0;   // the linears' inputs kept for AWQ's search and the sensitivity check (host)
  std::uint64_t layer = 0;      // one decoder layer in f32 on the host, as read and as written
  std::uint64_t layer_gpu = 0;  // its f32 copy on a GPU, with one sample's activations through it
  // GPTQ, the widest input: the f64 Hessian, its damped copy and f32 factor and the transposed weight where
  // the solve runs, a host copy of the Hessian and the damped matrix it uploads.
  std::uint64_t hessians = 0, hessians_host_part = 0;
  std::uint64_t scoring = 0;  // AWQ's search and the sensitivity check: candidates' errors on the backend
  bool on_gpu = false;
  std::uint64_t host() const { return captures + layer + (on_gpu ? hessians_host_part : hidden + hessians + scoring); }
  std::uint64_t gpu() const { return on_gpu ? hidden + layer_gpu + hessians - hessians_host_part + scoring : 0; }
  // "hidden states 1.0 GiB + captured inputs 380.0 MiB + one layer 1.5 GiB + GPTQ Hessians 3.5 GiB + error scoring 900.0 MiB"
  std::string terms() const;
};

QuantJobMemory quant_job_memory(const QuantJobRequest& r);

// The largest num_samples (at the request's seq_len) whose job fits `host_bytes` of RAM and `gpu_bytes`
// of GPU memory; 0 when not even one sample does.
std::int64_t max_samples_that_fit(QuantJobRequest r, std::uint64_t host_bytes, std::uint64_t gpu_bytes);

}  // namespace mo::budget
