// AWQ / GPTQ INT4 linears on the CPU as Q4Z blocks (src/engine/cpu/q4z.h): the tile kernels at every
// level this CPU has against a double-precision dot of the exactly dequantized weights with the
// dequantized 8-bit activations; bit-identical results whatever the tile shape; and tiny checkpoints
// (AWQ interleaved packing, GPTQ v1 / v2 zeros, act-order g_idx, per-channel groups), packed in the test from
// the format description (../ops/spec_int_layouts.h), loaded into Q4Z whose rows decode to the exact weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../src/engine/cpu/q4z.h"
#include "../../src/engine/cpu/q8_kernels.h"
#include "mo/core/half.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"
#include "mo/io/safetensors.h"
#include "mo/model/model_files.h"
#include "../ops/spec_int_layouts.h"

namespace formats = mo::formats;

namespace {

namespace fs = std::filesystem;
using mo::ops::q4z::BlockQ4Z;
using mo::ops::q8::BlockQ8;

struct Level {
  const char* name;
  mo::ops::q8::Kernel k;
};

std::vector<Level> levels() {
  std::vector<Level> v = {{"scalar", mo::ops::q4z::kernel_scalar()}};
  if (auto k = mo::ops::q4z::kernel_avx2()) v.push_back({"avx2", k});
  if (auto k = mo::ops::q4z::kernel_avx512()) v.push_back({"avx512-vnni", k});
  if (mo::ops::q4z::kernel_avx2()) v.push_back({"avx2 row groups", mo::ops::q8::q4z_panel_avx2()});
  if (mo::ops::q8::cpu_has_vnni()) v.push_back({"avx512-vnni row groups", mo::ops::q8::q4z_panel_vnni()});
  return v;
}

std::vector<std::uint8_t> random_blocks(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::vector<std::uint8_t> w(static_cast<std::size_t>(rows) * mo::ops::q4z::row_bytes(cols));
  auto* b = reinterpret_cast<BlockQ4Z*>(w.data());
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (std::size_t i = 0; i < w.size() / sizeof(BlockQ4Z); ++i) {
    b[i].d = mo::f32_to_f16(scale(rng));
    b[i].z = static_cast<std::uint8_t>(rng() % 17);  // 0..16: AWQ / GPTQ v2 zeros and GPTQ v1's zero + 1
    for (auto& q : b[i].qs) q = static_cast<std::uint8_t>(rng());
  }
  return w;
}

std::vector<float> random_x(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = g(rng);
  return x;
}

// Σ w·x in double over the exact weights and the dequantized BlockQ8 activations, and Σ |w·x|.
std::pair<double, double> reference(const std::uint8_t* row, const BlockQ8* xq, std::int64_t cols) {
  std::vector<float> w(static_cast<std::size_t>(cols));
  mo::ops::q4z::dequantize_row(row, w.data(), cols);
  double s = 0, a = 0;
  for (std::int64_t i = 0; i < cols; ++i) {
    const double p = static_cast<double>(w[i]) * (static_cast<double>(xq[i / 32].d) * xq[i / 32].qs[i % 32]);
    s += p, a += std::fabs(p);
  }
  return {s, a};
}

TEST(Int4Linear, KernelsMatchDoubleReference) {
  std::mt19937 rng(7);
  const std::int64_t rows = 13, cols = 256, n = 11;
  const auto w = random_blocks(rows, cols, rng);
  const auto x = random_x(n * cols, rng);
  std::vector<BlockQ8> xq(static_cast<std::size_t>(n * cols / 32));
  mo::ops::q8::quantize_rows(x.data(), n, cols, cols, xq.data());
  const std::size_t rb = mo::ops::q4z::row_bytes(cols);
  for (const Level& L : levels()) {
    std::vector<float> y(static_cast<std::size_t>(n * rows));
    L.k(w.data(), rb, static_cast<int>(rows), xq.data(), static_cast<int>(n), cols, y.data(), rows);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto [ref, mag] = reference(w.data() + r * rb, xq.data() + t * cols / 32, cols);
        EXPECT_NEAR(y[t * rows + r], ref, 1e-5 * mag + 1e-30) << L.name << " row " << r << " token " << t;
      }
  }
}

