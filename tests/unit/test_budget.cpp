#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "mo/budget/budget.h"
#include "mo/model/model_presets.h"
#include "mo/budget/printer.h"
#include "mo/budget/quant_job.h"
#include "mo/core/error.h"
#include "mo/quant/quantize.h"
#include "heap_counter.h"
#include "quant_test_support.h"

namespace {

using mo::budget::BudgetConfig;
using mo::budget::compute_budget;
using mo::budget::make_request;

BudgetConfig cfg(const std::string& model, const std::string& format = "auto", const std::string& gpu = "rtx4090") {
  BudgetConfig c;
  c.model_path = model;
  c.weight_format = format;
  c.gpu = gpu;
  return c;
}

TEST(Budget, KvBytesPerTokenMatchesTheFormula) {
  EXPECT_EQ(compute_budget(make_request(cfg("llama-2-7b"))).kv_bytes_per_token, 524288u);
  EXPECT_EQ(compute_budget(make_request(cfg("llama-2-13b"))).kv_bytes_per_token, 819200u);
  EXPECT_EQ(compute_budget(make_request(cfg("llama-3-8b"))).kv_bytes_per_token, 131072u);  // GQA: 8 KV heads
  auto fp8 = cfg("llama-3-8b");
  fp8.kv_cache_dtype = "fp8";
  EXPECT_EQ(compute_budget(make_request(fp8)).kv_bytes_per_token, 65536u);
}

TEST(Budget, PresetWeightsWithinTwoPercentOfPublishedParameterCounts) {
  for (const auto& p : mo::model::model_presets()) {
    auto r = compute_budget(make_request(cfg(p.name, "fp16")));
    double published = p.published_params_b * 1e9 * 2;
    EXPECT_NEAR(r.weights_bytes_total / published, 1.0, 0.02) << p.name << ": " << r.n_params;
  }
}

TEST(Budget, MixtralCountsAllExpertsInWeights) {
  auto r = compute_budget(make_request(cfg("mixtral-8x7b", "fp16", "h100-80g")));
  EXPECT_NEAR(r.n_params / 46.7e9, 1.0, 0.02);  // all 8 experts, not the ~12.9 B active per token
  EXPECT_GT(r.weights_bytes, 80.0 * (1ull << 30));
  EXPECT_FALSE(r.fits);
}

TEST(Budget, Llama2_13bFp16DoesNotFitOn24GbButAwqInt4Does) {
  auto fp16_req = make_request(cfg("llama-2-13b", "fp16"));
  auto fp16 = compute_budget(fp16_req);
  EXPECT_FALSE(fp16.fits);
  EXPECT_EQ(fp16.kv_capacity_tokens, 0);
  auto advice = mo::budget::advise(fp16_req, fp16);
  ASSERT_FALSE(advice.empty());
  bool suggests_format = false;
  for (const auto& a : advice) suggests_format |= a.rfind("use ", 0) == 0 && a.find("which saves") != std::string::npos;
  EXPECT_TRUE(suggests_format);

  auto awq_req = make_request(cfg("llama-2-13b", "awq-int4"));
  auto awq = compute_budget(awq_req);
  EXPECT_TRUE(awq.fits);
  EXPECT_GT(awq.kv_capacity_tokens, 4096);  // at least one full-length sequence
  EXPECT_GE(awq.concurrent_seqs, 1);
  std::string table = mo::budget::format_table(awq_req, awq);
  EXPECT_NE(table.find("KV cache pool"), std::string::npos);
  EXPECT_NE(table.find("819,200 bytes"), std::string::npos);
  EXPECT_NE(table.find("fits:"), std::string::npos);
}

TEST(Budget, AdvisedMaxModelLenActuallyFits) {
  auto c = cfg("llama-3-8b", "fp16");
  c.max_num_seqs = 64;
  auto req = make_request(c);
  auto res = compute_budget(req);
  ASSERT_FALSE(res.fits);
  ASSERT_GE(res.max_model_len_fit, 16);
  auto advice = mo::budget::advise(req, res);
  ASSERT_FALSE(advice.empty());
  EXPECT_NE(advice[0].find("lower max_model_len to " + std::to_string(res.max_model_len_fit)), std::string::npos) << advice[0];
  req.max_model_len = res.max_model_len_fit;
  EXPECT_TRUE(compute_budget(req).fits);
  req.max_model_len = res.max_model_len_fit + 16;
  EXPECT_FALSE(compute_budget(req).fits);
}

TEST(Budget, TensorParallelSplitsWeightsAndKvHeads) {
  auto c = cfg("llama-2-70b", "fp16", "a100-80g");
  auto one = compute_budget(make_request(c));
  c.tensor_parallel_size = 4;
  auto four = compute_budget(make_request(c));
  EXPECT_DOUBLE_EQ(four.weights_bytes, one.weights_bytes / 4);
  EXPECT_EQ(four.kv_heads_per_gpu, 2);
  EXPECT_EQ(four.kv_bytes_per_token * 4, one.kv_bytes_per_token);
  EXPECT_TRUE(four.fits);
  EXPECT_FALSE(one.fits);
}

TEST(Budget, RejectsTensorParallelNotDividingHeads) {
  auto c = cfg("llama-2-13b");  // 40 heads
  c.tensor_parallel_size = 3;
  try {
    compute_budget(make_request(c));
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel_size: 3 does not divide the model's 40 attention heads"), std::string::npos);
  }
}

TEST(Budget, RejectsMaxModelLenBeyondContext) {
  auto c = cfg("llama-2-7b");
  c.max_model_len = 8192;
  EXPECT_THROW(make_request(c), mo::UsageError);
}

TEST(Budget, CustomGpuMemoryOverridesPreset) {
  auto c = cfg("llama-3-8b");
  c.gpu_memory = 40;
  auto r = compute_budget(make_request(c));
  EXPECT_DOUBLE_EQ(r.budget_bytes, 40.0 * (1ull << 30) * 0.90);
}

TEST(Budget, UnknownModelSuggestsPreset) {
  try {
    make_request(cfg("llama-2-7"));
    FAIL();
  } catch (const mo::UsageError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'llama-2-7'"), std::string::npos);
    EXPECT_NE(msg.find("did you mean 'llama-2-7b'"), std::string::npos) << msg;
  }
}

TEST(Budget, GgufFileIsSizedFromItsOwnTensors) {
  std::string path = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto r = compute_budget(make_request(cfg(path)));
  EXPECT_EQ(r.weight_format, "gguf");
  // 512x64 embedding + its stored copy as output.weight + 5 layers x (q 64x64, k/v 32x64, o 64x64,
  // 3 x 172x64, 2 norms) + final norm
  EXPECT_EQ(r.n_params, 292800u);
  // All tensors are F32: weights are 4 bytes a parameter and fill most of the 1,185,376-byte file.
  EXPECT_DOUBLE_EQ(r.weights_bytes_total, 4.0 * r.n_params);
  EXPECT_LT(r.weights_bytes_total, 1185376);
  EXPECT_GT(r.weights_bytes_total, 0.8 * 1185376);
  EXPECT_EQ(r.kv_bytes_per_token, 2u * 5 * 4 * 8 * 2);  // 5 layers, 4 KV heads, head_dim 8, fp16
}

TEST(Budget, JsonHasTheTableFigures) {
  auto req = make_request(cfg("llama-3-8b", "awq-int4"));
  auto res = compute_budget(req);
  auto j = mo::budget::to_json(req, res);
  EXPECT_EQ(j["kv_bytes_per_token"], 131072);
  EXPECT_EQ(j["weight_format"], "awq-int4");
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_DOUBLE_EQ(j["bytes_per_gpu"]["total"].get<double>(), res.total_bytes);
}

}  // namespace

