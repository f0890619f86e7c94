// `model-optimizer bench` end to end against the scripted fake server: files written, compare's exit
// codes (the CI gate), Ctrl-C keeping partial results, one-line errors for bad input.
#include "cli_run.h"
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "../unit/test_bench_fake_server.h"

namespace {

namespace fs = std::filesystem;
using mo::bench::testing::FakeOpenAiServer;

using BenchRun = mo::test::CliResult;
using mo::test::has;

BenchRun run_bench(const std::string& args) { return mo::test::run_cli("bench " + args); }

nlohmann::json read(const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); }

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("mo_bench_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(BenchCli, SweepWritesResultsReportAndPlotThenCompareGates) {
  FakeOpenAiServer srv;
  const fs::path base = dir / "base.json";
  const BenchRun r = run_bench("--base-url " + srv.base_url() + " --concurrency 1,4 --num-prompts 8 --input-len 32 --output-len 8 " +
                               "--slo ttft=500ms,tpot=50ms --no-progress --report --out " + base.string());
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "TPOT ms p50/p99")) << r.out;
  ASSERT_TRUE(fs::exists(dir / "base.md"));
  ASSERT_TRUE(fs::exists(dir / "base.svg"));
  const nlohmann::json j = read(base);
  EXPECT_EQ(j["server"]["model"], "fake-model");
  EXPECT_EQ(j["server"]["models"][0]["id"], "fake-model");
  EXPECT_TRUE(j["calibration"]["measured"].get<bool>());
  ASSERT_EQ(j["levels"].size(), 2u);
  EXPECT_EQ(j["levels"][1]["concurrency"], 4);
  EXPECT_EQ(j["levels"][1]["samples"].size(), 8u);
  EXPECT_EQ(j["levels"][1]["summary"]["peak_concurrency"], 4);
  EXPECT_NEAR(j["levels"][0]["summary"]["input_len"]["mean"].get<double>(), 32.0, 1.0);  // one word = 1.5 fake tokens
  EXPECT_EQ(j["levels"][0]["summary"]["good_requests"], 8);
  std::ifstream svg(dir / "base.svg");
  const std::string svg_text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_TRUE(has(svg_text, "<svg") && has(svg_text, "Throughput vs concurrency"));

  const std::string gate = " --max-regression tpot_p50=5%,throughput=-5%";
  const BenchRun same = run_bench("compare " + base.string() + " " + base.string() + gate);
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_TRUE(has(same.out, "no regression")) << same.out;

  nlohmann::json slower = j;  // inject a 10% TPOT regression
  for (auto& l : slower["levels"]) l["summary"]["tpot_ms"]["median"] = l["summary"]["tpot_ms"]["median"].get<double>() * 1.10;
  std::ofstream(dir / "new.json") << slower.dump();
  const BenchRun worse = run_bench("compare " + base.string() + " " + (dir / "new.json").string() + gate);
  EXPECT_EQ(worse.code, 1) << worse.out << worse.err;
  EXPECT_TRUE(has(worse.out, "REGRESSION")) << worse.out;
  EXPECT_TRUE(has(worse.out, "+10.0%")) << worse.out;
}

TEST_F(BenchCli, CtrlCWritesPartialResults) {
  FakeOpenAiServer srv;
  const fs::path out = dir / "partial.json";
  // The shell prints bench's pid, then its exit code; Ctrl-C comes once the server has answered requests
  // (the two calibration probes and four measured ones), however slow the machine.
  const std::string cmd = std::string(MO_BINARY) + " bench --base-url " + srv.base_url() +
                          " --concurrency 2 --num-prompts 200 --input-len 16 --output-len 16 --no-progress --out " + out.string() +
                          " >/dev/null 2>&1 & echo $!; wait $!; echo $?";
  FILE* p = ::popen(cmd.c_str(), "r");
  char line[64] = {0};
  ASSERT_NE(std::fgets(line, sizeof line, p), nullptr);
  const pid_t pid = static_cast<pid_t>(std::stol(line));
  for (int i = 0; i < 60000 && srv.completion_requests() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGINT);
  ASSERT_NE(std::fgets(line, sizeof line, p), nullptr);
  ::pclose(p);
  EXPECT_EQ(std::string(line), "130\n");
  ASSERT_TRUE(fs::exists(out));
  const nlohmann::json j = read(out);
  EXPECT_TRUE(j["interrupted"].get<bool>());
  const long long done = j["levels"][0]["summary"]["completed"].get<long long>();
  EXPECT_GT(done, 0);
  EXPECT_LT(done, 200);
}

TEST_F(BenchCli, ServerDownWithAModelNameRecordsFailures) {
  int port;
  {
    FakeOpenAiServer gone;
    port = gone.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  const BenchRun r =
      run_bench("--base-url " + url + " --model m --num-prompts 3 --concurrency 1 --no-progress --out " + (dir / "down.json").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.out, "connection refused")) << r.out;
  EXPECT_TRUE(has(r.err, "no request succeeded")) << r.err;
  EXPECT_EQ(read(dir / "down.json")["levels"][0]["summary"]["failed"], 3);
  const BenchRun no_model = run_bench("--base-url " + url + " --no-progress");
  EXPECT_EQ(no_model.code, 1);
  EXPECT_TRUE(has(no_model.err, "cannot list models")) << no_model.err;
}

TEST_F(BenchCli, BadInputIsAOneLineErrorNamingTheFlag) {
  const BenchRun slo = run_bench("--slo ttft=fast");
  EXPECT_EQ(slo.code, 2);
  EXPECT_TRUE(has(slo.err, "--slo 'ttft=fast'")) << slo.err;
  const BenchRun url = run_bench("--base-url https://x/v1");
  EXPECT_EQ(url.code, 2);
  EXPECT_TRUE(has(url.err, "--base-url")) << url.err;
  const BenchRun conc = run_bench("--concurrency 0");
  EXPECT_EQ(conc.code, 2);
  EXPECT_TRUE(has(conc.err, "--concurrency '0'")) << conc.err;
  const BenchRun data = run_bench("--dataset /nonexistent/prompts.jsonl");
  EXPECT_EQ(data.code, 2);
  EXPECT_TRUE(has(data.err, "--dataset not found: /nonexistent/prompts.jsonl")) << data.err;
  const BenchRun cmp = run_bench("compare only-one.json");
  EXPECT_EQ(cmp.code, 2);
  EXPECT_TRUE(has(cmp.err, "compare BASE.json NEW.json")) << cmp.err;
  const BenchRun lim = run_bench("compare a.json b.json --max-regression tpot=5%");
  EXPECT_EQ(lim.code, 2);
  EXPECT_TRUE(has(lim.err, "--max-regression 'tpot=5%'")) << lim.err;
}

}  // namespace
