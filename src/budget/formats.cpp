#include "mo/budget/formats.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/error.h"
#include "mo/io/ggml_types.h"

namespace mo::budget {
namespace {

using model::Role;
using model::WeightTensor;

constexpr std::uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12,
                        kQ5_K = 13, kQ6_K = 14, kBF16 = 30;

std::uint32_t gguf_base_type(const std::string& format) {
  if (format == "f16") return kF16;
  if (format == "bf16") return kBF16;
  if (format == "q4_0") return kQ4_0;
  if (format == "q2_k") return kQ2_K;
  if (format == "q3_k_m") return kQ3_K;
  if (format == "q4_k_m" || format == "q4_k_s") return kQ4_K;
  if (format == "q5_k_m" || format == "q5_k_s") return kQ5_K;
  if (format == "q6_k") return kQ6_K;
  if (format == "q8_0") return kQ8_0;
  throw UsageError(fmt::format("gguf_type: '{}' is not one of {}", format, fmt::join(gguf_file_type_names(), ", ")));
}

// llama.cpp's use_more_bits(): the first and last eighth of the layers and every third in between.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

std::uint32_t fallback_for_row(std::uint32_t type, std::uint64_t cols) {
  const auto* info = ggml_type_info(type);
  if (!info || cols % info->block_size == 0) return type;
  std::uint32_t next = type == kQ4_K ? kQ5_0 : type == kQ5_K ? kQ5_1 : type == kQ6_K ? kQ8_0 : type == kQ3_K || type == kQ2_K ? kQ4_0 : kF16;
  if (const auto* n = ggml_type_info(next); n && cols % n->block_size != 0) next = kF16;
  return next;
}

bool linear_quantized_by_llama_cpp(const WeightTensor& t) {
  return t.rows > 1 && t.role != Role::norm && t.role != Role::bias && t.role != Role::router && t.role != Role::other;
}

std::string gguf_type_name(std::uint32_t type) {
  const auto* info = ggml_type_info(type);
  return info ? info->name : fmt::format("type{}", type);
}

struct Sized {
  std::string type;
  std::uint64_t bytes;
};

Sized float_size(const WeightTensor& t, double bytes_per_element, const char* name) {
  return {name, static_cast<std::uint64_t>(t.n_elements() * bytes_per_element)};
}

// The tensor's experts, for per-expert side data such as GPTQ's g_idx.
std::uint64_t expert_count(const WeightTensor& t, const model::Hparams& hp) {
  bool ffn = t.role == Role::ffn_gate || t.role == Role::ffn_up || t.role == Role::ffn_down;
  return ffn && hp.num_experts > 0 ? hp.num_experts : 1;
}

Sized size_in(const std::string& format, const WeightTensor& t, const model::ModelShape& shape, std::int64_t group,
              std::vector<std::string>& notes) {
  const bool linear = model::is_quantizable_linear(t.role);
  if (format == "fp32") return float_size(t, 4, "fp32");
  if (format == "fp16" || format == "bf16") return float_size(t, 2, format == "fp16" ? "fp16" : "bf16");
  if (is_gguf_format(format)) {
    std::uint32_t type = gguf_tensor_type(format, t, shape.hp);
    return {gguf_type_name(type), ggml_row_bytes(type, t.cols) * t.rows};
  }
  if (!linear) return float_size(t, 2, "fp16");
  const std::uint64_t rows = t.rows, cols = t.cols;
  if (format == "fp8") return {"fp8 + per-channel scale", rows * cols + rows * 4};
  if (format == "int8") return {"int8 + per-channel scale", rows * cols + rows * 2};
  const std::uint64_t g = group > 0 ? static_cast<std::uint64_t>(group) : cols;
  const std::string label = fmt::format("int4 g{} + scales/zeros", group > 0 ? group : -1);
  if (format == "awq-int4") {
    // AWQ packs 8 output columns per int32 and needs whole groups along the input.
    if (cols % g != 0 || rows % 8 != 0) {
      notes.push_back(fmt::format("{}: in {} not divisible by group {} (or out {} by 8): kept fp16", t.name, cols, g, rows));
      return float_size(t, 2, "fp16");
    }
    std::uint64_t groups = cols / g;
    return {label, rows * cols / 2 + groups * rows * 2 + groups * rows / 2};
  }
  if (format == "gptq-int4") {
    if (cols % 8 != 0 || rows % 8 != 0) {
      notes.push_back(fmt::format("{}: in {} or out {} not divisible by 8: kept fp16", t.name, cols, rows));
      return float_size(t, 2, "fp16");
    }
    std::uint64_t groups = (cols + g - 1) / g;
    return {label + " + g_idx", rows * cols / 2 + groups * rows / 2 + groups * rows * 2 + cols * 4 * expert_count(t, shape.hp)};
  }
  throw UsageError(fmt::format("weight format '{}' is not one of {}", format, fmt::join(weight_format_names(), ", ")));
}

}  // namespace

const std::vector<FormatInfo>& weight_formats() {
  static const std::vector<FormatInfo> formats = {
      {"fp32", "32-bit float"},
      {"fp16", "16-bit float"},
      {"bf16", "bfloat16"},
      {"fp8", "FP8 E4M3 linear weights, per-channel scales; embeddings and lm_head 16-bit"},
      {"int8", "INT8 per-channel (W8A16); embeddings and lm_head 16-bit"},
      {"q8_0", "GGUF Q8_0 (8.5 bits/weight)"},
      {"q6_k", "GGUF Q6_K (6.56 bits/weight)"},
      {"q5_k_m", "GGUF Q5_K_M mix (Q5_K, Q6_K for output and some attn_v/ffn_down)"},
      {"awq-int4", "AWQ INT4 GEMM, group 128, fp16 scales + 4-bit zeros; embeddings and lm_head fp16"},
      {"gptq-int4", "GPTQ INT4, group 128, fp16 scales, packed zeros, g_idx; embeddings and lm_head fp16"},
      {"q4_k_m", "GGUF Q4_K_M mix (Q4_K, Q6_K for output and some attn_v/ffn_down)"},
      {"q4_0", "GGUF Q4_0 (4.5 bits/weight), output Q6_K"},
  };
  return formats;
}

std::vector<std::string> weight_format_names() {
  std::vector<std::string> out;
  for (const auto& f : weight_formats()) out.push_back(f.name);
  return out;
}

bool is_gguf_format(const std::string& name) {
  return name == "q4_0" || name == "q4_k_m" || name == "q5_k_m" || name == "q6_k" || name == "q8_0";
}

const std::vector<std::string>& gguf_file_type_names() {
  static const std::vector<std::string> names = {"f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_k_s", "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k"};
  return names;
}

std::uint32_t gguf_file_type_id(const std::string& format) {
  static const std::map<std::string, std::uint32_t> ids = {{"f16", 1},     {"bf16", 32},    {"q8_0", 7},     {"q6_k", 18},
                                                           {"q5_k_m", 17}, {"q5_k_s", 16},  {"q4_k_m", 15},  {"q4_k_s", 14},
                                                           {"q4_0", 2},    {"q3_k_m", 12},  {"q2_k", 10}};
  auto it = ids.find(format);
  if (it == ids.end()) throw UsageError(fmt::format("gguf_type: '{}' is not one of {}", format, fmt::join(gguf_file_type_names(), ", ")));
  return it->second;
}

std::uint32_t gguf_tensor_type(const std::string& format, const WeightTensor& t, const model::Hparams& hp, bool has_imatrix) {
  if (!linear_quantized_by_llama_cpp(t)) return kF32;  // norms, biases and routers stay F32 in converted files
  const std::uint32_t base = gguf_base_type(format);
  // llama.cpp only mixes when the file type is a block type; float files keep every matrix as asked.
  if (base == kF16 || base == kBF16) return base;
  const int n_layers = static_cast<int>(hp.num_layers);
  const int layer = t.layer;
  const bool eight_experts = hp.num_experts == 8;
  const std::int64_t n_gqa = hp.num_kv_heads > 0 ? hp.num_heads / hp.num_kv_heads : 1;
  std::uint32_t type = base;
  if (t.role == Role::output || (hp.tied_embeddings && t.role == Role::token_embd)) {
    const auto* info = ggml_type_info(base);
    if (t.cols % info->block_size != 0) type = kQ8_0;
    else if (base != kQ8_0) type = kQ6_K;
    return fallback_for_row(type, t.cols);
  }
  switch (t.role) {
    case Role::attn_v:
      // llama.cpp counts attn_v tensors; without experts the count is the layer index.
      if (format == "q2_k") type = n_gqa >= 4 ? kQ4_K : kQ3_K;
      else if (format == "q3_k_m") type = layer < 2 ? kQ5_K : kQ4_K;
      else if ((format == "q4_k_m" || format == "q5_k_m") && use_more_bits(layer, n_layers)) type = kQ6_K;
      else if (format == "q4_k_s" && layer < 4) type = kQ5_K;
      // 70B-class models share one attn_v across 8 heads, so extra bits there are nearly free.
      if (n_layers == 80 && hp.arch == "llama" && (type == kQ3_K || type == kQ4_K)) type = kQ5_K;
      if (eight_experts) type = kQ8_0;
      break;
    case Role::attn_k:
      if (eight_experts) type = kQ8_0;
      break;
    case Role::ffn_down:
      if (format == "q2_k") type = kQ3_K;
      else if (format == "q3_k_m") type = layer < n_layers / 16 ? kQ5_K : kQ4_K;
      else if (format == "q4_k_m" && use_more_bits(layer, n_layers)) type = kQ6_K;
      else if (format == "q5_k_m" && use_more_bits(layer, n_layers)) type = kQ6_K;
      else if (format == "q4_k_s" && layer < n_layers / 8) type = kQ5_K;
      // With an importance matrix llama.cpp guards the first ffn_down layers of Q4_0 files.
      else if (format == "q4_0" && has_imatrix && layer < n_layers / 8) type = kQ4_1;
      break;
    case Role::attn_output:
      if (eight_experts) {
        if (format == "q2_k" || format == "q3_k_m" || format == "q4_k_s" || format == "q4_k_m") type = kQ5_K;
      } else if (format == "q2_k") {
        type = kQ3_K;
      } else if (format == "q3_k_m") {
        type = kQ4_K;
      }
      break;
    default:
      break;
  }
  return fallback_for_row(type, t.cols);
}

WeightTotals weight_totals(const model::ModelShape& shape, const std::string& format_in, std::int64_t group_size) {
  std::string format = format_in;
  if (format == "stored") {
    format = shape.stored_format;
    group_size = shape.stored_group_size;
  }
  WeightTotals out;
  for (const auto& t : shape.tensors) {
    Sized s;
    if (format == "gguf") {
      if (!t.ggml_type) throw Error(fmt::format("{}: no stored GGUF type", t.name));
      s = {gguf_type_name(*t.ggml_type), ggml_row_bytes(*t.ggml_type, t.cols) * t.rows};
    } else {
      s = size_in(format, t, shape, group_size, out.notes);
    }
    out.bytes += s.bytes;
    out.params += t.n_elements();
    out.by_type[s.type] += s.bytes;
  }
  return out;
}

}  // namespace mo::budget
