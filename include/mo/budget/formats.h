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

}  // namespace mo::budget
