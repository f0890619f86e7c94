// Accounting of bench without a network: SSE parsing, token apportioning, percentiles, SLOs, compare.
#include <gtest/gtest.h>

#include "mo/bench/compare.h"
#include "mo/bench/http.h"
#include "mo/bench/metrics.h"
#include "mo/bench/request.h"
#include "mo/bench/runner.h"
#include "mo/core/error.h"

namespace {

using namespace mo::bench;
using ms = std::chrono::milliseconds;

std::string completion_event(const std::string& text, const char* finish = nullptr) {
  return std::string("data: {\"choices\":[{\"index\":0,\"text\":\"") + text +
         "\",\"finish_reason\":" + (finish ? std::string("\"") + finish + "\"" : "null") + "}]}\n\n";
}

TEST(BenchAccounting, TokensComeFromUsageNotChunkCount) {
  // 5 tokens in 4 chunks (the third carries two): first at 100 ms, then a token every 20 ms.
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  a.feed(completion_event(" a"), t0 + ms(100));
  a.feed(completion_event(" b"), t0 + ms(120));
  a.feed(completion_event(" c d"), t0 + ms(160));
  a.feed(completion_event(" e", "length"), t0 + ms(180));
  a.feed("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n", t0 + ms(180));
  RequestSample s;
  a.finish(s, t0 + ms(180), 0);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.output_tokens, 5);
  EXPECT_EQ(s.input_tokens, 7);
  EXPECT_EQ(s.chunks, 4);
  EXPECT_TRUE(s.usage_reported);
  EXPECT_NEAR(s.ttft_ms, 100, 1e-6);
  EXPECT_NEAR(s.tpot_ms, 20, 1e-6);  // (180 - 100) / (5 - 1)
  ASSERT_EQ(s.itl_ms.size(), 4u);    // one per token after the first chunk's
  for (double v : s.itl_ms) EXPECT_NEAR(v, 20, 1e-6);
}

TEST(BenchAccounting, SseSplitAcrossReadsAndCrLfLines) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  const std::string all =
      "data: {\"choices\":[{\"text\":\" x\"}]}\r\n\r\n: keep-alive\r\n\r\ndata: {\"choices\":[{\"text\":\" "
      "y\",\"finish_reason\":\"stop\"}]}\r\n\r\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\r\n\r\ndata: [DONE]\r\n\r\n";
  for (std::size_t i = 0; i < all.size(); i += 7) a.feed(std::string_view(all).substr(i, 7), t0 + ms(10 + static_cast<int>(i)));
  RequestSample s;
  a.finish(s, t0 + ms(400), 0);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.output_tokens, 2);
  EXPECT_EQ(s.chunks, 2);
}

TEST(BenchAccounting, LastEventWithoutBlankLineCounts) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  a.feed(completion_event(" a", "stop") + "data: [DONE]", t0 + ms(30));
  RequestSample s;
  a.finish(s, t0 + ms(30), 0);
  EXPECT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.output_tokens, 1);
}

// A fuzzer found bench aborting on a choice that is not an object (nlohmann type_error).
TEST(BenchAccounting, AChoiceThatIsNotAnObjectIsNoTokenNotACrash) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  a.feed("data: {\"choices\": [11111111]}\n\ndata: {\"choices\": [\"x\", {\"text\": 1}]}\n\ndata: [DONE]\n\n", t0 + ms(5));
  RequestSample s;
  a.finish(s, t0 + ms(10), 0);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.error, "no tokens: the stream held only [DONE]");
}

TEST(BenchAccounting, MalformedStreamsAreFailuresWithReasons) {
  const auto t0 = Clock::now();
  {
    StreamAccounting a(t0);
    a.feed("data: {not json\n\n", t0);
    RequestSample s;
    a.finish(s, t0, 0);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.error.find("malformed SSE: data is not JSON"), std::string::npos) << s.error;
  }
  {
    StreamAccounting a(t0);
    a.feed(completion_event(" a"), t0);
    RequestSample s;
    a.finish(s, t0, 0);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.error.find("stream ended early"), std::string::npos) << s.error;
  }
  {
    StreamAccounting a(t0);
    a.feed("data: {\"error\":{\"message\":\"out of KV cache\"}}\n\n", t0);
    RequestSample s;
    a.finish(s, t0, 0);
    EXPECT_EQ(s.error, "error event: out of KV cache");
  }
}

