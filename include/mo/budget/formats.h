#pragma once
// Weight formats and how a real checkpoint of each stores every tensor: which tensors are
// quantized, their scales/zeros/indices, and what stays in 16-bit (embeddings, lm_head, norms).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mo/model/model_shape.h"

namespace mo::budget {

struct FormatInfo {
  std::string name;         // as typed: "awq-int4", "q4_k_m"
  std::string description;  // one line for help and tables
};

// Every weight format the calculator knows, best quality first.
const std::vector<FormatInfo>& weight_formats();
std::vector<std::string> weight_format_names();
bool is_gguf_format(const std::string& name);

struct WeightTotals {
  std::uint64_t bytes = 0;                       // all tensors as the format stores them
  std::uint64_t params = 0;                      // weights, biases and norms
  std::map<std::string, std::uint64_t> by_type;  // bytes per storage type ("int4 g128", "Q6_K", "fp16")
  std::vector<std::string> notes;                // fallbacks, e.g. rows not divisible by the block
  double bits_per_weight() const { return params ? 8.0 * bytes / params : 0.0; }
};

// Sizes `shape` in `format`; "stored" means as found on disk (GGUF tensor types, or the checkpoint's
// own format). `group_size` applies to awq-int4 and gptq-int4.
WeightTotals weight_totals(const model::ModelShape& shape, const std::string& format, std::int64_t group_size = 128);

// The GGUF file types `quantize --quant_method gguf` writes (f16, bf16, q8_0, q6_k, q5_k_m, q5_k_s,
// q4_k_m, q4_k_s, q4_0, q3_k_m, q2_k) and llama.cpp's LLAMA_FTYPE number of each (general.file_type).
const std::vector<std::string>& gguf_file_type_names();
std::uint32_t gguf_file_type_id(const std::string& format);

// The ggml type llama.cpp's quantizer (llama_tensor_get_type) picks for `t` under GGUF file type
// `format` (any of gguf_file_type_names()), including its mixing rules and the fallbacks for row
// lengths not divisible by the block size. `has_imatrix` changes q4_0's first ffn_down layers (Q4_1).
std::uint32_t gguf_tensor_type(const std::string& format, const model::WeightTensor& t, const model::Hparams& hp,
                               bool has_imatrix = false);

}  // namespace mo::budget
