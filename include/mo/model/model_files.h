#pragma once
// A model on disk, whichever form it takes: a GGUF file or an HF directory (config.json +
// safetensors). Tensors are listed under GGUF names with GGUF shape order and point into the mapped
// files (zero-copy); the engine, the converters and `inspect` all read models through this.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/model/model_shape.h"

namespace mo::gguf {
struct File;
}
namespace mo::st {
class Model;
}

namespace mo::model {

struct StoredTensor {
  std::string name;                        // GGUF-style name ("blk.0.attn_q.weight"); the file's own name when it has no twin
  std::string file_name;                   // as named in the file
  std::vector<std::uint64_t> ne;           // GGUF order: ne[0] is the row length
  std::string dtype;                       // "f32", "f16", "bf16", GGUF block types ("q4_K"), or safetensors names ("I32")
  std::optional<std::uint32_t> ggml_type;  // when the bytes are in a ggml type (floats included)
  std::span<const std::uint8_t> bytes;
  bool hf_qk_order = false;  // Q/K rows in HF's rotate-half order (llama-family safetensors)
  std::uint64_t n_elements() const;
};

class ModelFiles {
 public:
  // `path`: a .gguf file, or an HF model directory (config.json + safetensors). Throws UsageError
  // naming the path when it is neither, Error for corrupt files.
  static ModelFiles open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "gguf" | "safetensors"
  const ModelShape& shape() const { return shape_; }
  const std::vector<StoredTensor>& tensors() const { return tensors_; }
  const StoredTensor* find(std::string_view name) const;
  std::uint64_t total_bytes() const;

  const gguf::File* gguf() const { return gguf_.get(); }          // null for HF directories
  const nlohmann::json& hf_config() const { return hf_config_; }  // null for GGUF
  // Where the tokenizer lives: tokenizer.json of the directory, or the GGUF file; empty when none.
  const std::string& tokenizer_path() const { return tokenizer_path_; }
  // The shipped chat template (tokenizer_config.json or tokenizer.chat_template); empty when none.
  const std::string& chat_template() const { return chat_template_; }
  // HF quantization_config (null when absent or GGUF).
  const nlohmann::json& quantization_config() const { return quantization_config_; }

 private:
  std::string path_, format_, tokenizer_path_, chat_template_;
  ModelShape shape_;
  std::vector<StoredTensor> tensors_;
  std::shared_ptr<gguf::File> gguf_;
  std::shared_ptr<st::Model> st_;
  nlohmann::json hf_config_, quantization_config_;
};

}  // namespace mo::model
