#include "mo/budget/formats.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"
#include "mo/model/gguf_tensor_type.h"

namespace mo::budget {
namespace {

using model::Role;
using model::WeightTensor;

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
    std::uint32_t type = model::gguf_tensor_type(format, t, shape.hp);
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
