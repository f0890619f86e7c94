#include "mo/model/model_presets.h"

#include <fmt/format.h>

#include <filesystem>

#include "mo/core/error.h"
#include "mo/core/named_table.h"
#include "mo/core/strings.h"
#include "mo/io/gguf.h"
#include "mo/model/model_source.h"

namespace mo::model {
namespace {

Hparams hp(const char* arch, std::int64_t vocab, std::int64_t hidden, std::int64_t ffn, std::int64_t layers, std::int64_t heads,
           std::int64_t kv_heads, std::int64_t ctx, bool tied = false) {
  Hparams h;
  h.arch = arch;
  h.vocab_size = vocab;
  h.hidden_size = hidden;
  h.intermediate_size = ffn;
  h.num_layers = layers;
  h.num_heads = heads;
  h.num_kv_heads = kv_heads;
  h.head_dim = hidden / heads;
  h.context_length = ctx;
  h.tied_embeddings = tied;
  h.qkv_bias = std::string(arch) == "qwen2";
  return h;
}

Hparams moe(Hparams h, std::int64_t experts, std::int64_t used) {
  h.num_experts = experts;
  h.num_experts_used = used;
  return h;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"llama-2-7b", "meta-llama/Llama-2-7b-hf", 6.74, hp("llama", 32000, 4096, 11008, 32, 32, 32, 4096)},
      {"llama-2-13b", "meta-llama/Llama-2-13b-hf", 13.02, hp("llama", 32000, 5120, 13824, 40, 40, 40, 4096)},
      {"llama-2-70b", "meta-llama/Llama-2-70b-hf", 68.98, hp("llama", 32000, 8192, 28672, 80, 64, 8, 4096)},
      {"llama-3-8b", "meta-llama/Meta-Llama-3-8B", 8.03, hp("llama", 128256, 4096, 14336, 32, 32, 8, 8192)},
      {"llama-3-70b", "meta-llama/Meta-Llama-3-70B", 70.55, hp("llama", 128256, 8192, 28672, 80, 64, 8, 8192)},
      {"mistral-7b", "mistralai/Mistral-7B-v0.3", 7.25, hp("mistral", 32768, 4096, 14336, 32, 32, 8, 32768)},
      {"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 46.70, moe(hp("mixtral", 32000, 4096, 14336, 32, 32, 8, 32768), 8, 2)},
      {"qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 7.62, hp("qwen2", 152064, 3584, 18944, 28, 28, 4, 32768)},
      {"qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct", 14.77, hp("qwen2", 152064, 5120, 13824, 48, 40, 8, 32768)},
      {"qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 72.71, hp("qwen2", 152064, 8192, 29568, 80, 64, 8, 32768)},
      {"smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct", 0.1348, hp("llama", 49152, 576, 1536, 30, 9, 3, 8192, true)},
  };
  return presets;
}

const ModelPreset* find_model_preset(const std::string& name) { return find_by_name(model_presets(), name); }
std::vector<std::string> model_preset_names() { return names_of(model_presets()); }

ModelShape load_model_shape(const std::string& spec) {
  namespace fs = std::filesystem;
  if (const auto* p = find_model_preset(spec)) {
    ModelShape s;
    s.name = p->name;
    s.hp = p->hp;
    s.tensors = tensors_from_hparams(p->hp);
    s.stored_format = "fp16";
    return s;
  }
  std::error_code ec;
  if (!fs::exists(spec, ec)) {
    std::string msg = fmt::format("model_path: '{}' is neither a built-in preset nor an existing file or directory (presets: {})", spec,
                                  join(model_preset_names()));
    if (auto near = closest_match(spec, model_preset_names())) msg += fmt::format("; did you mean '{}'?", *near);
    throw UsageError(msg);
  }
  if (fs::is_regular_file(spec) && fs::path(spec).extension() == ".gguf") {
    return shape_from_gguf(gguf::read_metadata(spec));
  }
  return shape_from_hf_path(spec);
}

}  // namespace mo::model
