// `model-optimizer serve` refusing to start, as a user sees it: exit code, the one-line reason, and the
// memory table printed before a capacity refusal. (Serving itself is tested through the openai client
// in tests/python/test_serve_openai.py.)
#include "cli_run.h"
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// What `serve` printed, whether it served, and how it ended.
struct Served {
  std::string health;  // the answer to GET /health once it said it serves; empty when it never did
  int code = -1;       // exit code (after SIGTERM when it served); -1 when a signal ended it
  std::string out, err;
};

// The status line of GET /health on 127.0.0.1:port: the read waits until the server's accept loop answers.
std::string health_status(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[512];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return got.substr(0, got.find("\r\n"));
}

// Runs `model-optimizer serve ARGS --port P` on a free port; once it says it serves, asks /health, then stops
// it with SIGTERM (a graceful stop: exit 0). A refusal ends it by itself.
Served serve_and_stop(const std::string& args) {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(probe);
  const int port = ntohs(addr.sin_port);
  const std::string cmd = "exec " + std::string(MO_BINARY) + " serve " + args + " --port " + std::to_string(port);
  const auto err_file = std::filesystem::temp_directory_path() / ("mo_serve_err_" + std::to_string(::getpid()));
  int out[2];
  if (::pipe(out) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(err, 2);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  Served s;
  FILE* f = ::fdopen(out[0], "r");
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    s.out += line;
    if (std::string(line).starts_with("serving ")) {
      s.health = health_status(port);
      ::kill(pid, SIGTERM);
    }
  }
  std::fclose(f);
  int status = 0;
  ::waitpid(pid, &status, 0);
  s.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  s.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(err_file);
  return s;
}

// The refusal names the largest max_model_len that fits; that length must start (with room for exactly one
// sequence), and one token more must be refused, naming the same length.
TEST_F(ServeCli, KvCacheTooSmallForOneSequenceNamesTheLargestMaxModelLenThatFits) {
  const std::string common = "--model_path " + kStories + " --memory_limit 1.116 --max_num_seqs 16";
  const auto r = serve_and_stop(common + " --max_model_len 2048");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.out, "KV cache reserved")) << r.out;  // the memory table came first
  EXPECT_TRUE(has(r.out, "model: stories260K (llama, 5 layers")) << r.out;
  const std::string says = "less than one sequence of 2048; the largest max_model_len that fits is ";
  const auto at = r.err.find(says);
  ASSERT_NE(at, std::string::npos) << r.err;
  const int fits = std::atoi(r.err.c_str() + at + says.size());
  ASSERT_GT(fits, 0) << r.err;
  ASSERT_LT(fits, 2048) << r.err;

  const auto ok = serve_and_stop(common + " --max_model_len " + std::to_string(fits));
  EXPECT_EQ(ok.health, "HTTP/1.1 200 OK") << ok.out << ok.err;
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_TRUE(has(ok.out, "max concurrent sequences at max_model_len " + std::to_string(fits) + ": 1 (max_num_seqs 16)")) << ok.out;

  const auto over = serve_and_stop(common + " --max_model_len " + std::to_string(fits + 1));
  EXPECT_EQ(over.health, "") << over.out;
  EXPECT_EQ(over.code, 2) << over.out;
  EXPECT_TRUE(has(over.err, "less than one sequence of " + std::to_string(fits + 1) + "; the largest max_model_len that fits is " +
                                std::to_string(fits)))
      << over.err;
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
