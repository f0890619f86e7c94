#include "mo/budget/budget_config.h"

#include <fmt/format.h>

#include "mo/budget/formats.h"
#include "mo/budget/presets.h"
#include "mo/core/strings.h"
#include "mo/model/model_presets.h"

namespace mo::budget {

void bind(config::Schema& s, BudgetConfig& c) {
  std::vector<std::string> formats = weight_format_names();
  formats.insert(formats.begin(), "auto");
  s.add("model_path", &c.model_path,
        fmt::format("a preset ({}), an HF config.json or model directory, or a .gguf file", join(model::model_preset_names())))
      .alias("model")
      .placeholder("MODEL");
  s.add("weight_format", &c.weight_format, "weight format to size; auto = as the model is stored (16-bit for presets)").one_of(formats);
  s.add("kv_cache_dtype", &c.kv_cache_dtype, "KV-cache element type; auto = fp16").one_of({"auto", "fp16", "bf16", "fp8", "int8"});
  s.add("gpu", &c.gpu, "GPU preset").one_of(gpu_preset_names());
  s.add("gpu_memory", &c.gpu_memory, "GiB per GPU; overrides `gpu` when > 0").range(0, 1 << 20).placeholder("GIB");
  s.add("gpu_memory_utilization", &c.gpu_memory_utilization, "fraction of GPU memory the server may use").range(0.05, 1);
  s.add("max_model_len", &c.max_model_len, "tokens per sequence (prompt + output); 0 = the model's context length").range(0, 1 << 24);
  s.add("max_num_seqs", &c.max_num_seqs, "sequences of max_model_len that must fit at once").range(1, 65536);
  s.add("max_num_batched_tokens", &c.max_num_batched_tokens, "tokens in one engine step; sets the activation peak").range(1, 1 << 24);
  s.add("tensor_parallel_size", &c.tensor_parallel_size, "GPUs the model is split over").range(1, 64);
  s.add("compare_formats", &c.compare_formats, "print one row per weight format");
  s.add("json", &c.json, "print JSON instead of the table");
}

}  // namespace mo::budget