TEST(BenchAccounting, WithoutUsageChunksAreCountedAndMarked) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  a.feed(completion_event(" a") + completion_event(" b", "length") + "data: [DONE]\n\n", t0 + ms(50));
  RequestSample s;
  a.finish(s, t0 + ms(50), 11);
  ASSERT_TRUE(s.ok);
  EXPECT_FALSE(s.usage_reported);
  EXPECT_EQ(s.output_tokens, 2);
  EXPECT_EQ(s.input_tokens, 11);
}

// Issue 32.15: the SSE spec ends lines with CRLF, LF or a CR alone; a CR split from its LF across two reads
// is still one line end.
TEST(BenchAccounting, CrOnlyLineEndingsAndACrLfSplitAcrossReads) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  const std::string all =
      "data: {\"choices\":[{\"text\":\" x\"}]}\r\r: keep-alive\r\rdata: {\"choices\":[{\"text\":\" "
      "y\",\"finish_reason\":\"stop\"}]}\r\r"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\r\rdata: [DONE]\r";
  for (std::size_t i = 0; i < all.size(); i += 5) a.feed(std::string_view(all).substr(i, 5), t0 + ms(10 + static_cast<int>(i)));
  RequestSample s;
  a.finish(s, t0 + ms(400), 0);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.output_tokens, 2);
  EXPECT_EQ(s.chunks, 2);
  EXPECT_TRUE(s.usage_reported);

  StreamAccounting b(t0);
  b.feed(completion_event(" a").substr(0, completion_event(" a").size() - 1) + "\r", t0);  // "...}\n\r" then "\n"
  b.feed("\n" + completion_event(" b", "stop") + "data: [DONE]\n\n", t0 + ms(5));
  RequestSample sb;
  b.finish(sb, t0 + ms(10), 0);
  ASSERT_TRUE(sb.ok) << sb.error;
  EXPECT_EQ(sb.chunks, 2);
}

// A line longer than any read (a keep-alive comment of 1 MiB here; 40 MiB in the hostile-server test) is
// found once its end arrives, whatever pieces it came in: each byte is looked at once, not once per read.
TEST(BenchAccounting, ALongLineSplitOverManyReadsEndsWhereItsLineBreakIs) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  const std::string comment = ":" + std::string(1 << 20, 'x');
  for (std::size_t i = 0; i < comment.size(); i += 4096) a.feed(std::string_view(comment).substr(i, 4096), t0);
  a.feed("\r", t0);  // the CR of a CRLF whose LF comes with the next read
  a.feed("\n\r\n" + completion_event(" z", "stop") + "data: [DONE]\n\n", t0 + ms(5));
  RequestSample s;
  a.finish(s, t0 + ms(10), 0);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.chunks, 1);
}

// Text streamed with usage.completion_tokens 0 (or fewer tokens than chunks with text) is not a success with
// 0 tokens: the chunks are counted, marked as estimated.
TEST(BenchAccounting, UsageThatDeniesTheStreamedTextIsNotTrusted) {
  const auto t0 = Clock::now();
  StreamAccounting a(t0);
  a.feed(completion_event(" a") + completion_event(" b") + completion_event(" c", "length") +
             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":0}}\n\ndata: [DONE]\n\n",
         t0 + ms(30));
  RequestSample s;
  a.finish(s, t0 + ms(30), 0);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.output_tokens, 3);
  EXPECT_FALSE(s.usage_reported);
  EXPECT_EQ(s.input_tokens, 4);
}

TEST(BenchAccounting, ApportionTokensByTextBytes) {
  EXPECT_EQ(apportion_tokens({4, 4, 8, 4}, 5), (std::vector<long long>{1, 1, 2, 1}));
  EXPECT_EQ(apportion_tokens({3, 3}, 2), (std::vector<long long>{1, 1}));
  EXPECT_EQ(apportion_tokens({1, 1, 1}, 2), (std::vector<long long>{1, 1, 0}));  // fewer tokens than chunks
  EXPECT_EQ(apportion_tokens({}, 3).size(), 0u);
}

