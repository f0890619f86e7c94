#include "connection_threads.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

namespace mo::serve {

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (active_ >= cap_) {
    waiting_.push_back(std::move(fn));
    return;
  }
  ++active_;
  std::thread([self = shared_from_this(), f = std::move(fn)]() mutable { self->run(std::move(f)); }).detach();
}

void ConnectionThreads::run(std::function<void()> fn) {
  for (;;) {
    fn();
    std::lock_guard lock(mu_);
    if (waiting_.empty()) {
      --active_;
      done_.notify_all();
      return;
    }
    fn = std::move(waiting_.front());  // this thread takes the next queued connection
    waiting_.pop_front();
  }
}

void ConnectionThreads::shutdown(double wait_s, int port) {
  std::unique_lock lock(mu_);
  const auto idle = [&] { return active_ == 0 && waiting_.empty(); };
  if (done_.wait_for(lock, std::chrono::duration<double>(wait_s), idle)) return;
  lock.unlock();
  shut_client_sockets(port);
  lock.lock();
  done_.wait_for(lock, std::chrono::duration<double>(wait_s), idle);
}

std::size_t ConnectionThreads::active() const {
  std::lock_guard lock(mu_);
  return active_;
}

namespace {

struct Endpoint {
  std::string host;
  int port = -1;
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return Endpoint{host, ntohs(a->sin_port)};
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return Endpoint{host, ntohs(a->sin6_port)};
  }
  return std::nullopt;
}

// Calls fn(fd, local, peer) for every connected TCP socket of this process; stops when fn returns true.
void for_each_connection(const std::function<bool(int, const Endpoint&, const Endpoint&)>& fn) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 9) continue;
    const int fd = std::stoi(name);
    sockaddr_storage peer{}, local{};
    socklen_t plen = sizeof peer, llen = sizeof local;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    const auto p = endpoint_of(peer), l = endpoint_of(local);
    if (p && l && fn(fd, *l, *p)) return;
  }
}

}  // namespace

struct RequestReadDeadline::Conn {
  std::chrono::steady_clock::time_point deadline;
  std::chrono::steady_clock::time_point touched;  // last news of it: a poll or a handler
  bool reading = true;                            // false once the handler runs
};

namespace {
std::string peer_key(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }
}  // namespace

RequestReadDeadline::RequestReadDeadline(int port, double timeout_s)
    : port_(port),
      timeout_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s))),
      thread_([this] { watch(); }) {}

RequestReadDeadline::~RequestReadDeadline() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void RequestReadDeadline::headers_read(const std::string& addr, int port) {
  std::lock_guard lock(mu_);
  auto& c = conns_[peer_key(addr, port)];
  c.touched = std::chrono::steady_clock::now();
  c.deadline = c.touched + timeout_;
}

void RequestReadDeadline::body_read(const std::string& addr, int port) {
  std::lock_guard lock(mu_);
  auto& c = conns_[peer_key(addr, port)];
  c.touched = std::chrono::steady_clock::now();
  c.reading = false;
}

void RequestReadDeadline::watch() {
  const auto tick = std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(500), timeout_ / 4);
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, tick, [this] { return stop_; })) {
    lock.unlock();
    const auto scan_start = std::chrono::steady_clock::now();
    std::vector<std::pair<int, std::string>> open;  // scanned without the lock: /proc can be slow
    for_each_connection([&](int fd, const Endpoint& local, const Endpoint& peer) {
      if (local.port == port_) open.emplace_back(fd, peer_key(peer.host, peer.port));
      return false;
    });
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [fd, key] : open) {
      auto [it, fresh] = conns_.try_emplace(key);
      Conn& c = it->second;
      if (fresh) c.deadline = now + timeout_;
      c.touched = now;
      if (c.reading && now > c.deadline) {
        ::shutdown(fd, SHUT_RDWR);  // its thread sees the end of the stream and lets go
        c.reading = false;
      }
    }
    // Gone from a scan that began after the last news of them: closed.
    std::erase_if(conns_, [&](const auto& kv) { return kv.second.touched < scan_start; });
  }
}

int socket_of_peer(const std::string& addr, int port) {
  int found = -1;
  for_each_connection([&](int fd, const Endpoint&, const Endpoint& peer) {
    if (peer.port != port || peer.host != addr) return false;
    found = fd;
    return true;
  });
  return found;
}

void shut_client_sockets(int port) {
  for_each_connection([&](int fd, const Endpoint& local, const Endpoint&) {
    if (local.port == port) ::shutdown(fd, SHUT_RDWR);
    return false;
  });
}

bool peer_gone(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace mo::serve
