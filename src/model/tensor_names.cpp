#include "mo/model/tensor_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

#include "mo/core/error.h"

namespace mo::model {
namespace {

// Per-layer parts: HF suffix after "model.layers.N." and GGUF suffix after "blk.N.".
constexpr std::array<std::pair<std::string_view, std::string_view>, 15> kLayerParts = {{
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {"self_attn.rotary_emb.inv_freq", ""},
}};

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kGlobal = {{
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
}};

constexpr long kLayerBound = std::numeric_limits<std::int32_t>::max();

// Splits "<prefix><N>.<rest>" into N and rest.
std::optional<std::pair<long, std::string_view>> split_layer(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  long layer = 0;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return std::nullopt;
    layer = std::min<long>(layer * 10 + (c - '0'), kLayerBound);
  }
  return std::make_pair(layer, name.substr(dot + 1));
}

void check_shape(std::int64_t rows, std::int64_t n_head) {
  if (n_head <= 0 || rows <= 0 || rows % (2 * n_head) != 0)
    throw Error(fmt::format("Q/K permutation: {} rows do not split into {} heads of even size", rows, n_head));
}

}  // namespace

std::optional<std::string> hf_to_gguf_name(std::string_view hf) {
  for (const auto& [h, g] : kGlobal)
    if (hf == h) return std::string(g);
  if (auto parts = split_layer(hf, "model.layers.")) {
    for (const auto& [h, g] : kLayerParts)
      if (parts->second == h && !g.empty()) return fmt::format("blk.{}.{}", parts->first, g);
  }
  return std::nullopt;
}

std::optional<std::string> gguf_to_hf_name(std::string_view gguf) {
  for (const auto& [h, g] : kGlobal)
    if (gguf == g) return std::string(h);
  if (auto parts = split_layer(gguf, "blk.")) {
    for (const auto& [h, g] : kLayerParts)
      if (parts->second == g && !g.empty()) return fmt::format("model.layers.{}.{}", parts->first, h);
  }
  return std::nullopt;
}

std::optional<std::int64_t> layer_index(std::string_view name) {
  for (std::string_view prefix : {"blk.", "model.layers."})
    if (auto parts = split_layer(name, prefix)) return parts->first;
  return std::nullopt;
}

bool is_qk_tensor(std::string_view name) {
  for (std::string_view part : {".attn_q.weight", ".attn_k.weight", ".attn_q.bias", ".attn_k.bias"}) {
    if (name.size() >= part.size() && name.substr(name.size() - part.size()) == part) return true;
  }
  return false;
}

void permute_qk_hf_to_gguf(const std::uint8_t* src, std::uint8_t* dst, std::int64_t rows, std::size_t row_bytes, std::int64_t n_head) {
  check_shape(rows, n_head);
  const std::int64_t hd = rows / n_head, half = hd / 2;
  for (std::int64_t h = 0; h < n_head; ++h)
    for (std::int64_t j = 0; j < half; ++j)
      for (std::int64_t t = 0; t < 2; ++t)
        std::memcpy(dst + (h * hd + 2 * j + t) * row_bytes, src + (h * hd + t * half + j) * row_bytes, row_bytes);
}

void permute_qk_gguf_to_hf(const std::uint8_t* src, std::uint8_t* dst, std::int64_t rows, std::size_t row_bytes, std::int64_t n_head) {
  check_shape(rows, n_head);
  const std::int64_t hd = rows / n_head, half = hd / 2;
  for (std::int64_t h = 0; h < n_head; ++h)
    for (std::int64_t j = 0; j < half; ++j)
      for (std::int64_t t = 0; t < 2; ++t)
        std::memcpy(dst + (h * hd + t * half + j) * row_bytes, src + (h * hd + 2 * j + t) * row_bytes, row_bytes);
}

}  // namespace mo::model