TEST(Int4Linear, ResultDoesNotDependOnTileShape) {
  std::mt19937 rng(11);
  const int rows = 11, n = 9;
  const std::int64_t cols = 160;
  const auto w = random_blocks(rows, cols, rng);
  const auto x = random_x(n * cols, rng);
  std::vector<BlockQ8> xq(static_cast<std::size_t>(n * cols / 32));
  mo::ops::q8::quantize_rows(x.data(), n, cols, cols, xq.data());
  const std::size_t rb = mo::ops::q4z::row_bytes(cols);
  for (const Level& L : levels()) {
    std::vector<float> all(static_cast<std::size_t>(n * rows));
    L.k(w.data(), rb, rows, xq.data(), n, cols, all.data(), rows);
    for (const auto& [nr, nt] : std::vector<std::pair<int, int>>{{1, 1}, {1, 9}, {11, 1}, {2, 2}, {3, 5}, {4, 4}, {5, 3}, {7, 8}}) {
      std::vector<float> y(static_cast<std::size_t>(n * rows));
      for (int r0 = 0; r0 < rows; r0 += nr)
        for (int t0 = 0; t0 < n; t0 += nt)
          L.k(w.data() + r0 * rb, rb, std::min(nr, rows - r0), xq.data() + t0 * cols / 32, std::min(nt, n - t0), cols,
              y.data() + t0 * rows + r0, rows);
      EXPECT_EQ(0, std::memcmp(all.data(), y.data(), all.size() * sizeof(float))) << L.name << " tiles " << nr << "x" << nt;
    }
  }
}

// ---- checkpoints: one Llama layer, hidden 64, ffn 128, every linear 4-bit

struct Scheme {
  std::string method;  // "awq" | "gptq"
  int group = 32;      // -1: one group per row
  bool act_order = false, v2 = false;
  bool whole_blocks = true;  // act-order groups of whole blocks of 32 (else the F32 fallback)
};

formats::QuantizedLinear random_linear(std::int64_t rows, std::int64_t cols, const Scheme& s, std::mt19937& rng) {
  formats::QuantizedLinear q;
  q.rows = rows, q.cols = cols;
  q.scheme = {4, s.group, false};
  const std::int64_t G = s.group == -1 ? cols : s.group, ng = cols / G;
  q.g_idx.resize(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) q.g_idx[c] = static_cast<std::int32_t>(c / G);
  if (s.act_order) std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);
  if (s.act_order && !s.whole_blocks) *std::find(q.g_idx.begin(), q.g_idx.end(), 0) = 1;  // groups of 31 and 33 columns
  q.q.resize(static_cast<std::size_t>(rows * cols));
  for (auto& v : q.q) v = static_cast<std::uint8_t>(rng() % 16);
  q.scales.resize(static_cast<std::size_t>(rows * ng));
  q.zeros.resize(q.scales.size());
  std::uniform_real_distribution<float> scale(0.002f, 0.03f);
  const bool v1 = s.method == "gptq" && !s.v2;
  for (std::size_t i = 0; i < q.scales.size(); ++i) {
    q.scales[i] = mo::f32_to_f16(scale(rng));
    q.zeros[i] = static_cast<std::uint8_t>(v1 ? 1 + rng() % 15 : rng() % 16);  // v1 stores zero - 1 (our packer keeps zeros < 16)
  }
  return q;
}

struct Checkpoint {
  std::map<std::string, formats::QuantizedLinear> linears;  // by GGUF base name
};

template <class T>
mo::st::TensorData td(const std::string& name, mo::st::Dtype d, std::vector<std::int64_t> shape, const std::vector<T>& v) {
  return {name, d, std::move(shape), v.data(), v.size() * sizeof(T)};
}

