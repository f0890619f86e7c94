#pragma once
// GGUF file types (llama.cpp's LLAMA_FTYPE) and llama.cpp's k-quant mixing rules: which ggml type
// llama_tensor_get_type picks for each tensor of a file type.
#include <cstdint>
#include <string>
#include <vector>

namespace mo::formats {

// The GGUF file types `quantize --quant_method gguf` writes (f16, bf16, q8_0, q6_k, q5_k_m, q5_k_s,
// q4_k_m, q4_k_s, q4_0, q3_k_m, q2_k) and llama.cpp's LLAMA_FTYPE number of each (general.file_type).
const std::vector<std::string>& gguf_file_type_names();
std::uint32_t gguf_file_type_id(const std::string& format);  // throws UsageError naming gguf_type

// What the mixing rules look at in a tensor: its role, its layer and its row length.
enum class KQuantRole { output_head, attn_v, attn_k, attn_output, ffn_down, other_matrix, not_quantized };
struct KQuantTensor {
  KQuantRole role = KQuantRole::other_matrix;
  int layer = -1;
  std::uint64_t cols = 0;  // row length (GGUF ne[0])
};
struct KQuantModel {
  int n_layers = 0;
  std::int64_t n_gqa = 1;  // query heads per KV head
  std::int64_t n_experts = 0;
  bool llama_arch = false;  // llama.cpp's 70B attn_v rule applies to arch "llama" only
};

// The ggml type for `t` under GGUF file type `format` (any of gguf_file_type_names()), including the
// fallbacks for row lengths not divisible by the block size. `has_imatrix` changes q4_0's first
// ffn_down layers (Q4_1).
std::uint32_t gguf_tensor_type(const std::string& format, const KQuantTensor& t, const KQuantModel& m, bool has_imatrix = false);

}  // namespace mo::formats
