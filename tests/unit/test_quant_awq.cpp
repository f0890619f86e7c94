#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"
#include "mo/quant/awq.h"
#include "mo/quant/rtn.h"

namespace formats = mo::formats;

using namespace mo;
using namespace mo::quant;
using engine::LinearId;

namespace {

constexpr std::int64_t kHidden = 128, kFfn = 256, kTokens = 512;
constexpr bool kNoSkip[7] = {};

// AWQ scores its candidates on a backend; these tests use the CPU one (tests/ops/quant_op_tests.h checks
// the ops it uses on both).
engine::Backend& cpu() {
  static ThreadPool pool(2);
  static const std::unique_ptr<engine::Backend> b = engine::make_cpu_backend(pool);
  return *b;
}

std::vector<float> matmul_t(const std::vector<float>& x, const std::vector<float>& w, std::int64_t n, std::int64_t k, std::int64_t m) {
  std::vector<float> y(n * m);  // x [n, k] . w[m, k]^T
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (std::int64_t c = 0; c < k; ++c) s += static_cast<double>(x[i * k + c]) * w[j * k + c];
      y[i * m + j] = static_cast<float>(s);
    }
  return y;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> times_norm(const std::vector<float>& x, const std::vector<float>& norm) {
  std::vector<float> y(x);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] *= norm[i % norm.size()];
  return y;
}

// A Llama-shaped layer and the inputs its linears saw, with a few input channels of large magnitude
// (the activation outliers AWQ protects). Attention is taken as the identity map when kv_dim == q_dim,
// so o's input is exactly v's output and the whole layer function can be checked after folding.
struct Fixture {
  LayerF32 layer;
  LayerInputs in;
  std::vector<float> x_hat, y_hat;  // normalised hidden states before the norm weights

  explicit Fixture(std::int64_t kv_dim, std::uint32_t seed = 1) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.5f, 1.5f);
    layer.hidden = layer.q_dim = kHidden;
    layer.kv_dim = kv_dim;
    layer.ffn = kFfn;
    for (LinearId id : kAllLinears) {
      layer.weight(id).resize(layer.rows(id) * layer.cols(id));
      for (float& v : layer.weight(id)) v = 0.05f * nd(rng);
    }
    layer.attn_norm.resize(kHidden);
    layer.ffn_norm.resize(kHidden);
    for (float& v : layer.attn_norm) v = ud(rng);
    for (float& v : layer.ffn_norm) v = ud(rng);
    x_hat.resize(kTokens * kHidden);
    y_hat.resize(kTokens * kHidden);
    for (std::vector<float>* h : {&x_hat, &y_hat}) {
      for (float& v : *h) v = nd(rng);
      for (std::int64_t t = 0; t < kTokens; ++t)
        for (std::int64_t c : {5, 40, 77, 100}) (*h)[t * kHidden + c] *= 25.0f;
    }
    in.n = kTokens;
    in.attn_in = times_norm(x_hat, layer.attn_norm);
    in.mlp_in = times_norm(y_hat, layer.ffn_norm);
    if (kv_dim == kHidden) {
      in.o_in = matmul_t(in.attn_in, layer.v, kTokens, kHidden, kHidden);
    } else {
      in.o_in.resize(kTokens * kHidden);
      for (float& v : in.o_in) v = nd(rng);
    }
    in.down_in = mlp_hidden(layer, in.mlp_in);
  }

  static std::vector<float> mlp_hidden(const LayerF32& l, const std::vector<float>& m) {
    const std::vector<float> g = matmul_t(m, l.gate, kTokens, kHidden, kFfn), u = matmul_t(m, l.up, kTokens, kHidden, kFfn);
    std::vector<float> h(g.size());
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    return h;
  }
};

