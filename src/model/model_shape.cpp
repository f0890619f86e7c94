#include "mo/model/model_shape.h"

#include <fmt/format.h>

#include <cmath>

#include "mo/core/error.h"

namespace mo::model {

const char* role_name(Role r) {
  switch (r) {
    case Role::token_embd: return "token_embd";
    case Role::output: return "output";
    case Role::norm: return "norm";
    case Role::attn_q: return "attn_q";
    case Role::attn_k: return "attn_k";
    case Role::attn_v: return "attn_v";
    case Role::attn_output: return "attn_output";
    case Role::ffn_gate: return "ffn_gate";
    case Role::ffn_up: return "ffn_up";
    case Role::ffn_down: return "ffn_down";
    case Role::router: return "router";
    case Role::bias: return "bias";
    case Role::other: return "other";
  }
  return "other";
}

bool is_quantizable_linear(Role r) {
  switch (r) {
    case Role::attn_q:
    case Role::attn_k:
    case Role::attn_v:
    case Role::attn_output:
    case Role::ffn_gate:
    case Role::ffn_up:
    case Role::ffn_down: return true;
    default: return false;
  }
}

bool needs_qk_permute(const std::string& arch) { return arch == "llama" || arch == "mistral" || arch == "mixtral"; }

std::uint64_t ModelShape::n_params() const {
  std::uint64_t n = 0;
  for (const auto& t : tensors) n += t.n_elements();
  return n;
}

void validate_hparams(const Hparams& hp, const std::string& src, const HparamKeys& keys) {
  auto bad = [&](const std::string& key, const std::string& expected, const std::string& got) {
    throw UsageError(fmt::format("{}: key '{}': expected {}, got {}", src, key, expected, got));
  };
  auto size = [&](std::int64_t v, const std::string& key, std::int64_t max) {
    if (v < 1 || v > max) bad(key, fmt::format("an integer in [1, {}]", max), std::to_string(v));
  };
  size(hp.vocab_size, keys.vocab_size, kMaxWidth);
  size(hp.hidden_size, keys.hidden_size, kMaxWidth);
  size(hp.intermediate_size, keys.intermediate_size, kMaxWidth);
  size(hp.num_layers, keys.num_layers, kMaxCount);
  size(hp.num_heads, keys.num_heads, kMaxCount);
  size(hp.num_kv_heads, keys.num_kv_heads, kMaxCount);
  if (hp.num_heads % hp.num_kv_heads != 0)
    bad(keys.num_kv_heads, fmt::format("a divisor of {} ({}: {})", hp.num_heads, keys.num_heads, hp.num_heads),
        std::to_string(hp.num_kv_heads));
  // RoPE turns pairs of dimensions, so a head has an even number of them.
  if (hp.head_dim < 2 || hp.head_dim > kMaxCount || hp.head_dim % 2 != 0)
    bad(keys.head_dim, fmt::format("an even integer in [2, {}]", kMaxCount), std::to_string(hp.head_dim));
  if (hp.context_length < 1 || hp.context_length > kMaxContextLength)
    bad(keys.context_length, fmt::format("a token count in [1, {}]", kMaxContextLength), std::to_string(hp.context_length));
  if (!std::isfinite(hp.rms_norm_eps) || hp.rms_norm_eps <= 0 || hp.rms_norm_eps >= 1)
    bad(keys.rms_norm_eps, "a number in (0, 1)", fmt::format("{}", hp.rms_norm_eps));
  if (!std::isfinite(hp.rope_theta) || hp.rope_theta <= 1 || hp.rope_theta > 1e12)
    bad(keys.rope_theta, "a number in (1, 1e12]", fmt::format("{}", hp.rope_theta));
  if (hp.vocab_size > 0 && (hp.bos_token_id < -1 || hp.bos_token_id >= hp.vocab_size))
    bad(keys.bos_token_id, fmt::format("a token id in [0, {})", hp.vocab_size), std::to_string(hp.bos_token_id));
  for (const auto id : hp.eos_token_ids)
    if (hp.vocab_size > 0 && (id < 0 || id >= hp.vocab_size))
      bad(keys.eos_token_id, fmt::format("token ids in [0, {})", hp.vocab_size), std::to_string(id));
  // RoPE scaling divides by these and narrows them to float: finite, positive, and (llama3) a real band.
  const RopeScaling& rs = hp.rope_scaling;
  if (rs.type == "none") return;
  const std::string& p = keys.rope_scaling;
  if (!std::isfinite(rs.factor) || rs.factor <= 0 || rs.factor > 1e6)
    bad(p + ".factor", "a number in (0, 1e6]", fmt::format("{}", rs.factor));
  if (rs.type != "llama3") return;
  if (!std::isfinite(rs.low_freq_factor) || rs.low_freq_factor <= 0 || rs.low_freq_factor > 1e6)
    bad(p + ".low_freq_factor", "a number in (0, 1e6]", fmt::format("{}", rs.low_freq_factor));
  if (!std::isfinite(rs.high_freq_factor) || rs.high_freq_factor <= rs.low_freq_factor || rs.high_freq_factor > 1e6)
    bad(p + ".high_freq_factor", fmt::format("a number in ({}, 1e6] (above low_freq_factor)", rs.low_freq_factor),
        fmt::format("{}", rs.high_freq_factor));
  if (rs.original_max_position_embeddings < 1 || rs.original_max_position_embeddings > kMaxContextLength)
    bad(p + ".original_max_position_embeddings", fmt::format("a token count in [1, {}]", kMaxContextLength),
        std::to_string(rs.original_max_position_embeddings));
}

std::vector<WeightTensor> tensors_from_hparams(const Hparams& hp) {
  auto need = [&](std::int64_t v, const char* what) {
    if (v <= 0) throw UsageError(fmt::format("model shape: {} must be positive, got {}", what, v));
  };
  need(hp.vocab_size, "vocab_size");
  need(hp.hidden_size, "hidden_size");
  need(hp.intermediate_size, "intermediate_size");
  need(hp.num_layers, "num_hidden_layers");
  need(hp.num_heads, "num_attention_heads");
  need(hp.num_kv_heads, "num_key_value_heads");
  need(hp.head_dim, "head_dim");
  if (hp.num_heads % hp.num_kv_heads != 0)
    throw UsageError(
        fmt::format("model shape: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", hp.num_heads, hp.num_kv_heads));

  const std::uint64_t h = hp.hidden_size, q = hp.num_heads * hp.head_dim, kv = hp.num_kv_heads * hp.head_dim;
  const std::uint64_t experts = hp.num_experts > 0 ? hp.num_experts : 1;
  const std::uint64_t ffn = hp.intermediate_size * experts;
  std::vector<WeightTensor> t;
  auto add = [&](std::string name, Role role, int layer, std::uint64_t rows, std::uint64_t cols) {
    t.push_back({std::move(name), role, layer, rows, cols, std::nullopt});
  };
  add("token_embd.weight", Role::token_embd, -1, hp.vocab_size, h);
  for (int i = 0; i < hp.num_layers; ++i) {
    auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
    add(n("attn_norm.weight"), Role::norm, i, 1, h);
    add(n("attn_q.weight"), Role::attn_q, i, q, h);
    add(n("attn_k.weight"), Role::attn_k, i, kv, h);
    add(n("attn_v.weight"), Role::attn_v, i, kv, h);
    if (hp.qkv_bias) {
      add(n("attn_q.bias"), Role::bias, i, 1, q);
      add(n("attn_k.bias"), Role::bias, i, 1, kv);
      add(n("attn_v.bias"), Role::bias, i, 1, kv);
    }
    add(n("attn_output.weight"), Role::attn_output, i, h, q);
    add(n("ffn_norm.weight"), Role::norm, i, 1, h);
    if (hp.num_experts > 0) {
      add(n("ffn_gate_inp.weight"), Role::router, i, hp.num_experts, h);
      add(n("ffn_gate_exps.weight"), Role::ffn_gate, i, ffn, h);
      add(n("ffn_up_exps.weight"), Role::ffn_up, i, ffn, h);
      add(n("ffn_down_exps.weight"), Role::ffn_down, i, h * experts, hp.intermediate_size);
    } else {
      add(n("ffn_gate.weight"), Role::ffn_gate, i, ffn, h);
      add(n("ffn_up.weight"), Role::ffn_up, i, ffn, h);
      add(n("ffn_down.weight"), Role::ffn_down, i, h, ffn);
    }
  }
  add("output_norm.weight", Role::norm, -1, 1, h);
  if (!hp.tied_embeddings) add("output.weight", Role::output, -1, hp.vocab_size, h);
  return t;
}

std::uint64_t kv_bytes_per_token(const Hparams& hp, double bytes_per_element) {
  return static_cast<std::uint64_t>(2.0 * hp.num_layers * hp.num_kv_heads * hp.head_dim * bytes_per_element);
}

}  // namespace mo::model
