#include "quantize_options.h"

#include <fmt/format.h>

#include <limits>

#include "mo/core/error.h"

namespace mo::app {
namespace {

quant::Method method_of(const std::string& name) {
  if (name == "rtn") return quant::Method::rtn;
  if (name == "awq") return quant::Method::awq;
  if (name == "gptq") return quant::Method::gptq;
  if (name == "fp8") return quant::Method::fp8;
  if (name == "gguf") return quant::Method::gguf;
  throw UsageError(fmt::format("quant_method: '{}' is not one of rtn, awq, gptq, fp8, gguf", name));
}

int small_int(const char* key, std::int64_t v) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw UsageError(fmt::format("{}: {} is out of range", key, v));
  return static_cast<int>(v);
}

}  // namespace

quant::QuantizeOptions quantize_options(const config::QuantizeConfig& c) {
  quant::QuantizeOptions o;
  o.model_path = c.model_path;
  o.output_path = c.output_path;
  o.force = c.force;
  o.method = method_of(c.quant_method);
  o.bits = small_int("bits", c.bits);
  o.group_size = small_int("group_size", c.group_size);  // -1 in the config is formats::kGroupPerChannel
  o.sym = c.sym;
  o.fp8_scale = c.fp8_scale == "tensor" ? quant::Fp8Scale::per_tensor : quant::Fp8Scale::per_channel;
  o.checkpoint_format = c.checkpoint_format == "gptq"                 ? quant::CheckpointFormat::gptq
                        : c.checkpoint_format == "compressed-tensors" ? quant::CheckpointFormat::compressed_tensors
                                                                      : quant::CheckpointFormat::automatic;
  o.calibration_data = c.calibration_data;
  o.num_samples = c.num_samples;
  o.max_seq_len = c.max_seq_len;
  o.calibration_field = c.calibration_field;
  o.calibration_pack = c.calibration_pack;
  o.seed = static_cast<std::uint64_t>(c.seed);
  o.sensitivity_check = c.sensitivity_threshold > 0;  // 0 in the config turns the check off
  o.sensitivity_threshold = c.sensitivity_threshold;
  o.skip_layers = c.skip_layers;
  o.fallback_bits = small_int("fallback_bits", c.fallback_bits);
  o.damp_percent = c.damp_percent;
  o.desc_act = c.desc_act;
  o.dummy_weights = c.load_format == "dummy";
  o.device = parse_device(c.device);
  o.max_shard_bytes = c.max_shard_bytes;
  o.gguf_type = c.gguf_type;
  if (c.imatrix == "auto") {
    o.imatrix = quant::ImatrixSource::automatic;
  } else if (c.imatrix == "none") {
    o.imatrix = quant::ImatrixSource::none;
  } else {
    o.imatrix = quant::ImatrixSource::file;
    o.imatrix_file = c.imatrix;
  }
  return o;
}

}  // namespace mo::app