// The layer function with every linear RTN-quantized: q and k outputs, the attention path v -> o (identity
// attention) and the MLP, each as its relative error against the float layer, squared and summed.
double rtn_layer_error(const Fixture& ref, const LayerF32& layer, const formats::QuantScheme& s) {
  LayerF32 q = layer;
  for (LinearId id : kAllLinears) q.weight(id) = quantize_rtn(layer.weight(id).data(), layer.rows(id), layer.cols(id), s).dequantize();
  const LayerF32& f = ref.layer;
  const std::vector<float> x0 = times_norm(ref.x_hat, f.attn_norm), x1 = times_norm(ref.x_hat, q.attn_norm);
  const std::vector<float> m0 = times_norm(ref.y_hat, f.ffn_norm), m1 = times_norm(ref.y_hat, q.ffn_norm);
  double total = 0;
  for (LinearId id : {LinearId::q, LinearId::k})
    total +=
        std::pow(rel_diff(matmul_t(x1, q.weight(id), kTokens, kHidden, kHidden), matmul_t(x0, f.weight(id), kTokens, kHidden, kHidden)), 2);
  const auto attn = [](const LayerF32& l, const std::vector<float>& x) {
    return matmul_t(matmul_t(x, l.v, kTokens, kHidden, kHidden), l.o, kTokens, kHidden, kHidden);
  };
  total += std::pow(rel_diff(attn(q, x1), attn(f, x0)), 2);
  total += std::pow(rel_diff(matmul_t(Fixture::mlp_hidden(q, m1), q.down, kTokens, kFfn, kHidden),
                             matmul_t(Fixture::mlp_hidden(f, m0), f.down, kTokens, kFfn, kHidden)),
                    2);
  return total;
}

formats::QuantScheme scheme4() {
  formats::QuantScheme s;
  s.bits = 4;
  s.group_size = 32;
  return s;
}

AwqOptions no_clip() {
  AwqOptions o;
  o.clip = false;
  return o;
}

}  // namespace

TEST(QuantAwq, FoldingKeepsTheLayerFunction) {
  Fixture f(kHidden);
  const LayerF32 orig = f.layer;
  const LayerInputs orig_in = f.in;
  const AwqLayerReport rep = awq_transform_layer(f.layer, f.in, scheme4(), no_clip(), kNoSkip, cpu());
  ASSERT_EQ(rep.groups.size(), 4u);
  for (const AwqGroupReport& g : rep.groups) EXPECT_TRUE(g.applied) << g.name;
  EXPECT_EQ(rep.groups[1].name, "v->o");
  EXPECT_GT(rel_diff(f.layer.attn_norm, orig.attn_norm), 0.05) << "the search should pick non-trivial scales";

  // Recompute each path from the un-normalised hidden states through the folded norm weights.
  const std::vector<float> x0 = times_norm(f.x_hat, orig.attn_norm), x1 = times_norm(f.x_hat, f.layer.attn_norm);
  EXPECT_LT(rel_diff(f.in.attn_in, x1), 1e-6);
  for (LinearId id : {LinearId::q, LinearId::k})
    EXPECT_LT(rel_diff(matmul_t(x1, f.layer.weight(id), kTokens, kHidden, f.layer.rows(id)),
                       matmul_t(x0, orig.weight(id), kTokens, kHidden, orig.rows(id))),
              1e-4);
  const std::vector<float> attn1 = matmul_t(matmul_t(x1, f.layer.v, kTokens, kHidden, kHidden), f.layer.o, kTokens, kHidden, kHidden);
  const std::vector<float> attn0 = matmul_t(matmul_t(x0, orig.v, kTokens, kHidden, kHidden), orig.o, kTokens, kHidden, kHidden);
  EXPECT_LT(rel_diff(attn1, attn0), 1e-4);
  EXPECT_LT(rel_diff(matmul_t(f.in.o_in, f.layer.o, kTokens, kHidden, kHidden), attn0), 1e-4);

  const std::vector<float> m0 = times_norm(f.y_hat, orig.ffn_norm), m1 = times_norm(f.y_hat, f.layer.ffn_norm);
  const std::vector<float> mlp0 = matmul_t(Fixture::mlp_hidden(orig, m0), orig.down, kTokens, kFfn, kHidden);
  EXPECT_LT(rel_diff(matmul_t(Fixture::mlp_hidden(f.layer, m1), f.layer.down, kTokens, kFfn, kHidden), mlp0), 1e-4);
  EXPECT_LT(rel_diff(matmul_t(f.in.down_in, f.layer.down, kTokens, kFfn, kHidden), mlp0), 1e-4);
}

