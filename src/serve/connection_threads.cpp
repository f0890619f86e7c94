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
    make_room_locked();
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

void ConnectionThreads::make_room() {
  std::lock_guard lock(mu_);
  make_room_locked();
}

void ConnectionThreads::make_room_locked() {
  const auto old = std::chrono::steady_clock::now() - std::chrono::milliseconds(500);
  while (waiting_.size() > closing_ && !head_waits_.empty() && head_waits_.begin()->second.since <= old) {
    // Its thread's read ends at once; the thread then takes the connection queued first.
    ::shutdown(head_waits_.begin()->second.fd, SHUT_RDWR);
    head_waits_.erase(head_waits_.begin());
    ++closing_;
  }
}

// The socket stays open while it is listed (the destructor runs before its owner closes it), so a shutdown
// from make_room never reaches a descriptor number already reused.
ConnectionThreads::HeadWait::HeadWait(ConnectionThreads& threads, int fd) : threads_(threads) {
  std::lock_guard lock(threads_.mu_);
  id_ = threads_.next_head_wait_++;
  threads_.head_waits_.emplace(id_, Waiter{fd, std::chrono::steady_clock::now()});
}

ConnectionThreads::HeadWait::~HeadWait() {
  std::lock_guard lock(threads_.mu_);
  if (threads_.head_waits_.erase(id_) == 0 && threads_.closing_ > 0) --threads_.closing_;  // shut by make_room
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
