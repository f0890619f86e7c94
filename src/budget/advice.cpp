#include <fmt/format.h>

#include <algorithm>

#include "mo/budget/budget.h"
#include "mo/budget/formats.h"
#include "mo/core/strings.h"

namespace mo::budget {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Formats a user of the same stack can switch to: vLLM-style checkpoints or GGUF files.
std::vector<std::string> same_stack_formats(const std::string& current) {
  std::vector<std::string> out;
  for (const auto& f : weight_formats()) {
    bool gguf = is_gguf_format(f.name);
    if (gguf == is_gguf_format(current) || current == "gguf") out.push_back(f.name);
  }
  return out;
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

}  // namespace

std::vector<std::string> advise(const BudgetRequest& req, const BudgetResult& res) {
  std::vector<std::string> out;
  if (res.fits) return out;
  // The pool holds at least one block: shorter sequences or fewer of them make it fit.
  if (res.max_model_len_fit >= 16) {
    out.push_back(fmt::format("lower max_model_len to {} (fits {} sequence{} at once)", res.max_model_len_fit, req.max_num_seqs,
                              req.max_num_seqs == 1 ? "" : "s"));
  }
  if (req.max_num_seqs > 1 && res.concurrent_seqs >= 1) {
    out.push_back(fmt::format("lower max_num_seqs to {} at max_model_len {}", res.concurrent_seqs, req.max_model_len));
  }
  // The best-quality smaller format that fits as asked.
  for (const auto& name : same_stack_formats(res.weight_format)) {
    if (name == res.weight_format) continue;
    BudgetRequest alt = req;
    alt.weight_format = name;
    alt.group_size = 128;
    BudgetResult r = compute_budget(alt);
    if (r.fits && r.weights_bytes < res.weights_bytes) {
      out.push_back(fmt::format("use {}, which saves {} of weights ({} KV tokens then fit)", name, gib(res.weights_bytes - r.weights_bytes),
                                format_count(r.kv_capacity_tokens)));
      break;
    }
  }
  for (std::int64_t tp : {2, 4, 8}) {
    if (tp <= req.tensor_parallel_size || req.shape.hp.num_heads % tp != 0) continue;
    BudgetRequest alt = req;
    alt.tensor_parallel_size = tp;
    if (compute_budget(alt).fits) {
      out.push_back(fmt::format("split over {} GPUs (tensor_parallel_size: {})", tp, tp));
      break;
    }
  }
  if (req.gpu_memory_utilization < 0.95) {
    BudgetRequest alt = req;
    alt.gpu_memory_utilization = 0.95;
    if (compute_budget(alt).fits) out.push_back("raise gpu_memory_utilization to 0.95 (if nothing else uses this GPU)");
  }
  if (req.kv_cache_dtype != "fp8" && req.kv_cache_dtype != "int8") {
    BudgetRequest alt = req;
    alt.kv_cache_dtype = "fp8";
    if (compute_budget(alt).fits) out.push_back("use kv_cache_dtype: fp8, which halves the KV cache");
  }
  return out;
}

}  // namespace mo::budget
