// bench against the scripted fake server: counts match the script exactly, failures are counted with their
// reasons. Times are checked one way only: the server cannot answer faster than its script, so a measured
// TTFT or E2E under the script's, or a throughput above it, is an accounting bug; a loaded machine only makes
// them slower, which no assertion here punishes (beyond bounding a hang). The exact arithmetic of TTFT,
// TPOT and ITL is tested with an injected clock in test_bench_accounting.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "mo/bench/runner.h"
#include "test_bench_fake_server.h"

namespace {

using namespace mo::bench;
using mo::bench::testing::FakeMode;
using mo::bench::testing::FakeOpenAiServer;
using mo::bench::testing::FakeScript;

RunOptions options_for(const FakeOpenAiServer& srv, const std::string& endpoint = "completions") {
  RunOptions o;
  o.ep.url = parse_url(srv.base_url(), "--base-url");
  o.ep.endpoint = endpoint;
  o.ep.model = "fake-model";
  o.ep.timeout_s = 5;
  o.warmup = 0;
  o.progress = false;
  o.workload.input = {"fixed", 64, 0};
  o.workload.output = {"fixed", 16, 0};
  o.workload.num_prompts = 12;
  return o;
}

TEST(BenchFakeServer, CalibratedPromptsHitTheRequestedTokenCount) {
  FakeOpenAiServer srv;
  const PromptCalibration cal = calibrate_prompts(options_for(srv).ep);
  ASSERT_TRUE(cal.measured) << cal.note;
  EXPECT_NEAR(cal.tokens_per_word, 1.5, 1e-9);
  EXPECT_NEAR(cal.overhead_tokens, 3, 1e-9);
  for (long long want : {16LL, 64LL, 512LL}) {
    std::mt19937_64 rng(1);
    const long long got = FakeOpenAiServer::prompt_tokens(synthetic_text(cal.words_for(want), rng));
    EXPECT_NEAR(static_cast<double>(got), static_cast<double>(want), 1.0) << want;
  }
}

// Within the script's bounds: never faster than it (1 ms for rounding), never a hang (60 s).
void expect_no_faster_than(const char* what, double got, double script) {
  EXPECT_GE(got, script - 1) << what << ": faster than the fake server's script";
  EXPECT_LT(got, script + 60000) << what;
}

void check_script(const LevelSummary& s, int concurrency, long long n) {
  // Script: TTFT 100 ms, then 20 ms per token, 16 tokens -> E2E 400 ms; every third chunk has two tokens.
  // Counts are exact on every run.
  EXPECT_EQ(s.completed, n);
  EXPECT_EQ(s.failed, 0);
  EXPECT_TRUE(s.usage_reported);
  EXPECT_DOUBLE_EQ(s.output_len.mean, 16);
  EXPECT_DOUBLE_EQ(s.input_len.mean, 64);
  EXPECT_EQ(s.itl_ms.count, n * 15);
  EXPECT_EQ(s.peak_concurrency, concurrency);
  expect_no_faster_than("TTFT min ms", s.ttft_ms.min, 100);
  expect_no_faster_than("E2E min ms", s.e2e_ms.min, 400);
  // Closed loop: at least n / concurrency rounds of 400 ms each, so throughput is at most the script's.
  const double seconds = static_cast<double>(n) / concurrency * 0.4;
  const double tokens_per_s = 16.0 * static_cast<double>(n) / seconds, requests_per_s = static_cast<double>(n) / seconds;
  EXPECT_LE(s.output_throughput, tokens_per_s * 1.01);
  EXPECT_LE(s.request_throughput, requests_per_s * 1.01);
  EXPECT_GT(s.output_throughput, 0);
}

TEST(BenchFakeServer, CompletionsStreamMatchesTheScript) {
  FakeOpenAiServer srv;
  RunOptions o = options_for(srv);
  std::atomic<bool> stop{false};
  const LevelResult r = run_level(o, calibrate_prompts(o.ep), 4, stop);
  ASSERT_EQ(r.samples.size(), 12u);
  check_script(r.summary, 4, 12);
  EXPECT_EQ(r.summary.peak_concurrency, 4);
  // The fake counts a request until its handler returns, which on a loaded machine can come after the
  // client has read the last byte and sent its next request: only a lower bound holds there.
  EXPECT_GE(srv.peak_in_flight(), 4);
  for (const auto& s : r.samples) EXPECT_LT(s.chunks, 16) << "two-token chunks were sent";
}

TEST(BenchFakeServer, ChatStreamMatchesTheScript) {
  FakeOpenAiServer srv;
  RunOptions o = options_for(srv, "chat");
  std::atomic<bool> stop{false};
  check_script(run_level(o, calibrate_prompts(o.ep), 2, stop).summary, 2, 12);
}

TEST(BenchFakeServer, GoodputCountsOnlyRequestsWithinTheSlo) {
  FakeOpenAiServer srv;
  RunOptions o = options_for(srv);
  o.workload.num_prompts = 4;
  std::atomic<bool> stop{false};
  o.slo = parse_slo("ttft=60ms");  // the script's 100 ms TTFT misses it
  EXPECT_EQ(run_level(o, {}, 2, stop).summary.good, 0);
  o.slo = parse_slo("ttft=5s,tpot=200ms");
  EXPECT_EQ(run_level(o, {}, 2, stop).summary.good, 4);
}

TEST(BenchFakeServer, NonStreamedRequestsMeasureE2eOnly) {
  FakeOpenAiServer srv;
  RunOptions o = options_for(srv);
  o.ep.stream = false;
  o.workload.num_prompts = 4;
  std::atomic<bool> stop{false};
  const LevelSummary s = run_level(o, {}, 2, stop).summary;
  EXPECT_EQ(s.completed, 4);
  EXPECT_EQ(s.ttft_ms.count, 0);
  EXPECT_DOUBLE_EQ(s.output_len.mean, 16);
  expect_no_faster_than("E2E min ms", s.e2e_ms.min, 400);
}

TEST(BenchFakeServer, FailuresAreCountedWithReasons) {
  FakeScript script;
  script.mode = [](const nlohmann::json&, long long n) {
    const FakeMode cycle[] = {FakeMode::ok, FakeMode::http500, FakeMode::malformed_sse, FakeMode::hang, FakeMode::close_mid_stream};
    return cycle[n % 5];
  };
  // Answers at once, so the 1.5 s timeout separates "ok" from "hang" on however loaded a machine.
  script.ttft_ms = 0;
  script.itl_ms = 0;
  FakeOpenAiServer srv(script);
  RunOptions o = options_for(srv);
  o.ep.timeout_s = 1.5;
  o.workload.num_prompts = 10;
  std::atomic<bool> stop{false};
  const LevelResult r = run_level(o, {}, 1, stop);  // concurrency 1: request n gets mode n % 5
  const LevelSummary& s = r.summary;
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 8);
  EXPECT_EQ(s.failures.at("HTTP 500: scripted failure"), 2);
  EXPECT_EQ(s.failures.at("timeout after 1.5 s"), 2);
  EXPECT_EQ(s.failures.at("connection closed inside a chunked body"), 2);
  long long malformed = 0;
  for (const auto& [why, n] : s.failures)
    if (why.rfind("malformed SSE: data is not JSON", 0) == 0) malformed += n;
  EXPECT_EQ(malformed, 2);
}

