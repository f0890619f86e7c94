#include "mo/bench/http.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>

#include "mo/core/error.h"
#include "mo/core/strings.h"

namespace mo::bench {
namespace {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on fd in slices of 50 ms so `cancel` is noticed; "" when ready, else the reason.
std::string wait_for(int fd, short events, Clock::time_point deadline, double timeout_s, const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel && cancel->load()) return "cancelled";
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return fmt::format("timeout after {:.1f} s", timeout_s);
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 50)));
    if (r > 0) return "";
    if (r < 0 && errno != EINTR) return std::string("poll: ") + std::strerror(errno);
  }
}

// Incremental decoder of a chunked body: feed raw bytes, get the payload out.
class ChunkedDecoder {
 public:
  // Appends the decoded bytes of `raw` to `out`; returns false on a framing error.
  bool feed(std::string_view raw, std::string& out) {
    buf_.append(raw);
    for (;;) {
      if (state_ == State::size) {
        const auto eol = buf_.find("\r\n", pos_);
        if (eol == std::string::npos) break;
        const std::string line = buf_.substr(pos_, eol - pos_);
        pos_ = eol + 2;
        char* end = nullptr;
        errno = 0;
        const unsigned long long n = std::strtoull(line.c_str(), &end, 16);
        if (end == line.c_str() || errno != 0) return false;
        left_ = n;
        state_ = n == 0 ? State::done : State::data;
      } else if (state_ == State::data) {
        const std::size_t take = std::min<std::size_t>(left_, buf_.size() - pos_);
        out.append(buf_, pos_, take);
        pos_ += take;
        left_ -= take;
        if (left_ > 0) break;
        state_ = State::crlf;
      } else if (state_ == State::crlf) {
        if (buf_.size() - pos_ < 2) break;
        if (buf_.compare(pos_, 2, "\r\n") != 0) return false;
        pos_ += 2;
        state_ = State::size;
      } else {
        break;
      }
    }
    buf_.erase(0, pos_);
    pos_ = 0;
    return true;
  }
  bool done() const { return state_ == State::done; }

 private:
  enum class State { size, data, crlf, done };
  State state_ = State::size;
  std::string buf_;
  std::size_t pos_ = 0;
  unsigned long long left_ = 0;
};

struct Head {
  int status = 0;
  std::string content_type;
  bool chunked = false;
  long long content_length = -1;
};

// "" when the head is well formed, else what is wrong with it.
std::string parse_head(const std::string& head, Head& h) {
  const auto eol = head.find("\r\n");
  const std::string status_line = head.substr(0, eol);
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return "malformed HTTP status line";
  h.status = std::atoi(status_line.c_str() + 9);
  if (h.status < 100 || h.status > 599) return "malformed HTTP status line";
  std::size_t pos = eol == std::string::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    auto next = head.find("\r\n", pos);
    if (next == std::string::npos) next = head.size();
    const std::string line = head.substr(pos, next - pos);
    pos = next + 2;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = to_lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (name == "content-type")
      h.content_type = value;
    else if (name == "transfer-encoding" && to_lower(value).find("chunked") != std::string::npos)
      h.chunked = true;
    else if (name == "content-length") {
      value.erase(value.find_last_not_of(" \t") + 1);
      // Digits only (no sign), and one value: "-5" or two different lengths are a broken or hostile server.
      if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)
        return "malformed Content-Length '" + value.substr(0, 40) + "'";
      const long long n = std::atoll(value.c_str());
      if (h.content_length >= 0 && h.content_length != n) return "conflicting Content-Length headers";
      h.content_length = n;
    }
  }
  return "";
}

int connect_to(const Url& url, Clock::time_point deadline, double timeout_s, const std::atomic<bool>* cancel, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &res);
  if (rc != 0) {
    error = fmt::format("cannot resolve {}: {}", url.host, gai_strerror(rc));
    return -1;
  }
  error = "no address for " + url.host;
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      error = wait_for(fd, POLLOUT, deadline, timeout_s, cancel);
      int soerr = 0;
      socklen_t len = sizeof soerr;
      if (error.empty() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) break;
      if (error.empty()) error = std::strerror(soerr);
    } else {
      error = std::strerror(errno);
    }
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd >= 0)
    error.clear();
  else if (error != "cancelled")  // a stop while connecting is a cancelled request, not a failed one
    error = fmt::format("cannot connect to {}:{}: {}", url.host, url.port, to_lower(error));
  return fd;
}

}  // namespace