TEST(BenchStats, PercentilesInterpolateLikeNumpy) {
  const Stats s = compute_stats({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_NEAR(s.p90, 9.1, 1e-12);
  EXPECT_NEAR(s.p99, 9.91, 1e-12);
  EXPECT_EQ(s.count, 10);
}

TEST(BenchSlo, ParsesUnitsAndCountsGoodRequests) {
  const Slo slo = parse_slo("ttft=0.5s, tpot=50ms");
  EXPECT_DOUBLE_EQ(slo.limits_ms.at("ttft"), 500);
  RequestSample good;
  good.ok = true;
  good.ttft_ms = 400;
  good.tpot_ms = 49;
  RequestSample slow = good;
  slow.tpot_ms = 51;
  const LevelSummary sum = summarize({good, slow}, 2.0, 2, slo);
  EXPECT_EQ(sum.good, 1);
  EXPECT_DOUBLE_EQ(sum.goodput, 0.5);
  EXPECT_THROW(parse_slo("ttft=500"), mo::UsageError);
  EXPECT_THROW(parse_slo("latency=5ms"), mo::UsageError);
}

TEST(BenchSummary, FailuresGroupedByReasonAndCancelledApart) {
  RequestSample a, b, c, d;
  a.error = b.error = "HTTP 500: boom";
  c.error = "cancelled";
  d.ok = true;
  d.output_tokens = 10;
  const LevelSummary s = summarize({a, b, c, d}, 1.0, 3, {});
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(s.failures.at("HTTP 500: boom"), 2);
  EXPECT_DOUBLE_EQ(s.output_throughput, 10);
}

TEST(BenchInput, UrlsLevelsAndLimitsRejectBadInputNamingTheFlag) {
  const Url u = parse_url("http://localhost:8080/v1/", "--base-url");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.path_prefix, "/v1");
  try {
    parse_url("https://api.example.com/v1", "--base-url");
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--base-url"), std::string::npos);
  }
  EXPECT_EQ(parse_levels("1, 4,16"), (std::vector<int>{1, 4, 16}));
  EXPECT_THROW(parse_levels("1,x"), mo::UsageError);
  const auto lim = parse_max_regression("tpot_p50=5%,throughput=-5%");
  ASSERT_EQ(lim.size(), 2u);
  EXPECT_DOUBLE_EQ(lim[1].percent, -5);
  EXPECT_THROW(parse_max_regression("tpot_p50=5"), mo::UsageError);
  EXPECT_THROW(parse_max_regression("speed=5%"), mo::UsageError);
}

nlohmann::json one_level(double tpot_p50, double throughput) {
  return {{"levels",
           {{{"concurrency", 4},
             {"request_rate", 0},
             {"summary", {{"output_throughput", throughput}, {"tpot_ms", {{"median", tpot_p50}}}, {"ttft_ms", {{"median", 100.0}}}}}}}}};
}

TEST(BenchCompare, TenPercentTpotRegressionCrossesFivePercentGate) {
  const auto limits = parse_max_regression("tpot_p50=5%,throughput=-5%");
  EXPECT_FALSE(compare_results(one_level(20, 160), one_level(20, 160), limits, "a", "b").regression);
  const auto r = compare_results(one_level(20, 160), one_level(22, 160), limits, "a", "b");
  EXPECT_TRUE(r.regression);
  EXPECT_NE(r.table.find("REGRESSION"), std::string::npos) << r.table;
  EXPECT_TRUE(compare_results(one_level(20, 160), one_level(20, 150), limits, "a", "b").regression);   // -6.25% throughput
  EXPECT_FALSE(compare_results(one_level(20, 160), one_level(19, 170), limits, "a", "b").regression);  // better is fine
  nlohmann::json other = one_level(20, 160);
  other["levels"][0]["concurrency"] = 8;
  EXPECT_TRUE(compare_results(one_level(20, 160), other, limits, "a", "b").regression);  // nothing comparable
  EXPECT_THROW(compare_results(nlohmann::json::object(), other, limits, "a", "b"), mo::UsageError);
}

}  // namespace