TEST(QuantAwq, GroupedQueryAttentionSkipsVToO) {
  Fixture f(64);
  const std::vector<float> o = f.layer.o, o_in = f.in.o_in;
  const AwqLayerReport rep = awq_transform_layer(f.layer, f.in, scheme4(), no_clip(), kNoSkip, cpu());
  EXPECT_EQ(rep.groups[1].name, "v->o");
  EXPECT_FALSE(rep.groups[1].applied);
  EXPECT_TRUE(rep.groups[0].applied);
  EXPECT_EQ(f.layer.o, o);
  EXPECT_EQ(f.in.o_in, o_in);
}

TEST(QuantAwq, LowerErrorThanRtnWithActivationOutliers) {
  Fixture f(kHidden);
  const Fixture orig = f;
  const AwqLayerReport rep = awq_transform_layer(f.layer, f.in, scheme4(), AwqOptions{}, kNoSkip, cpu());
  const double plain = rtn_layer_error(orig, orig.layer, scheme4());
  const double awq = rtn_layer_error(orig, f.layer, scheme4());
  EXPECT_LT(awq, 0.5 * plain) << "plain " << plain << " awq " << awq;
  // The outliers sit in the inputs of q/k/v and gate/up: there the search must beat unscaled RTN.
  EXPECT_LT(rep.groups[0].error_best, rep.groups[0].error_plain);
  EXPECT_LT(rep.groups[2].error_best, rep.groups[2].error_plain);
  EXPECT_GT(rep.groups[0].ratio, 0.0);
}

TEST(QuantAwq, ClipSearchNeverIncreasesErrorAndSparesQK) {
  Fixture clipped(kHidden, 3), unclipped(kHidden, 3);
  const AwqLayerReport rep = awq_transform_layer(clipped.layer, clipped.in, scheme4(), AwqOptions{}, kNoSkip, cpu());
  awq_transform_layer(unclipped.layer, unclipped.in, scheme4(), no_clip(), kNoSkip, cpu());
  EXPECT_GT(rep.clip_error_before, 0.0);
  EXPECT_LT(rep.clip_error_after, rep.clip_error_before);
  EXPECT_EQ(clipped.layer.q, unclipped.layer.q);
  EXPECT_EQ(clipped.layer.k, unclipped.layer.k);
  int changed = 0;
  for (LinearId id : {LinearId::v, LinearId::o, LinearId::gate, LinearId::up, LinearId::down}) {
    const std::vector<float>& a = clipped.layer.weight(id);
    const std::vector<float>& b = unclipped.layer.weight(id);
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_LE(std::fabs(a[i]), std::fabs(b[i]));  // clipping only pulls weights towards zero
      changed += a[i] != b[i];
    }
  }
  EXPECT_GT(changed, 0);
}

TEST(QuantAwq, SkippedLinearsAreLeftOutOfTheSearches) {
  Fixture f(kHidden);
  const LayerF32 orig = f.layer;
  bool skip[7] = {};
  skip[0] = skip[1] = skip[2] = true;  // q, k, v: nothing left to quantize behind input_layernorm
  skip[6] = true;                      // down: neither scaled for nor clipped
  const AwqLayerReport rep = awq_transform_layer(f.layer, f.in, scheme4(), AwqOptions{}, skip, cpu());
  EXPECT_FALSE(rep.groups[0].applied);
  EXPECT_FALSE(rep.groups[3].applied);
  EXPECT_TRUE(rep.groups[2].applied);
  EXPECT_EQ(f.layer.attn_norm, orig.attn_norm);
  EXPECT_EQ(f.layer.q, orig.q);
  EXPECT_EQ(f.layer.down, orig.down);
}
