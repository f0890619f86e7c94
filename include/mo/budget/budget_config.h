#pragma once
#include <cstdint>
#include <string>

#include "mo/config/schema.h"

namespace mo::budget {

struct BudgetConfig {
  std::string model_path = "llama-3-8b";       // preset name, HF config.json / model dir, or .gguf file
  std::string weight_format = "auto";          // auto = as the model is stored (fp16 for presets)
  std::string kv_cache_dtype = "auto";         // auto = fp16
  std::string gpu = "rtx4090";                 // GPU preset
  double gpu_memory = 0;                       // GiB per GPU; > 0 overrides the preset
  double gpu_memory_utilization = 0.90;        // fraction of GPU memory the server may use
  std::int64_t max_model_len = 0;              // tokens per sequence; 0 = the model's context length
  std::int64_t max_num_seqs = 1;               // sequences of max_model_len that must fit at once
  std::int64_t max_num_batched_tokens = 2048;  // tokens in one forward step (sets the activation peak)
  std::int64_t tensor_parallel_size = 1;       // GPUs the model is split over
  bool compare_formats = false;                // one row per weight format instead of one table
  bool json = false;                           // machine-readable output on stdout
};
// Attaches every field to `s` with its help, range and allowed values.
void bind(config::Schema& s, BudgetConfig& c);

}  // namespace mo::budget
