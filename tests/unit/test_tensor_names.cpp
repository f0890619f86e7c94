#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "mo/core/error.h"
#include "mo/model/tensor_names.h"

namespace {

using mo::model::gguf_to_hf_name;
using mo::model::hf_to_gguf_name;

TEST(TensorNames, MapLlamaNamesBothWays) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
      {"model.layers.12.self_attn.q_proj.weight", "blk.12.attn_q.weight"},
      {"model.layers.3.self_attn.k_proj.bias", "blk.3.attn_k.bias"},
      {"model.layers.3.self_attn.o_proj.weight", "blk.3.attn_output.weight"},
      {"model.layers.31.post_attention_layernorm.weight", "blk.31.ffn_norm.weight"},
      {"model.layers.7.mlp.down_proj.weight", "blk.7.ffn_down.weight"},
      {"model.layers.7.block_sparse_moe.gate.weight", "blk.7.ffn_gate_inp.weight"},
  };
  for (const auto& [hf, gguf] : pairs) {
    EXPECT_EQ(hf_to_gguf_name(hf), gguf);
    EXPECT_EQ(gguf_to_hf_name(gguf), hf);
  }
  EXPECT_EQ(hf_to_gguf_name("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  EXPECT_EQ(hf_to_gguf_name("model.layers.x.mlp.up_proj.weight"), std::nullopt);
  EXPECT_EQ(gguf_to_hf_name("rope_freqs.weight"), std::nullopt);
  EXPECT_TRUE(mo::model::is_qk_tensor("blk.0.attn_k.weight"));
  EXPECT_FALSE(mo::model::is_qk_tensor("blk.0.attn_v.weight"));
}

// Rows labelled by their index, one byte each: the result lists which source row lands where.
std::vector<std::uint8_t> permuted(bool to_gguf, std::int64_t rows, std::int64_t n_head) {
  std::vector<std::uint8_t> src(rows), dst(rows);
  std::iota(src.begin(), src.end(), 0);
  if (to_gguf)
    mo::model::permute_qk_hf_to_gguf(src.data(), dst.data(), rows, 1, n_head);
  else
    mo::model::permute_qk_gguf_to_hf(src.data(), dst.data(), rows, 1, n_head);
  return dst;
}

TEST(QkPermute, MatchesTheReshapeSwapaxesFormula) {
  // w.reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2): head_dim 4 -> rows 0,2,1,3 per head.
  EXPECT_EQ(permuted(true, 8, 2), (std::vector<std::uint8_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  // head_dim 8: the two halves interleave.
  EXPECT_EQ(permuted(true, 8, 1), (std::vector<std::uint8_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(permuted(false, 8, 1), (std::vector<std::uint8_t>{0, 2, 4, 6, 1, 3, 5, 7}));
}

TEST(QkPermute, InverseRestoresTheOriginalWithWideRows) {
  const std::int64_t rows = 64, n_head = 4;
  const std::size_t row_bytes = 6;
  std::vector<std::uint8_t> src(rows * row_bytes), mid(src.size()), back(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
  mo::model::permute_qk_hf_to_gguf(src.data(), mid.data(), rows, row_bytes, n_head);
  EXPECT_NE(mid, src);
  mo::model::permute_qk_gguf_to_hf(mid.data(), back.data(), rows, row_bytes, n_head);
  EXPECT_EQ(back, src);
}

TEST(QkPermute, RejectsRowsThatDoNotSplitIntoHeads) {
  std::vector<std::uint8_t> a(10), b(10);
  EXPECT_THROW(mo::model::permute_qk_hf_to_gguf(a.data(), b.data(), 10, 1, 4), mo::Error);
}

}  // namespace