Checkpoint write_checkpoint(const fs::path& dir, const Scheme& s) {
  const std::int64_t hidden = 64, ffn = 128, vocab = 64;
  std::mt19937 rng(3);
  Checkpoint ck;
  std::vector<std::vector<std::int32_t>> ints;
  std::vector<std::vector<std::uint16_t>> halves;
  std::vector<std::vector<float>> floats;
  std::vector<mo::st::TensorData> t;
  auto f32 = [&](const std::string& name, std::vector<std::int64_t> shape, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    auto& v = floats.emplace_back(static_cast<std::size_t>(n));
    for (auto& e : v) e = u(rng);
    t.push_back(td(name, mo::st::Dtype::F32, std::move(shape), v));
  };
  f32("model.embed_tokens.weight", {vocab, hidden}, -1, 1);
  f32("model.norm.weight", {hidden}, 0.5, 1.5);
  f32("model.layers.0.input_layernorm.weight", {hidden}, 0.5, 1.5);
  f32("model.layers.0.post_attention_layernorm.weight", {hidden}, 0.5, 1.5);
  const std::vector<std::tuple<std::string, std::string, std::int64_t, std::int64_t>> mods = {
      {"attn_q", "self_attn.q_proj", hidden, hidden}, {"attn_k", "self_attn.k_proj", hidden, hidden},
      {"attn_v", "self_attn.v_proj", hidden, hidden}, {"attn_output", "self_attn.o_proj", hidden, hidden},
      {"ffn_gate", "mlp.gate_proj", ffn, hidden},     {"ffn_up", "mlp.up_proj", ffn, hidden},
      {"ffn_down", "mlp.down_proj", hidden, ffn}};
  for (const auto& [gg, hf, rows, cols] : mods) {
    const std::string m = "model.layers.0." + hf;
    auto q = random_linear(rows, cols, s, rng);
    if (s.method == "awq") {
      auto p = mo::test::spec::pack_awq(q);
      t.push_back(td(m + ".qweight", mo::st::Dtype::I32, {cols, rows / 8}, ints.emplace_back(std::move(p.qweight))));
      t.push_back(td(m + ".qzeros", mo::st::Dtype::I32, {p.groups, rows / 8}, ints.emplace_back(std::move(p.qzeros))));
      t.push_back(td(m + ".scales", mo::st::Dtype::F16, {p.groups, rows}, halves.emplace_back(std::move(p.scales))));
    } else {
      auto p = mo::test::spec::pack_gptq(q, !s.v2);
      t.push_back(td(m + ".qweight", mo::st::Dtype::I32, {cols / 8, rows}, ints.emplace_back(std::move(p.qweight))));
      t.push_back(td(m + ".qzeros", mo::st::Dtype::I32, {p.groups, rows / 8}, ints.emplace_back(std::move(p.qzeros))));
      t.push_back(td(m + ".scales", mo::st::Dtype::F16, {p.groups, rows}, halves.emplace_back(std::move(p.scales))));
      t.push_back(td(m + ".g_idx", mo::st::Dtype::I32, {cols}, ints.emplace_back(std::move(p.g_idx))));
    }
    ck.linears["blk.0." + gg] = std::move(q);
  }
  fs::create_directories(dir);
  mo::st::write_file((dir / "model.safetensors").string(), t);
  nlohmann::json qc =
      s.method == "awq"
          ? nlohmann::json{{"quant_method", "awq"}, {"bits", 4}, {"group_size", s.group}, {"zero_point", true}, {"version", "gemm"}}
          : nlohmann::json{{"quant_method", "gptq"},  {"bits", 4},    {"group_size", s.group},
                           {"desc_act", s.act_order}, {"sym", false}, {"checkpoint_format", s.v2 ? "gptq_v2" : "gptq"}};
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"hidden_size", hidden},
                      {"intermediate_size", ffn},
                      {"num_attention_heads", 2},
                      {"num_key_value_heads", 2},
                      {"num_hidden_layers", 1},
                      {"max_position_embeddings", 128},
                      {"rms_norm_eps", 1e-5},
                      {"tie_word_embeddings", true},
                      {"torch_dtype", "float16"},
                      {"vocab_size", vocab},
                      {"quantization_config", qc}};
  std::ofstream(dir / "config.json") << c.dump(2);
  return ck;
}

