#include "mo/budget/budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mo/budget/formats.h"
#include "mo/budget/presets.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/model/model_presets.h"

namespace mo::budget {
namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::int64_t kKvBlock = 16;  // tokens per KV block in vLLM and our server
}  // namespace

double runtime_overhead_bytes(std::int64_t tp) { return 1.0 * kGiB + (tp > 1 ? 0.25 * kGiB : 0.0); }

double kv_element_bytes(const std::string& dtype) {
  if (dtype == "fp16" || dtype == "bf16" || dtype == "auto") return 2;
  if (dtype == "fp8" || dtype == "int8") return 1;
  throw UsageError(fmt::format("kv_cache_dtype: expected one of auto, fp16, bf16, fp8, int8, got '{}'", dtype));
}

BudgetResult compute_budget(const BudgetRequest& req) {
  const model::Hparams& hp = req.shape.hp;
  const std::int64_t tp = req.tensor_parallel_size;
  if (tp < 1 || hp.num_heads % tp != 0) {
    throw UsageError(fmt::format("tensor_parallel_size: {} does not divide the model's {} attention heads", tp, hp.num_heads));
  }
  BudgetResult r;
  r.weight_format = req.weight_format == "stored" ? req.shape.stored_format : req.weight_format;
  WeightTotals w = weight_totals(req.shape, req.weight_format, req.group_size);
  r.notes = w.notes;
  r.weight_bytes_by_type = w.by_type;
  r.n_params = w.params;
  r.weight_bits_per_weight = w.bits_per_weight();
  r.weights_bytes_total = static_cast<double>(w.bytes);
  r.weights_bytes = r.weights_bytes_total / tp;

  // With more GPUs than KV heads, each GPU keeps a copy of a head (as vLLM does).
  r.kv_heads_per_gpu = std::max<std::int64_t>(1, hp.num_kv_heads / tp);
  r.kv_element_bytes = kv_element_bytes(req.kv_cache_dtype);
  model::Hparams per_gpu = hp;
  per_gpu.num_kv_heads = r.kv_heads_per_gpu;
  r.kv_bytes_per_token = model::kv_bytes_per_token(per_gpu, r.kv_element_bytes);
  r.kv_reserved_bytes = static_cast<double>(req.max_num_seqs) * req.max_model_len * r.kv_bytes_per_token;

  // Activation peak of one layer per batched token: residual + normed input + the larger of
  // attention (q, k, v, output) and MLP (gate and up outputs, activated product), plus fp32 logits
  // and probabilities for every sequence sampled in the step.
  const double act_elem = r.weight_format == "fp32" ? 4 : 2;
  const double ffn = static_cast<double>(hp.intermediate_size) * std::max<std::int64_t>(1, hp.num_experts_used) / tp;
  const double attn = (2.0 * hp.num_heads * hp.head_dim + 2.0 * hp.num_kv_heads * hp.head_dim) / tp;
  r.activation_bytes_per_token = (2.0 * hp.hidden_size + std::max(attn, 3.0 * ffn)) * act_elem;
  const double sampled = static_cast<double>(std::min(req.max_num_seqs, req.max_num_batched_tokens));
  r.logits_bytes = sampled * hp.vocab_size * 4.0 * 2.0;
  r.activation_bytes = req.max_num_batched_tokens * r.activation_bytes_per_token + r.logits_bytes;

  r.overhead_bytes = runtime_overhead_bytes(tp);
  r.budget_bytes = req.gpu_memory_bytes * req.gpu_memory_utilization;
  r.total_bytes = r.weights_bytes + r.kv_reserved_bytes + r.activation_bytes + r.overhead_bytes;
  r.headroom_bytes = r.budget_bytes - r.total_bytes;
  r.fits = r.headroom_bytes >= 0;

  r.kv_pool_bytes = std::max(0.0, r.budget_bytes - r.weights_bytes - r.activation_bytes - r.overhead_bytes);
  r.kv_capacity_tokens = r.kv_bytes_per_token ? static_cast<std::int64_t>(r.kv_pool_bytes / r.kv_bytes_per_token) : 0;
  r.kv_capacity_tokens -= r.kv_capacity_tokens % kKvBlock;
  r.concurrent_seqs = r.kv_capacity_tokens / req.max_model_len;
  std::int64_t per_seq = r.kv_capacity_tokens / std::max<std::int64_t>(1, req.max_num_seqs);
  r.max_model_len_fit = per_seq - per_seq % kKvBlock;
  return r;
}

BudgetRequest make_request(const BudgetConfig& cfg) {
  BudgetRequest req;
  req.shape = model::load_model_shape(cfg.model_path);
  log::debug("budget: {} ({}) with {} tensors, stored as {}", req.shape.name, req.shape.hp.arch, req.shape.tensors.size(),
             req.shape.stored_format);
  req.weight_format = cfg.weight_format == "auto" ? "stored" : cfg.weight_format;
  req.group_size = req.shape.stored_format == req.weight_format ? req.shape.stored_group_size : 128;
  req.kv_cache_dtype = cfg.kv_cache_dtype == "auto" ? "fp16" : cfg.kv_cache_dtype;
  if (cfg.gpu_memory > 0) {
    req.gpu_memory_bytes = cfg.gpu_memory * kGiB;
    req.gpu_label = fmt::format("custom GPU {:.2f} GiB", cfg.gpu_memory);
  } else {
    const GpuPreset* g = find_gpu_preset(cfg.gpu);
    if (!g) throw UsageError(fmt::format("gpu: '{}' is not a preset ({})", cfg.gpu, fmt::join(gpu_preset_names(), ", ")));
    req.gpu_memory_bytes = g->memory_mib * 1024.0 * 1024.0;
    req.gpu_label = g->label;
  }
  req.gpu_memory_utilization = cfg.gpu_memory_utilization;
  const std::int64_t ctx = req.shape.hp.context_length > 0 ? req.shape.hp.context_length : 4096;
  req.max_model_len = cfg.max_model_len > 0 ? cfg.max_model_len : ctx;
  if (req.shape.hp.context_length > 0 && req.max_model_len > req.shape.hp.context_length) {
    throw UsageError(fmt::format("max_model_len: {} exceeds the model's context length {} (max_position_embeddings)", req.max_model_len,
                                 req.shape.hp.context_length));
  }
  req.max_num_seqs = cfg.max_num_seqs;
  req.max_num_batched_tokens = cfg.max_num_batched_tokens;
  req.tensor_parallel_size = cfg.tensor_parallel_size;
  return req;
}

}  // namespace mo::budget
