#pragma once
// The shape of a Llama-family model: hyperparameters plus the list of weight tensors with their
// roles, from a built-in preset, an HF config.json or a GGUF file. Enough for memory math; the
// weights themselves are loaded elsewhere.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mo::model {

// RoPE frequency scaling (HF rope_scaling): none, linear (positions divided by factor) or llama3
// (per-frequency interpolation between low_freq_factor and high_freq_factor wavelengths).
struct RopeScaling {
  std::string type = "none";  // none | linear | llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;                       // llama3
  double high_freq_factor = 4.0;                      // llama3
  std::int64_t original_max_position_embeddings = 0;  // llama3
};

struct Hparams {
  std::string arch = "llama";  // llama | mistral | qwen2 | mixtral
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;  // per expert for MoE
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t context_length = 0;    // max_position_embeddings
  std::int64_t num_experts = 0;       // 0 = dense
  std::int64_t num_experts_used = 0;  // experts each token goes through
  bool tied_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  std::int64_t bos_token_id = -1;  // -1 = none
  std::vector<std::int64_t> eos_token_ids;
};

// Llama-style checkpoints store Q/K rows for rotate-half RoPE in HF and interleaved pairs in GGUF,
// so converting between them permutes those rows; Qwen2 uses the same (NeoX) layout in both.
bool needs_qk_permute(const std::string& arch);

enum class Role { token_embd, output, norm, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, router, bias, other };
const char* role_name(Role r);
// Linear layers a weight quantizer replaces (everything but embeddings, output, norms, routers, biases).
bool is_quantizable_linear(Role r);

struct WeightTensor {
  std::string name;  // GGUF-style name, e.g. "blk.3.attn_v.weight"
  Role role = Role::other;
  int layer = -1;                          // decoder layer, -1 outside the layers
  std::uint64_t rows = 0;                  // output features (all experts together for MoE)
  std::uint64_t cols = 0;                  // input features: the row length, GGUF ne[0]
  std::optional<std::uint32_t> ggml_type;  // the stored type when read from a GGUF file
  std::uint64_t n_elements() const { return rows * cols; }
};

struct ModelShape {
  std::string name;  // preset name, directory name or file name
  Hparams hp;
  std::vector<WeightTensor> tensors;
  std::string stored_format = "fp16";    // weight format as found: fp32, fp16, bf16, awq-int4, gguf, ...
  std::int64_t stored_group_size = 128;  // for awq/gptq checkpoints
  std::uint64_t n_params() const;
};

// The tensor list a Llama-family checkpoint with these hyperparameters has. Throws UsageError when a
// size is missing or inconsistent (heads not dividing hidden, kv heads not dividing heads).
std::vector<WeightTensor> tensors_from_hparams(const Hparams& hp);

// The file keys the hyperparameters came from, for error messages ("llama.context_length" or
// "max_position_embeddings").
struct HparamKeys {
  std::string vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim;
  std::string context_length, rms_norm_eps, rope_theta, bos_token_id, eos_token_id;
  std::string rope_scaling;  // the prefix of its keys: "rope_scaling" (config.json) or "llama.rope.scaling" (GGUF)
};
inline constexpr std::int64_t kMaxContextLength = std::int64_t{1} << 24;  // 16M tokens: more than any model ships
// Vocabulary, hidden, FFN and head sizes: 16M, far above any model, low enough that products of two fit
// 64 bits. Layers and heads: 65536.
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 16;
// Every number a file gives that later becomes a size, a divisor or a float parameter, checked with its
// range: throws UsageError "<src>: key '<key>': expected ..., got ...".
void validate_hparams(const Hparams& hp, const std::string& src, const HparamKeys& keys);

// KV-cache bytes one token takes: 2 (K and V) x layers x kv_heads x head_dim x bytes per element.
std::uint64_t kv_bytes_per_token(const Hparams& hp, double bytes_per_element);

}  // namespace mo::model
