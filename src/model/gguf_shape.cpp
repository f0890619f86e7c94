#include <fmt/format.h>

#include <filesystem>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/model/model_source.h"
#include "mo/model/tensor_names.h"

namespace mo::model {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Role role_of(const std::string& name) {
  if (name == "token_embd.weight") return Role::token_embd;
  if (name == "output.weight") return Role::output;
  if (ends_with(name, ".bias")) return Role::bias;
  if (ends_with(name, "_norm.weight")) return Role::norm;
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has(".ffn_gate_inp.")) return Role::router;
  if (has(".attn_q.")) return Role::attn_q;
  if (has(".attn_k.")) return Role::attn_k;
  if (has(".attn_v.")) return Role::attn_v;
  if (has(".attn_output.")) return Role::attn_output;
  if (has(".ffn_gate")) return Role::ffn_gate;
  if (has(".ffn_up")) return Role::ffn_up;
  if (has(".ffn_down")) return Role::ffn_down;
  return Role::other;
}

// <arch>.rope.scaling.type: llama.cpp also knows yarn and longrope, whose frequency corrections and
// attention factor we do not compute, so running such a file would give wrong outputs, not an error.
RopeScaling rope_scaling_of(const gguf::File& f, const std::string& arch) {
  RopeScaling r;
  const std::string type_key = arch + ".rope.scaling.type";
  if (!f.find(type_key)) return r;
  const std::string name = f.get_string(type_key);
  if (name == "none") return r;
  if (name != "linear")
    throw UsageError(fmt::format("{}: key '{}': rope scaling '{}' is not supported{} (supported: none, linear)", f.path, type_key, name,
                                 name == "yarn" ? " yet" : ""));
  r.type = "linear";
  r.factor = f.get_number_opt(arch + ".rope.scaling.factor").value_or(1.0);
  return r;
}

}  // namespace

ModelShape shape_from_gguf(const gguf::File& f) {
  std::string arch = f.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2") {
    throw UsageError(
        fmt::format("{}: general.architecture '{}' is not supported (supported: {})", f.path, arch, supported_architectures()));
  }
  ModelShape shape;
  shape.name = std::filesystem::path(f.path).filename().string();
  shape.stored_format = "gguf";
  Hparams& hp = shape.hp;
  auto key = [&](const char* k) { return arch + "." + k; };
  hp.arch = arch;
  hp.hidden_size = f.get_int(key("embedding_length"));
  hp.intermediate_size = f.get_int(key("feed_forward_length"));
  hp.num_layers = f.get_int(key("block_count"));
  hp.num_heads = f.get_int(key("attention.head_count"));
  hp.num_kv_heads = f.get_int_opt(key("attention.head_count_kv")).value_or(hp.num_heads);
  const auto key_length = f.get_int_opt(key("attention.key_length"));
  hp.head_dim = key_length.value_or(hp.num_heads > 0 ? hp.hidden_size / hp.num_heads : 0);  // validate_hparams names a bad head count
  // Required, as llama.cpp requires it: a default would be a context length nobody chose.
  hp.context_length = f.get_int(key("context_length"));
  hp.num_experts = f.get_int_opt(key("expert_count")).value_or(0);
  hp.num_experts_used = f.get_int_opt(key("expert_used_count")).value_or(0);
  if (hp.num_experts > 0) hp.arch = "mixtral";
  hp.rms_norm_eps = f.get_number_opt(key("attention.layer_norm_rms_epsilon")).value_or(1e-5);
  hp.rope_theta = f.get_number_opt(key("rope.freq_base")).value_or(10000.0);
  hp.rope_scaling = rope_scaling_of(f, arch);
  // llama.cpp stores llama3 rope scaling as precomputed per-frequency factors in a tensor.
  if (f.find_tensor("rope_freqs.weight")) hp.rope_scaling.type = "llama3";
  hp.bos_token_id = f.get_int_opt("tokenizer.ggml.bos_token_id").value_or(-1);
  if (auto eos = f.get_int_opt("tokenizer.ggml.eos_token_id")) hp.eos_token_ids = {*eos};
  hp.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  hp.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  // The vocabulary is as large as the embedding; the key is a fallback for files without one.
  const auto* embd = f.find_tensor("token_embd.weight");
  if (embd && embd->ne.size() == 2) {
    hp.vocab_size = static_cast<std::int64_t>(embd->ne[1]);
  } else if (auto n = f.get_int_opt(key("vocab_size"))) {
    hp.vocab_size = *n;
  } else {
    throw Error(fmt::format("{}: tensor 'token_embd.weight' is missing or not a [hidden, vocab] matrix, and there is no key '{}'", f.path,
                            key("vocab_size")));
  }

  const std::string vocab_key = embd && embd->ne.size() == 2 ? "token_embd.weight (rows)" : key("vocab_size");
  validate_hparams(hp, f.path,
                   {vocab_key, key("embedding_length"), key("feed_forward_length"), key("block_count"), key("attention.head_count"),
                    key("attention.head_count_kv"),
                    key_length ? key("attention.key_length") : key("embedding_length") + " / " + key("attention.head_count"),
                    key("context_length"), key("attention.layer_norm_rms_epsilon"), key("rope.freq_base"), "tokenizer.ggml.bos_token_id",
                    "tokenizer.ggml.eos_token_id", key("rope.scaling")});
  // We rotate every dimension of a head; a file that rotates fewer (or more) would run with wrong positions.
  if (const auto rope_dims = f.get_int_opt(key("rope.dimension_count")); rope_dims && *rope_dims != hp.head_dim)
    throw UsageError(fmt::format("{}: key '{}': expected the head dimension {} (partial rotary embeddings are not supported), got {}",
                                 f.path, key("rope.dimension_count"), hp.head_dim, *rope_dims));
  for (const auto& t : f.tensors) {
    WeightTensor w;
    w.name = t.name;
    w.role = role_of(t.name);
    w.layer = static_cast<int>(layer_index(t.name).value_or(-1));
    w.cols = t.ne.empty() ? 1 : t.ne[0];
    w.rows = 1;
    for (std::size_t d = 1; d < t.ne.size(); ++d) w.rows *= t.ne[d];
    w.ggml_type = t.type;
    shape.tensors.push_back(std::move(w));
  }
  return shape;
}

}  // namespace mo::model