const mo::engine::Matrix& matrix(const mo::engine::ModelWeights& w, const std::string& base) {
  const auto& l = w.layers[0];
  if (base == "blk.0.attn_q") return l.wq;
  if (base == "blk.0.attn_k") return l.wk;
  if (base == "blk.0.attn_v") return l.wv;
  if (base == "blk.0.attn_output") return l.wo;
  if (base == "blk.0.ffn_gate") return l.w_gate;
  if (base == "blk.0.ffn_up") return l.w_up;
  return l.w_down;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mo-int4-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  inline static int counter = 0;
  ~TempDir() { fs::remove_all(path); }
};

// Loads the checkpoint and checks each linear: its type, that ops::matrix_row gives the exact weights
// in the original column order, and that ops::linear matches a double dot of them with the 8-bit
// activations the kernel sees (x gathered by in_perm, then quantized).
void check_checkpoint(const Scheme& s, std::uint32_t want_type) {
  TempDir dir;
  const Checkpoint ck = write_checkpoint(dir.path, s);
  auto files = mo::model::ModelFiles::open(dir.path.string());
  const auto w = mo::engine::bind_weights(files);
  mo::ThreadPool pool(2);
  std::mt19937 rng(5);
  for (const auto& [base, q] : ck.linears) {
    const mo::engine::Matrix& m = matrix(w, base);
    ASSERT_EQ(m.type, want_type) << base;
    EXPECT_EQ(static_cast<bool>(m.in_perm), want_type == mo::engine::kQ4zType && s.act_order) << base;
    const auto exact = mo::test::spec::weights(q);
    std::vector<float> row(static_cast<std::size_t>(m.cols));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      mo::ops::matrix_row(m, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), exact.data() + r * m.cols, row.size() * 4)) << base << " row " << r;
    }
    if (want_type != mo::engine::kQ4zType) continue;
    const std::int64_t n = 5, cols = m.cols;
    const auto x = random_x(n * cols, rng);
    std::vector<float> y(static_cast<std::size_t>(n * m.rows)), xg(x.size());
    mo::ops::linear(x.data(), n, m, y.data(), pool);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t i = 0; i < cols; ++i) xg[t * cols + i] = x[t * cols + (m.in_perm ? (*m.in_perm)[i] : i)];
    std::vector<BlockQ8> xq(static_cast<std::size_t>(n * cols / 32));
    mo::ops::q8::quantize_rows(xg.data(), n, cols, cols, xq.data());
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t r = 0; r < m.rows; ++r) {
        double ref = 0, mag = 0;
        for (std::int64_t i = 0; i < cols; ++i) {
          const std::int64_t c = m.in_perm ? (*m.in_perm)[i] : i;
          const BlockQ8& b = xq[t * cols / 32 + i / 32];
          const double p = static_cast<double>(exact[r * cols + c]) * (static_cast<double>(b.d) * b.qs[i % 32]);
          ref += p, mag += std::fabs(p);
        }
        EXPECT_NEAR(y[t * m.rows + r], ref, 1e-5 * mag + 1e-30) << base << " row " << r << " token " << t;
      }
  }
}

TEST(Int4Linear, AwqInterleavedPackingLoadsExactly) { check_checkpoint({"awq", 32}, mo::engine::kQ4zType); }
TEST(Int4Linear, AwqGroup64LoadsExactly) { check_checkpoint({"awq", 64}, mo::engine::kQ4zType); }
TEST(Int4Linear, GptqV1ZerosLoadExactly) { check_checkpoint({"gptq", 32, false, false}, mo::engine::kQ4zType); }
TEST(Int4Linear, GptqV2ZerosLoadExactly) { check_checkpoint({"gptq", 32, false, true}, mo::engine::kQ4zType); }
TEST(Int4Linear, GptqPerChannelLoadsExactly) { check_checkpoint({"gptq", -1, false, true}, mo::engine::kQ4zType); }
TEST(Int4Linear, GptqActOrderPermutesColumns) { check_checkpoint({"gptq", 32, true, false}, mo::engine::kQ4zType); }
TEST(Int4Linear, GptqActOrderWithPartialBlocksFallsBackToF32) { check_checkpoint({"gptq", 32, true, false, false}, 0); }

}  // namespace
