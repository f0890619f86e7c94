#pragma once
// The VRAM calculator: weights + KV cache + activations + runtime overhead against a GPU's budget,
// per GPU when the model is split over `tensor_parallel_size` GPUs. Pure math on a ModelShape.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mo/budget/budget_config.h"
#include "mo/model/model_shape.h"

namespace mo::budget {

struct BudgetRequest {
  model::ModelShape shape;
  std::string weight_format = "stored";  // a name from weight_formats() or "stored"
  std::int64_t group_size = 128;         // awq/gptq group size
  std::string kv_cache_dtype = "fp16";   // fp16 | bf16 | fp8 | int8
  std::string gpu_label;                 // for the table
  double gpu_memory_bytes = 0;           // per GPU
  double gpu_memory_utilization = 0.90;
  std::int64_t max_model_len = 0;  // resolved: > 0
  std::int64_t max_num_seqs = 1;
  std::int64_t max_num_batched_tokens = 2048;
  std::int64_t tensor_parallel_size = 1;
};

struct BudgetResult {
  std::string weight_format;  // resolved name ("stored" replaced by the real one)
  std::uint64_t n_params = 0;
  double weight_bits_per_weight = 0;
  double weights_bytes_total = 0;        // whole model
  double weights_bytes = 0;              // per GPU
  std::uint64_t kv_bytes_per_token = 0;  // per GPU
  std::int64_t kv_heads_per_gpu = 0;
  double kv_element_bytes = 0;
  double kv_reserved_bytes = 0;  // max_num_seqs x max_model_len x kv_bytes_per_token
  double activation_bytes = 0;
  double activation_bytes_per_token = 0;
  double logits_bytes = 0;
  double overhead_bytes = 0;
  double total_bytes = 0;
  double budget_bytes = 0;                                    // gpu memory x utilization
  double headroom_bytes = 0;                                  // budget - total; negative = short
  double kv_pool_bytes = 0;                                   // what a server gives the KV cache: budget - weights - activations - overhead
  std::int64_t kv_capacity_tokens = 0;                        // tokens that fit in the pool
  std::int64_t concurrent_seqs = 0;                           // sequences of max_model_len that fit at once
  std::int64_t max_model_len_fit = 0;                         // largest max_model_len for max_num_seqs (multiple of 16)
  bool fits = false;                                          // total <= budget
  std::map<std::string, std::uint64_t> weight_bytes_by_type;  // whole model, per storage type
  std::vector<std::string> notes;                             // format fallbacks
};

// Runtime overhead per GPU: CUDA context and cuBLAS workspaces (~0.5 GiB), CUDA graphs and allocator
// slack (~0.5 GiB), plus NCCL buffers (0.25 GiB) when the model is split over several GPUs.
double runtime_overhead_bytes(std::int64_t tensor_parallel_size);
double kv_element_bytes(const std::string& kv_cache_dtype);

// Throws UsageError for a request that cannot be sized (tensor_parallel_size not dividing the heads).
BudgetResult compute_budget(const BudgetRequest& req);

// What to change when the request does not fit (or fits only partly), most useful first:
// "lower max_model_len to 6144", "use awq-int4, which saves 9.1 GiB", "tensor_parallel_size 2".
std::vector<std::string> advise(const BudgetRequest& req, const BudgetResult& res);

// Turns the user's config into a request: loads the model shape, resolves auto values and presets.
BudgetRequest make_request(const BudgetConfig& cfg);

}  // namespace mo::budget
