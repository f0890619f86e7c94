#include "mo/formats/gguf_file_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"

namespace mo::formats {
namespace {

std::uint32_t gguf_base_type(const std::string& format) {
  if (format == "f16") return ggml_id(GgmlType::F16);
  if (format == "bf16") return ggml_id(GgmlType::BF16);
  if (format == "q4_0") return ggml_id(GgmlType::Q4_0);
  if (format == "q2_k") return ggml_id(GgmlType::Q2_K);
  if (format == "q3_k_m") return ggml_id(GgmlType::Q3_K);
  if (format == "q4_k_m" || format == "q4_k_s") return ggml_id(GgmlType::Q4_K);
  if (format == "q5_k_m" || format == "q5_k_s") return ggml_id(GgmlType::Q5_K);
  if (format == "q6_k") return ggml_id(GgmlType::Q6_K);
  if (format == "q8_0") return ggml_id(GgmlType::Q8_0);
  throw UsageError(fmt::format("gguf_type: '{}' is not one of {}", format, fmt::join(gguf_file_type_names(), ", ")));
}

// llama.cpp's use_more_bits(): the first and last eighth of the layers and every third in between.
bool use_more_bits(int layer, int n_layers) { return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2; }

std::uint32_t fallback_for_row(std::uint32_t type, std::uint64_t cols) {
  const auto* info = ggml_type_info(type);
  if (!info || cols % info->block_size == 0) return type;
  std::uint32_t next = type == ggml_id(GgmlType::Q4_K)                                      ? ggml_id(GgmlType::Q5_0)
                       : type == ggml_id(GgmlType::Q5_K)                                    ? ggml_id(GgmlType::Q5_1)
                       : type == ggml_id(GgmlType::Q6_K)                                    ? ggml_id(GgmlType::Q8_0)
                       : type == ggml_id(GgmlType::Q3_K) || type == ggml_id(GgmlType::Q2_K) ? ggml_id(GgmlType::Q4_0)
                                                                                            : ggml_id(GgmlType::F16);
  if (const auto* n = ggml_type_info(next); n && cols % n->block_size != 0) next = ggml_id(GgmlType::F16);
  return next;
}

}  // namespace

const std::vector<std::string>& gguf_file_type_names() {
  static const std::vector<std::string> names = {"f16",    "bf16",   "q8_0", "q6_k",   "q5_k_m", "q5_k_s",
                                                 "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k"};
  return names;
}

std::uint32_t gguf_file_type_id(const std::string& format) {
  static const std::map<std::string, std::uint32_t> ids = {{"f16", 1},     {"bf16", 32},   {"q8_0", 7},    {"q6_k", 18},
                                                           {"q5_k_m", 17}, {"q5_k_s", 16}, {"q4_k_m", 15}, {"q4_k_s", 14},
                                                           {"q4_0", 2},    {"q3_k_m", 12}, {"q2_k", 10}};
  auto it = ids.find(format);
  if (it == ids.end()) throw UsageError(fmt::format("gguf_type: '{}' is not one of {}", format, fmt::join(gguf_file_type_names(), ", ")));
  return it->second;
}

std::uint32_t gguf_tensor_type(const std::string& format, const KQuantTensor& t, const KQuantModel& m, bool has_imatrix) {
  if (t.role == KQuantRole::not_quantized) return ggml_id(GgmlType::F32);  // norms, biases and routers stay F32 in converted files
  const std::uint32_t base = gguf_base_type(format);
  // llama.cpp only mixes when the file type is a block type; float files keep every matrix as asked.
  if (base == ggml_id(GgmlType::F16) || base == ggml_id(GgmlType::BF16)) return base;
  const int n_layers = m.n_layers;
  const int layer = t.layer;
  const bool eight_experts = m.n_experts == 8;
  const std::int64_t n_gqa = m.n_gqa;
  std::uint32_t type = base;
  if (t.role == KQuantRole::output_head) {
    const auto* info = ggml_type_info(base);
    if (t.cols % info->block_size != 0)
      type = ggml_id(GgmlType::Q8_0);
    else if (base != ggml_id(GgmlType::Q8_0))
      type = ggml_id(GgmlType::Q6_K);
    return fallback_for_row(type, t.cols);
  }
  switch (t.role) {
    case KQuantRole::attn_v:
      // llama.cpp counts attn_v tensors; without experts the count is the layer index.
      if (format == "q2_k")
        type = n_gqa >= 4 ? ggml_id(GgmlType::Q4_K) : ggml_id(GgmlType::Q3_K);
      else if (format == "q3_k_m")
        type = layer < 2 ? ggml_id(GgmlType::Q5_K) : ggml_id(GgmlType::Q4_K);
      else if ((format == "q4_k_m" || format == "q5_k_m") && use_more_bits(layer, n_layers))
        type = ggml_id(GgmlType::Q6_K);
      else if (format == "q4_k_s" && layer < 4)
        type = ggml_id(GgmlType::Q5_K);
      // 70B-class models share one attn_v across 8 heads, so extra bits there are nearly free.
      if (n_layers == 80 && m.llama_arch && (type == ggml_id(GgmlType::Q3_K) || type == ggml_id(GgmlType::Q4_K)))
        type = ggml_id(GgmlType::Q5_K);
      if (eight_experts) type = ggml_id(GgmlType::Q8_0);
      break;
    case KQuantRole::attn_k:
      if (eight_experts) type = ggml_id(GgmlType::Q8_0);
      break;
    case KQuantRole::ffn_down:
      if (format == "q2_k")
        type = ggml_id(GgmlType::Q3_K);
      else if (format == "q3_k_m")
        type = layer < n_layers / 16 ? ggml_id(GgmlType::Q5_K) : ggml_id(GgmlType::Q4_K);
      else if (format == "q4_k_m" && use_more_bits(layer, n_layers))
        type = ggml_id(GgmlType::Q6_K);
      else if (format == "q5_k_m" && use_more_bits(layer, n_layers))
        type = ggml_id(GgmlType::Q6_K);
      else if (format == "q4_k_s" && layer < n_layers / 8)
        type = ggml_id(GgmlType::Q5_K);
      // With an importance matrix llama.cpp guards the first ffn_down layers of Q4_0 files.
      else if (format == "q4_0" && has_imatrix && layer < n_layers / 8)
        type = ggml_id(GgmlType::Q4_1);
      break;
    case KQuantRole::attn_output:
      if (eight_experts) {
        if (format == "q2_k" || format == "q3_k_m" || format == "q4_k_s" || format == "q4_k_m") type = ggml_id(GgmlType::Q5_K);
      } else if (format == "q2_k") {
        type = ggml_id(GgmlType::Q3_K);
      } else if (format == "q3_k_m") {
        type = ggml_id(GgmlType::Q4_K);
      }
      break;
    default: break;
  }
  return fallback_for_row(type, t.cols);
}

}  // namespace mo::formats