Url parse_url(const std::string& text, const std::string& what) {
  const std::string scheme = "http://";
  if (text.rfind("https://", 0) == 0)
    throw UsageError(fmt::format("{} '{}': https is not supported; use http:// (or a local TLS-terminating proxy)", what, text));
  if (text.rfind(scheme, 0) != 0) throw UsageError(fmt::format("{} '{}': expected http://HOST[:PORT][/PATH]", what, text));
  Url u;
  std::string rest = text.substr(scheme.size());
  const auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  u.path_prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.path_prefix.empty() && u.path_prefix.back() == '/') u.path_prefix.pop_back();
  const auto colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    const std::string port = hostport.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) throw UsageError(fmt::format("{} '{}': bad port '{}'", what, text, port));
    u.port = static_cast<int>(p);
    hostport.resize(colon);
  }
  if (hostport.size() > 2 && hostport.front() == '[' && hostport.back() == ']') hostport = hostport.substr(1, hostport.size() - 2);
  if (hostport.empty()) throw UsageError(fmt::format("{} '{}': no host", what, text));
  u.host = hostport;
  return u;
}

HttpResult http_send(const Url& url, const HttpRequest& req, const BodySink& on_body, const std::atomic<bool>* cancel) {
  HttpResult r;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(req.timeout_s));
  std::string error;
  Socket sock(connect_to(url, deadline, req.timeout_s, cancel, error));
  if (sock.fd() < 0) {
    r.error = error;
    return r;
  }

  const std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;  // IPv6 literal
  std::string wire = fmt::format("{} {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nUser-Agent: model-optimizer-bench\r\n", req.method,
                                 req.path, host, url.port);
  for (const auto& [k, v] : req.headers) wire += k + ": " + v + "\r\n";
  if (!req.body.empty() || req.method == "POST") wire += fmt::format("Content-Length: {}\r\n", req.body.size());
  wire += "\r\n" + req.body;
  for (std::size_t sent = 0; sent < wire.size();) {
    if (auto e = wait_for(sock.fd(), POLLOUT, deadline, req.timeout_s, cancel); !e.empty()) {
      r.error = e;
      return r;
    }
    const ssize_t n = ::send(sock.fd(), wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      r.error = std::string("send: ") + std::strerror(errno);
      return r;
    }
    if (n > 0) sent += static_cast<std::size_t>(n);
  }

  std::string raw;  // bytes before the end of the head
  Head head;
  bool have_head = false;
  ChunkedDecoder chunked;
  long long body_bytes = 0;
  std::string piece;
  char buf[16384];
  for (;;) {
    if (auto e = wait_for(sock.fd(), POLLIN, deadline, req.timeout_s, cancel); !e.empty()) {
      r.error = e;
      return r;
    }
    const ssize_t n = ::recv(sock.fd(), buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      r.error = std::string("recv: ") + std::strerror(errno);
      return r;
    }
    std::string_view data;
    if (n == 0) {
      if (!have_head) {
        r.error = raw.empty() ? "connection closed before a response" : "connection closed inside the response head";
        return r;
      }
      if (head.chunked && !chunked.done()) {
        r.error = "connection closed inside a chunked body";
        return r;
      }
      if (head.content_length >= 0 && body_bytes < head.content_length) {
        r.error = fmt::format("connection closed after {} of {} body bytes", body_bytes, head.content_length);
        return r;
      }
      r.ok = true;
      return r;
    }
    data = std::string_view(buf, static_cast<std::size_t>(n));
    if (!have_head) {
      raw.append(data);
      const auto end = raw.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (raw.size() > (1u << 20)) {
          r.error = "response head larger than 1 MiB";
          return r;
        }
        continue;
      }
      if (const std::string bad = parse_head(raw.substr(0, end), head); !bad.empty()) {
        r.error = bad;
        return r;
      }
      have_head = true;
      r.status = head.status;
      r.content_type = head.content_type;
      raw.erase(0, end + 4);
      data = raw;
    }
    piece.clear();
    if (head.chunked) {
      if (!chunked.feed(data, piece)) {
        r.error = "malformed chunked encoding";
        return r;
      }
    } else {
      piece.assign(data);
    }
    body_bytes += static_cast<long long>(piece.size());
    if (!piece.empty()) {
      if (on_body) {
        if (!on_body(piece)) {
          r.error = "aborted by the reader";
          return r;
        }
      } else {
        r.body += piece;
      }
    }
    raw.clear();
    if ((head.chunked && chunked.done()) || (head.content_length >= 0 && body_bytes >= head.content_length)) {
      r.ok = true;
      return r;
    }
  }
}

}  // namespace mo::bench
