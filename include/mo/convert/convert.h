#pragma once
// `model-optimizer convert`: GGUF -> HF directory (config.json, safetensors, tokenizer files) and
// HF -> GGUF (F32/F16/BF16), dequantizing GGUF block types on the way to HF. Float tensors copied in
// their own type are bit-exact both ways. The output never replaces the input.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/model/model_shape.h"

namespace mo::convert {

struct ConvertOptions {
  std::string output_format = "auto";  // auto | hf | gguf
  std::string dtype = "auto";          // auto | f32 | f16 | bf16
  bool force = false;                  // replace an earlier output of ours
  std::uint64_t max_shard_bytes = 5'000'000'000ull;
};

struct ConvertReport {
  std::string input, output, output_format;
  std::uint64_t tensors = 0;
  std::uint64_t bytes_written = 0;  // tensor data
  std::vector<std::string> notes;   // dequantized tensors, dropped tensors, fallbacks
  double seconds = 0;
};

ConvertReport convert_model(const std::string& input, const std::string& output, const ConvertOptions& opt);

// config.json for a Llama-family model, as Transformers writes it.
nlohmann::json hf_config_json(const model::Hparams& hp, const std::string& torch_dtype);
// generation_config.json: BOS/EOS ids from the model.
nlohmann::json hf_generation_config_json(const model::Hparams& hp);

}  // namespace mo::convert
