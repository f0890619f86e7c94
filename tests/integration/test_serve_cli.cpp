// `model-optimizer serve` refusing to start, as a user sees it: exit code, the one-line reason, and the
// memory table printed before a capacity refusal. (Serving itself is tested through the openai client
// in tests/python/test_serve_openai.py.)
#include "cli_run.h"
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using Result = mo::test::CliResult;
using mo::test::has;

// Runs `model-optimizer serve ARGS`.
Result serve(const std::string& args) { return mo::test::run_cli("serve " + args); }

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";

class ServeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  }
};

TEST_F(ServeCli, NoModelIsAUsageError) {
  auto r = serve("");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "model_path: no model given (serve --model_path PATH)")) << r.err;
}

TEST_F(ServeCli, KvCacheTooSmallForOneSequenceNamesTheLargestMaxModelLenThatFits) {
  // 1.116 GiB leaves the KV cache 82 blocks of 16 tokens once weights, activations and the overhead are paid.
  auto r = serve("--model_path " + kStories + " --memory_limit 1.116 --max_num_seqs 16 --max_model_len 2048");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "less than one sequence of 2048; the largest max_model_len that fits is 1312")) << r.err;
  EXPECT_TRUE(has(r.out, "KV cache reserved")) << r.out;  // the memory table came first
  EXPECT_TRUE(has(r.out, "model: stories260K (llama, 5 layers")) << r.out;
}

TEST_F(ServeCli, NoMemoryLeftForTheKvCacheSaysWhatTookIt) {
  auto r = serve("--model_path " + kStories + " --memory_limit 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "nothing is left for the KV cache (raise memory_limit or gpu_memory_utilization)")) << r.err;
}

TEST_F(ServeCli, UnsupportedKvDtypeIsRefused) {
  auto r = serve("--model_path " + kStories + " --kv_cache_dtype bf16");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "kv_cache_dtype: bf16 is not supported by the CPU engine; use fp16 (or auto)")) << r.err;
}

TEST_F(ServeCli, PromptsMustFitOneStepWithoutChunkedPrefill) {
  auto r = serve("--model_path " + kStories + " --max_model_len 512 --max_num_batched_tokens 256 --no-enable-chunked-prefill");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "max_num_batched_tokens: 256 is below max_model_len 512")) << r.err;
}

TEST_F(ServeCli, PortInUseIsARuntimeError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  auto r = serve("--model_path " + kStories + " --max_num_seqs 4 --port " + std::to_string(port));
  ::close(fd);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "cannot listen on 127.0.0.1:" + std::to_string(port))) << r.err;
}

}  // namespace