TEST(BenchFakeServer, ServerDownIsAFailurePerRequest) {
  int port;
  {
    FakeOpenAiServer gone;
    port = gone.port();
  }
  RunOptions o;
  o.ep.url = parse_url("http://127.0.0.1:" + std::to_string(port) + "/v1", "--base-url");
  o.ep.model = "m";
  o.warmup = 0;
  o.progress = false;
  o.workload.input = {"fixed", 8, 0};
  o.workload.output = {"fixed", 4, 0};
  o.workload.num_prompts = 3;
  std::atomic<bool> stop{false};
  const LevelSummary s = run_level(o, {}, 2, stop).summary;
  EXPECT_EQ(s.failed, 3);
  ASSERT_EQ(s.failures.size(), 1u);
  EXPECT_NE(s.failures.begin()->first.find("connection refused"), std::string::npos) << s.failures.begin()->first;
}

TEST(BenchFakeServer, StopCancelsInFlightAndKeepsWhatFinished) {
  FakeOpenAiServer srv;
  RunOptions o = options_for(srv);
  o.workload.num_prompts = 50;
  std::atomic<bool> stop{false};
  // Stop once the server has seen five requests (at least two finished: concurrency 2), not after a sleep.
  std::thread stopper([&] {
    for (int i = 0; i < 60000 && srv.completion_requests() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop = true;
  });
  const LevelResult r = run_level(o, {}, 2, stop);
  stopper.join();
  EXPECT_TRUE(r.interrupted);
  EXPECT_GE(r.summary.completed, 2);
  EXPECT_LT(r.summary.completed, 50);
  EXPECT_EQ(r.summary.failed, 0) << (r.summary.failures.empty() ? "" : r.summary.failures.begin()->first);
  // The fifth request was in flight when stop came; the other slot may have been between two requests.
  EXPECT_GE(r.summary.cancelled, 1);
  EXPECT_LE(r.summary.cancelled, 2);
  // Every request the server saw is counted; a cancelled one may never have reached it (stopped while connecting).
  EXPECT_LE(srv.completion_requests(), r.summary.completed + r.summary.cancelled);
  EXPECT_GE(srv.completion_requests(), r.summary.completed);
}

TEST(BenchFakeServer, OpenLoopConstantRateSpacesArrivals) {
  FakeOpenAiServer srv;
  RunOptions o = options_for(srv);
  o.request_rate = 10;
  o.arrival = "constant";
  o.workload.num_prompts = 8;
  std::atomic<bool> stop{false};
  const LevelResult r = run_level(o, {}, 16, stop);
  ASSERT_EQ(r.samples.size(), 8u);
  // Request i is due 0.1 i s into the level: never sent before (a late machine may send it later).
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_GE(r.samples[i].start_s, 0.1 * static_cast<double>(i) - 0.001) << "request " << i << " sent early";
    EXPECT_LT(r.samples[i].start_s, 0.1 * static_cast<double>(i) + 60) << "request " << i;
  }
  EXPECT_GE(r.summary.peak_concurrency, 1);
  EXPECT_LE(r.summary.peak_concurrency, 8);
}

}  // namespace
