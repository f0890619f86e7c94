#include "connection_threads.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
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
    const auto p = peer_endpoint(fd);
    const auto l = p ? local_endpoint(fd) : std::nullopt;
    if (p && l && fn(fd, *l, *p)) return;
  }
}

}  // namespace

std::optional<Endpoint> peer_endpoint(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  return endpoint_of(ss);
}

std::optional<Endpoint> local_endpoint(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  return endpoint_of(ss);
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
