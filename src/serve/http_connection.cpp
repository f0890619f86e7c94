#include "http_connection.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "connection_threads.h"
#include "mo/serve/openai_response.h"

namespace mo::serve {

using namespace std::chrono_literals;

namespace {

constexpr Clock::duration kIoTimeout = 5s;  // one read or write, as httplib's defaults

// Waits up to `wait` for `events` (or an error or hang-up, which the next call reports) on fd.
bool wait_for(int fd, short events, Clock::duration wait) {
  const auto end = Clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left)));
    if (r >= 0 || errno != EINTR) return r > 0;
  }
}

void endpoint(const std::optional<Endpoint>& e, std::string& ip, int& port) {
  ip = e ? e->host : "";
  port = e ? e->port : 0;
}

}  // namespace

bool SocketConnection::is_readable() const { return wait_for(fd_, POLLIN, std::min(kIoTimeout, deadline_ - Clock::now())); }

bool SocketConnection::is_writable() const { return wait_for(fd_, POLLOUT, kIoTimeout); }

ssize_t SocketConnection::read(char* ptr, size_t size) {
  if (Clock::now() >= deadline_ || !is_readable()) {
    if (Clock::now() >= deadline_) ::shutdown(fd_, SHUT_RDWR);  // past read_timeout: closed, not answered
    return -1;
  }
  ssize_t n;
  do n = ::recv(fd_, ptr, size, 0);
  while (n < 0 && errno == EINTR);
  return n;
}

ssize_t SocketConnection::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t n;
  do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

void SocketConnection::get_remote_ip_and_port(std::string& ip, int& port) const { endpoint(peer_endpoint(fd_), ip, port); }
void SocketConnection::get_local_ip_and_port(std::string& ip, int& port) const { endpoint(local_endpoint(fd_), ip, port); }

ssize_t MemoryStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, in_.size() - pos_);
  std::memcpy(ptr, in_.data() + pos_, n);
  pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t MemoryStream::write(const char* ptr, size_t size) {
  out.append(ptr, size);
  return static_cast<ssize_t>(size);
}

void MemoryStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = "memory";
  port = 0;
}

void MemoryStream::get_local_ip_and_port(std::string& ip, int& port) const { get_remote_ip_and_port(ip, port); }

ssize_t CheckedRequestStream::read(char* ptr, size_t size) {
  // A request without a length has none (httplib would read on to the end of the connection).
  const std::size_t readable = head_.has_body() ? head_.bytes().size() : head_.head_size();
  if (!head_.has_body() && pos_ >= readable) return 0;
  ssize_t n = 0;
  std::size_t body = 0;  // where, in what this call returns, the body begins
  if (pos_ < readable) {
    n = static_cast<ssize_t>(std::min(size, readable - pos_));
    std::memcpy(ptr, head_.bytes().data() + pos_, static_cast<size_t>(n));
    body = pos_ >= head_.head_size() ? 0 : std::min(static_cast<size_t>(n), head_.head_size() - pos_);
    pos_ += static_cast<size_t>(n);
  } else {
    n = conn_.read(ptr, size);
  }
  if (!head_.chunked()) return n;
  // httplib takes a chunked body cut short by the end of the connection as complete.
  if (n == 0 && !framing_.done()) return -1;
  if (n > 0 && !framing_.add(std::string_view(ptr + body, static_cast<size_t>(n) - body))) return -1;
  return n;
}

void read_head(httplib::Stream& conn, HeadReader& head) {
  char buf[16384];
  while (head.state() == HeadReader::State::more) {
    const ssize_t n = conn.read(buf, sizeof buf);
    if (n <= 0) return;
    head.add(std::string_view(buf, static_cast<size_t>(n)));
  }
}

void write_refusal(httplib::Stream& conn, const HeadRefusal& refusal) {
  const std::string body = dump(error_body(ApiError(refusal.status, refusal.message)));
  const std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", refusal.status,
                  refusal.status == 431 ? "Request Header Fields Too Large" : "Bad Request", body.size(), body);
  for (std::size_t sent = 0; sent < out.size();) {
    const ssize_t n = conn.write(out.data() + sent, out.size() - sent);
    if (n <= 0) return;
    sent += static_cast<std::size_t>(n);
  }
}

void drain_before_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  const auto end = Clock::now() + 5s;
  char buf[16384];
  while (Clock::now() < end && wait_for(fd, POLLIN, end - Clock::now()))
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return;
}

}  // namespace mo::serve