namespace {

// The memory quantize prints (and refuses a job by) must hold what the job then allocates. Measured in this
// process: the peak of the heap during a GPTQ run on stories260K above what was in use before it, which also
// takes in the tokenizer, the calibration text and the writer. It must be at least half the estimate too: an
// estimate many times too large refuses jobs that fit.
TEST(BudgetQuantJob, TheEstimateHoldsWhatAGptqRunAllocates) {
  if (!std::filesystem::exists(quant_test::kStories)) GTEST_SKIP() << quant_test::kStories << " not found";
  if (!mo::test::heap_counting()) GTEST_SKIP() << "heap counting is off under sanitizers";
  quant_test::TempDir t;
  mo::quant::QuantizeOptions o = quant_test::stories_config(mo::quant::Method::gptq, t.path / "out", "general");
  o.num_samples = 256;  // 32768 tokens: their hidden states are the largest term
  o.max_seq_len = 128;
  mo::budget::QuantJobRequest r;
  r.hp = mo::model::load_model_shape(quant_test::kStories).hp;
  r.method = "gptq";
  r.samples = o.num_samples;
  r.seq_len = o.max_seq_len;
  const double estimate = static_cast<double>(mo::budget::quant_job_memory(r).host());
  const std::int64_t before = mo::test::heap_in_use();
  mo::test::reset_heap_peak();
  mo::quant::quantize_model(o);
  const double used = static_cast<double>(mo::test::heap_peak() - before);
  std::printf("GPTQ %lld x %lld on stories260K: %.2f MiB allocated at the peak, %.2f MiB estimated\n",
              static_cast<long long>(o.num_samples), static_cast<long long>(o.max_seq_len), used / 1048576, estimate / 1048576);
  EXPECT_LE(used, estimate);
  EXPECT_GE(used, 0.5 * estimate);
}

// How the quantize job's memory moves with its settings, on Llama-2-7B's shape.
TEST(BudgetQuantJob, GptqGrowsWithEverySampleAwqOnlyUpToItsCaptures) {
  mo::budget::QuantJobRequest r;
  r.hp = mo::model::load_model_shape("llama-2-7b").hp;
  r.seq_len = 512;
  auto host = [&](const char* method, std::int64_t samples) {
    r.method = method;
    r.samples = samples;
    return mo::budget::quant_job_memory(r).host();
  };
  // GPTQ keeps every calibration token's hidden state (4096 floats) to the end of each layer.
  EXPECT_EQ(host("gptq", 200) - host("gptq", 100), 100ull * 512 * 4096 * 4);
  // AWQ and the sensitivity check run only the samples their 4096 captured tokens come from.
  EXPECT_EQ(host("awq", 1000), host("awq", 100));
  EXPECT_LT(host("awq", 128), host("gptq", 128));
  EXPECT_LT(host("rtn", 128), host("awq", 128));
  r.sensitivity_check = false;
  EXPECT_EQ(host("rtn", 128), host("rtn", 1));  // nothing calibrated: the samples are never read

  // --device cuda: the hidden states and GPTQ's solve move to the GPU; the host keeps the captures and the layer.
  r.sensitivity_check = true;
  r.method = "gptq";
  r.samples = 128;
  const auto cpu = mo::budget::quant_job_memory(r);
  r.on_gpu = true;
  const auto gpu = mo::budget::quant_job_memory(r);
  EXPECT_EQ(cpu.gpu(), 0u);
  EXPECT_LT(gpu.host(), cpu.host() - cpu.hidden);
  EXPECT_GE(gpu.gpu(), cpu.hidden);
}

TEST(BudgetQuantJob, MaxSamplesThatFitIsTheLargestThatFits) {
  mo::budget::QuantJobRequest r;
  r.hp = mo::model::load_model_shape("llama-2-7b").hp;
  r.method = "gptq";
  r.seq_len = 512;
  r.samples = 8;  // from 8 samples (4096 tokens) on, only the hidden states grow
  const std::uint64_t per_sample = 512ull * 4096 * 4;
  const std::uint64_t fixed = mo::budget::quant_job_memory(r).host() - 8 * per_sample;
  r.samples = 1;
  const std::uint64_t one = mo::budget::quant_job_memory(r).host();
  r.samples = 1000;
  EXPECT_EQ(mo::budget::max_samples_that_fit(r, fixed + 100 * per_sample + 5, 0), 100);
  EXPECT_EQ(mo::budget::max_samples_that_fit(r, one, 0), 1);
  EXPECT_EQ(mo::budget::max_samples_that_fit(r, one - 1, 0), 0);
}

}  // namespace
