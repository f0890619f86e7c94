#pragma once
// Llama-family tensor names in HF checkpoints and in GGUF files, and the Q/K row permutation between
// the two layouts (formats.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mo::model {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; nullopt for names with no
// one-to-one twin (rotary_emb.inv_freq, per-expert Mixtral weights that GGUF merges into one tensor).
std::optional<std::string> hf_to_gguf_name(std::string_view hf);
std::optional<std::string> gguf_to_hf_name(std::string_view gguf);

// The decoder layer a tensor belongs to: N in "blk.N." (GGUF) or "model.layers.N." (HF); nullopt for
// tensors outside the layers. Numbers past INT32_MAX read as INT32_MAX, never as a small layer.
std::optional<std::int64_t> layer_index(std::string_view name);

// True for the tensors whose rows the permutation applies to (q and k weights and biases).
bool is_qk_tensor(std::string_view gguf_name);

// Q/K rows: [n_head * head_dim] rows of `row_bytes` each (a bias is rows of one element). HF keeps the
// two halves of each head apart (rotate-half RoPE); GGUF interleaves them in pairs:
// w.reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2). `n_head` is n_head_kv for K. Rows are copied
// as opaque bytes, so any dtype or quantized row works. src and dst must not overlap.
void permute_qk_hf_to_gguf(const std::uint8_t* src, std::uint8_t* dst, std::int64_t rows, std::size_t row_bytes, std::int64_t n_head);
void permute_qk_gguf_to_hf(const std::uint8_t* src, std::uint8_t* dst, std::int64_t rows, std::size_t row_bytes, std::int64_t n_head);

}  // namespace mo::model
