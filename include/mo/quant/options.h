#pragma once
// What a quantize run does, typed: the quant library's input. app/ fills it from the YAML config and
// the flags (config::QuantizeConfig); names and paths stay strings, choices are enums.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/core/device.h"
#include "mo/formats/quantized_linear.h"

namespace mo::quant {

enum class Method { rtn, awq, gptq, fp8, gguf };
const char* method_name(Method m);  // "rtn", "awq", "gptq", "fp8", "gguf": the quant_method values

enum class Fp8Scale { per_channel, per_tensor };

// The HF layout of an rtn/gptq output.
enum class CheckpointFormat {
  automatic,           // GPTQ when every linear has one precision, compressed-tensors when they differ
  gptq,                // GPTQ v1, with GPTQModel `dynamic` overrides for mixed precisions (not Transformers)
  compressed_tensors,  // compressed-tensors pack-quantized, one config group per precision
};

const char* checkpoint_format_name(CheckpointFormat f);  // "auto", "gptq", "compressed-tensors"

// Where a GGUF run's importance matrix comes from.
enum class ImatrixSource {
  automatic,  // computed from the calibration data when the file type benefits
  none,       // plain rounding
  file,       // read from imatrix_file (llama-imatrix's GGUF or legacy .dat)
};

struct QuantizeOptions {
  std::string model_path;   // HF model directory or .gguf file to quantize
  std::string output_path;  // new directory (or .gguf file); an existing path only with force
  bool force = false;       // replace an earlier output of ours at output_path (io::move_into_place)
  Method method = Method::awq;
  int bits = 4;          // 4 or 8
  int group_size = 128;  // weights per scale, or formats::kGroupPerChannel
  bool sym = true;       // rtn/gptq: symmetric; awq is always asymmetric
  Fp8Scale fp8_scale = Fp8Scale::per_channel;
  CheckpointFormat checkpoint_format = CheckpointFormat::automatic;
  std::string calibration_data = "general";  // JSON/JSONL/text file or a built-in set name
  std::int64_t num_samples = 128;
  std::int64_t max_seq_len = 512;
  std::string calibration_field = "auto";  // auto | text | messages | prompt+completion | another key
  bool calibration_pack = true;            // concatenate records into full-length samples
  std::uint64_t seed = 0;
  bool sensitivity_check = true;         // compare each linear's output with the original
  double sensitivity_threshold = 0.98;   // output cosine below this falls back to fallback_bits
  std::vector<std::string> skip_layers;  // names, globs or layer ranges kept unquantized
  int fallback_bits = 8;                 // 8, or 16 (unquantized)
  double damp_percent = 0.01;            // GPTQ Hessian dampening
  bool desc_act = true;                  // GPTQ act-order
  bool dummy_weights = false;            // random weights of a preset's shape (speed/memory runs)
  Device device = Device::cpu;           // where the calibration passes, GPTQ's Hessians and solve run
  bool device_path_on_cpu = false;       // tests: the GPU's code path (layer streaming, f32 self-attention) on the CPU backend
  std::uint64_t max_shard_bytes = 2'000'000'000ull;
  std::string gguf_type = "q4_k_m";  // GGUF file type (method gguf)
  ImatrixSource imatrix = ImatrixSource::automatic;
  std::string imatrix_file;  // imatrix == file
};

}  // namespace mo::quant
