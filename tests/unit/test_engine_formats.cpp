// Every stored weight format through the whole model: logits equal those of the same weights
// dequantized to f32, and a sequence's logits do not depend on how it is batched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>

#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/engine/kv_cache.h"
#include "mo/engine/ops/linear.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "small_llama.h"

namespace {

using namespace mo::engine;

using mo::test::small_llama;

// The same model with every matrix decoded to f32.
ModelWeights dequantized(const ModelWeights& w) {
  ModelWeights out = w;
  out.owned.clear();
  out.owned.reserve(64);
  auto convert = [&](Matrix& m) {
    auto& buf = out.owned.emplace_back(static_cast<std::size_t>(m.rows * m.cols) * 4);
    for (std::int64_t r = 0; r < m.rows; ++r)
      mo::gguf::dequantize_row(m.type, m.row(r), reinterpret_cast<float*>(buf.data()) + r * m.cols, m.cols);
    m.type = 0;
    m.row_bytes = static_cast<std::size_t>(m.cols) * 4;
    m.bytes = {buf.data(), buf.size()};
  };
  convert(out.token_embd);
  convert(out.output);
  for (auto& l : out.layers)
    for (Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) convert(*m);
  return out;
}

// Logits of every token of each prompt: one prompt per step (together = false) or all prompts in each
// step, each fed whole (chunk = 0) or `chunk` tokens at a time.
std::vector<std::vector<float>> run(Engine& e, const std::vector<std::vector<std::int32_t>>& prompts, bool together, int chunk) {
  KvLayout L = e.kv_layout(16, KvDtype::f32);
  KvCacheManager mgr(64, L.block_size);
  KvStorage kv(L, 64);
  std::vector<std::vector<float>> out(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) mgr.add_sequence(static_cast<std::int64_t>(i));
  std::vector<std::size_t> done(prompts.size(), 0);
  for (bool more = true; more;) {
    more = false;
    std::vector<SeqChunk> chunks;
    std::vector<std::size_t> owners;
    std::deque<std::vector<int>> slots;  // the chunks' slot spans point in here
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      if (done[i] == prompts[i].size()) continue;
      const std::size_t n = std::min<std::size_t>(chunk > 0 ? chunk : prompts[i].size(), prompts[i].size() - done[i]);
      auto app = mgr.append(static_cast<std::int64_t>(i), static_cast<int>(n));
      slots.push_back(app->slots);
      chunks.push_back({std::span<const std::int32_t>(prompts[i]).subspan(done[i], n), app->start_pos, slots.back(),
                        mgr.block_table(static_cast<std::int64_t>(i)), true});
      owners.push_back(i);
      done[i] += n;
      if (!together) break;
    }
    if (chunks.empty()) break;
    more = true;
    auto logits = e.forward(chunks, kv);
    const std::size_t vocab = static_cast<std::size_t>(e.hparams().vocab_size);
    std::size_t row = 0;
    for (std::size_t c = 0; c < chunks.size(); ++c)
      for (std::size_t t = 0; t < chunks[c].tokens.size(); ++t, ++row)
        out[owners[c]].insert(out[owners[c]].end(), logits.begin() + row * vocab, logits.begin() + (row + 1) * vocab);
  }
  return out;
}

class EngineFormats : public ::testing::TestWithParam<const char*> {};

// Relative L2 distance of each prompt's logits from the reference's.
std::vector<double> relative_l2(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& ref) {
  std::vector<double> out;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double diff = 0, norm = 0;
    for (std::size_t j = 0; j < got[i].size(); ++j) {
      diff += std::pow(got[i][j] - ref[i][j], 2);
      norm += std::pow(ref[i][j], 2);
    }
    out.push_back(std::sqrt(diff / norm));
  }
  return out;
}

// Restores the integer-dot path (the default) when a test that switched it off ends.
struct IntDot {
  explicit IntDot(bool on) { mo::ops::set_int_dot(on); }
  ~IntDot() { mo::ops::set_int_dot(true); }
};

TEST_P(EngineFormats, LogitsMatchDequantizedWeightsAndIgnoreBatching) {
  const auto type = mo::ggml_type_from_name(GetParam());
  ASSERT_TRUE(type.has_value());
  mo::ThreadPool pool(2);
  ModelWeights w = dummy_weights(small_llama(), *type, 7);
  Engine stored(w, pool);
  Engine f32(dequantized(w), pool);
  const std::vector<std::vector<std::int32_t>> prompts = {
      {1, 5, 9, 300, 17}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, {1, 250, 31}};
  const auto reference = run(f32, prompts, false, 0);
  // The stored weights alone (f32 activations, int_dot off): the same logits as their f32 decoding.
  // Then the default integer path, whose 8-bit activations (as llama.cpp's q8_0) add up to ~1.2% here.
  // F16 / BF16 weights always meet activations rounded to their type (as llama.cpp): BF16's 8-bit
  // mantissa costs ~3e-3 here, F16's 11 bits stay under 1e-3.
  const bool bf16 = *type == static_cast<std::uint32_t>(mo::GgmlType::BF16);
  for (const bool int_dot : {false, true}) {
    IntDot mode(int_dot);
    auto alone = run(stored, prompts, false, 0);
    const auto rel = relative_l2(alone, reference);
    for (std::size_t i = 0; i < prompts.size(); ++i)
      EXPECT_LT(rel[i], int_dot ? 2e-2 : bf16 ? 1e-2 : 1e-3) << GetParam() << " prompt " << i << " int_dot=" << int_dot;
    for (auto [together, chunk] : {std::pair{true, 0}, std::pair{true, 4}, std::pair{false, 3}}) {
      auto got = run(stored, prompts, together, chunk);
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_EQ(got[i].size(), alone[i].size());
        float worst = 0;
        for (std::size_t j = 0; j < got[i].size(); ++j) worst = std::max(worst, std::fabs(got[i][j] - alone[i][j]));
        EXPECT_LT(worst, 1e-4) << GetParam() << " prompt " << i << " together=" << together << " chunk=" << chunk << " int_dot=" << int_dot;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllStoredTypes, EngineFormats,
                         ::testing::Values("f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K",
                                           "q6_K"));

}  // namespace
