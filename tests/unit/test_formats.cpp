#include <gtest/gtest.h>

#include "mo/budget/formats.h"
#include "mo/model/gguf_tensor_type.h"
#include "mo/model/model_presets.h"
#include "mo/formats/ggml_types.h"

namespace {

using mo::budget::weight_totals;
using mo::model::gguf_tensor_type;
using mo::model::Role;

mo::model::ModelShape preset(const std::string& name) { return mo::model::load_model_shape(name); }

const mo::model::WeightTensor& tensor(const mo::model::ModelShape& s, const std::string& name) {
  for (const auto& t : s.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

std::string type_name(std::uint32_t t) { return mo::ggml_type_info(t)->name; }

TEST(GgufMix, Q4KMUsesQ6KForOutputAndSelectedAttnVAndFfnDown) {
  auto s = preset("llama-2-7b");  // 32 layers: more bits for 0-3, 28-31 and every third from 6
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "output.weight"), s.hp)), "q6_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "token_embd.weight"), s.hp)), "q4_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.0.attn_v.weight"), s.hp)), "q6_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.4.attn_v.weight"), s.hp)), "q4_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.6.ffn_down.weight"), s.hp)), "q6_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.7.ffn_down.weight"), s.hp)), "q4_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.31.ffn_down.weight"), s.hp)), "q6_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.5.attn_q.weight"), s.hp)), "q4_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(s, "blk.5.attn_norm.weight"), s.hp)), "f32");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_0", tensor(s, "output.weight"), s.hp)), "q6_K");
  EXPECT_EQ(type_name(gguf_tensor_type("q8_0", tensor(s, "output.weight"), s.hp)), "q8_0");
}

TEST(GgufMix, Llama2_7bFileSizesMatchPublishedLlamaCppFiles) {
  // Published llama-2-7b GGUF sizes (GB): the tensor data is all but ~1 MB of metadata.
  auto s = preset("llama-2-7b");
  EXPECT_NEAR(weight_totals(s, "q4_0").bytes / 1e9, 3.83, 0.01);
  EXPECT_NEAR(weight_totals(s, "q4_k_m").bytes / 1e9, 4.08, 0.01);
  EXPECT_NEAR(weight_totals(s, "q5_k_m").bytes / 1e9, 4.78, 0.01);
  EXPECT_NEAR(weight_totals(s, "q6_k").bytes / 1e9, 5.53, 0.01);
  EXPECT_NEAR(weight_totals(s, "q8_0").bytes / 1e9, 7.16, 0.01);
}

TEST(GgufMix, RowsNotDivisibleByTheBlockFallBack) {
  auto smol = preset("smollm2-135m");  // hidden 576 = 2.25 x 256, tied embeddings
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(smol, "blk.0.attn_q.weight"), smol.hp)), "q5_0");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(smol, "token_embd.weight"), smol.hp)), "q8_0");
  EXPECT_EQ(type_name(gguf_tensor_type("q4_k_m", tensor(smol, "blk.0.ffn_down.weight"), smol.hp)), "q6_K");  // 1536 = 6 x 256
  EXPECT_EQ(type_name(gguf_tensor_type("q6_k", tensor(smol, "blk.3.attn_k.weight"), smol.hp)), "q8_0");
}

// The sum over the tensors an AutoAWQ GEMM checkpoint of Llama-2-7B holds, from the architecture alone:
// per linear [out, in], qweight int32 [in, out/8], qzeros int32 [in/128, out/8], scales f16 [in/128, out];
// embeddings, lm_head and the 65 norms in fp16. That is 3.889 GB, as TheBloke/Llama-2-7B-AWQ's 3.89 GB.
TEST(WeightFormats, AwqInt4IsTheSumOfTheAutoAwqCheckpointTensors) {
  const std::uint64_t hidden = 4096, ffn = 11008, layers = 32, vocab = 32000, group = 128;
  auto awq_bytes = [&](std::uint64_t out, std::uint64_t in) {
    return in * (out / 8) * 4 + (in / group) * (out / 8) * 4 + (in / group) * out * 2;
  };
  const std::uint64_t per_layer = 4 * awq_bytes(hidden, hidden) + 2 * awq_bytes(ffn, hidden) + awq_bytes(hidden, ffn);
  const std::uint64_t fp16 = 2 * (2 * vocab * hidden + (2 * layers + 1) * hidden);
  const auto w = weight_totals(preset("llama-2-7b"), "awq-int4");
  EXPECT_EQ(w.bytes, layers * per_layer + fp16);
  EXPECT_EQ(w.by_type.at("fp16"), fp16);
  EXPECT_EQ(w.params, 6738415616u);  // Llama-2-7B's published parameter count
  EXPECT_NEAR(w.bytes / 1e9, 3.89, 0.005);
  EXPECT_TRUE(w.notes.empty());
}

TEST(WeightFormats, GptqAddsGIdxAndAwqKeepsIndivisibleLayersFp16) {
  auto s = preset("llama-2-7b");
  EXPECT_GT(weight_totals(s, "gptq-int4").bytes, weight_totals(s, "awq-int4").bytes);
  mo::model::Hparams hp = s.hp;
  hp.intermediate_size = 11000;  // down_proj input 11000 is not a multiple of 128
  mo::model::ModelShape odd{"odd", hp, mo::model::tensors_from_hparams(hp)};
  auto w = weight_totals(odd, "awq-int4");
  ASSERT_EQ(w.notes.size(), 32u);
  EXPECT_NE(w.notes[0].find("blk.0.ffn_down.weight"), std::string::npos);
}

TEST(WeightFormats, Fp8AndInt8KeepEmbeddingsIn16Bit) {
  auto s = preset("llama-3-8b");
  auto fp8 = weight_totals(s, "fp8");
  EXPECT_EQ(fp8.by_type.at("fp16"), 2ull * (2 * 128256 * 4096 + 65 * 4096));
  EXPECT_NEAR(fp8.bits_per_weight(), 8 + 8.0 * (2 * 128256 * 4096) / fp8.params, 0.02);  // + per-channel scales
}

}  // namespace
