#pragma once
// A scripted OpenAI-compatible server for the bench tests: a POSIX socket server on 127.0.0.1 (an
// ephemeral port) with one thread per connection. Timing is exact by construction: token j of an
// answer is due at ttft_ms + j * itl_ms after the request arrived, and a chunk is sent when its last
// token is due, so a two-token chunk arrives 2 * itl_ms after the previous one. The fake tokenizer
// counts 1.5 tokens per prompt word (rounded down) plus 3 template tokens.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace mo::bench::testing {

enum class FakeMode { ok, http500, malformed_sse, hang, close_mid_stream, no_usage };

struct FakeScript {
  int ttft_ms = 100;
  int itl_ms = 20;
  int pair_every = 3;  // every n-th chunk after the first carries two tokens; 0 = never
  // Chooses the behaviour of each completion request (n counts them from 0, probes included).
  std::function<FakeMode(const nlohmann::json& body, long long n)> mode = [](const nlohmann::json&, long long) { return FakeMode::ok; };
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakeScript script = {}) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(listen_fd_, 256);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~FakeOpenAiServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    accept_thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : workers_) t.join();
  }
  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int peak_in_flight() const { return peak_; }
  long long completion_requests() const { return completions_; }

  static long long prompt_tokens(const std::string& text) {
    long long words = text.empty() ? 0 : 1;
    for (char c : text) words += c == ' ';
    return words + words / 2 + 3;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void accept_loop() {
    while (!stop_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        if (stop_) return;
        continue;
      }
      // Small SSE writes go out at once, as real servers do (else Nagle waits for a delayed ACK, up to 40 ms).
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mu_);
      workers_.emplace_back([this, fd] {
        handle(fd);
        ::close(fd);
      });
    }
  }

  static bool send_all(int fd, const std::string& s) {
    for (std::size_t sent = 0; sent < s.size();) {
      const ssize_t n = ::send(fd, s.data() + sent, s.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  static bool send_chunk(int fd, const std::string& s) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", s.size());
    return send_all(fd, size + s + "\r\n");
  }
  void sleep_until(Clock::time_point t) const {
    while (!stop_ && Clock::now() < t)
      std::this_thread::sleep_for(std::min<Clock::duration>(t - Clock::now(), std::chrono::milliseconds(5)));
  }

  void handle(int fd) {
    std::string in;
    char buf[8192];
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, static_cast<std::size_t>(n));
    }
    const Clock::time_point arrived = Clock::now();
    const std::string head = in.substr(0, head_end);
    std::size_t content_length = 0;
    if (auto p = head.find("Content-Length: "); p != std::string::npos) content_length = std::stoul(head.substr(p + 16));
    std::string body = in.substr(head_end + 4);
    while (body.size() < content_length) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      body.append(buf, static_cast<std::size_t>(n));
    }
    if (head.rfind("GET /v1/models", 0) == 0) {
      const std::string j = R"({"object":"list","data":[{"id":"fake-model","object":"model","owned_by":"tests","max_model_len":4096}]})";
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(j.size()) + "\r\n\r\n" + j);
      return;
    }
    const nlohmann::json req = nlohmann::json::parse(body, nullptr, false);
    const bool chat = head.find("/chat/completions") != std::string::npos;
    const long long n_req = completions_++;
    const FakeMode mode = script_.mode(req, n_req);
    const int now = ++in_flight_;
    for (int p = peak_.load(); now > p && !peak_.compare_exchange_weak(p, now);) {}
    answer(fd, req, chat, mode, arrived);
    --in_flight_;
  }

  void answer(int fd, const nlohmann::json& req, bool chat, FakeMode mode, Clock::time_point arrived) {
    if (mode == FakeMode::http500) {
      const std::string j = R"({"error":{"message":"scripted failure","type":"server_error"}})";
      send_all(fd, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(j.size()) +
                       "\r\n\r\n" + j);
      return;
    }
    if (mode == FakeMode::hang) {
      sleep_until(arrived + std::chrono::seconds(10));
      return;
    }
    const std::string text = chat ? req["messages"][0]["content"].get<std::string>() : req["prompt"].get<std::string>();
    const long long n_out = req.value("max_tokens", 16LL);
    const long long n_in = prompt_tokens(text);
    const auto due = [&](long long j) { return arrived + std::chrono::milliseconds(script_.ttft_ms + j * script_.itl_ms); };
    const std::string usage = R"({"prompt_tokens":)" + std::to_string(n_in) + R"(,"completion_tokens":)" + std::to_string(n_out) +
                              R"(,"total_tokens":)" + std::to_string(n_in + n_out) + "}";
    if (!req.value("stream", false)) {
      sleep_until(due(n_out - 1));
      std::string out;
      for (long long j = 0; j < n_out; ++j) out += " tok";
      const std::string j = chat ? R"({"choices":[{"index":0,"message":{"role":"assistant","content":")" + out +
                                       R"("},"finish_reason":"length"}],"usage":)" + usage + "}"
                                 : R"({"choices":[{"index":0,"text":")" + out + R"(","finish_reason":"length"}],"usage":)" + usage + "}";
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(j.size()) + "\r\n\r\n" + j);
      return;
    }
    if (!send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")) return;
    const auto event = [&](const std::string& piece, const char* finish) {
      const std::string fr = finish ? std::string("\"") + finish + "\"" : "null";
      const std::string j =
          chat ? R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":")" + piece + R"("},"finish_reason":)" + fr +
                     "}]}"
               : R"({"object":"text_completion","choices":[{"index":0,"text":")" + piece + R"(","finish_reason":)" + fr + "}]}";
      return "data: " + j + "\n\n";
    };
    if (chat && !send_chunk(fd, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")) return;
    long long j = 0;
    for (long long chunk = 0; j < n_out; ++chunk) {
      const bool pair = chunk > 0 && script_.pair_every > 0 && chunk % script_.pair_every == 0 && j + 1 < n_out;
      const long long last = j + (pair ? 1 : 0);
      sleep_until(due(last));
      if (stop_) return;
      if (mode == FakeMode::malformed_sse && chunk == 2) {
        send_chunk(fd, "data: {\"choices\": [oops\n\n");
        send_chunk(fd, "");
        return;
      }
      if (mode == FakeMode::close_mid_stream && chunk == 2) return;
      if (!send_chunk(fd, event(pair ? " tok tok" : " tok", last + 1 == n_out ? "length" : nullptr))) return;
      j = last + 1;
    }
    if (mode != FakeMode::no_usage) send_chunk(fd, "data: {\"choices\":[],\"usage\":" + usage + "}\n\n");
    send_chunk(fd, "data: [DONE]\n\n");
    send_chunk(fd, "");
  }

  FakeScript script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> in_flight_{0}, peak_{0};
  std::atomic<long long> completions_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
};

}  // namespace mo::bench::testing
