#pragma once
// Connections served each on a thread of its own, up to a cap, so that slow or idle clients never hold
// the threads other requests and /health need; and a way to notice that the client of a request has gone,
// which httplib 0.11 does not offer.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace mo::serve {

// The shape of httplib::TaskQueue, kept free of httplib's headers; http_server.cpp adapts it.
// Held by shared_ptr: a connection's thread keeps it alive until that thread ends.
class ConnectionThreads : public std::enable_shared_from_this<ConnectionThreads> {
 public:
  explicit ConnectionThreads(std::size_t max_connections) : cap_(max_connections) {}
  // Runs fn on a new thread, or queues it while `max_connections` run (and makes room).
  void enqueue(std::function<void()> fn);
  // While connections are queued, shuts as many of those that have waited over 0.5 s for their request
  // head as the queue needs, oldest first (HeadWait), so that clients which connect and send nothing, or
  // drip their headers, cannot keep new connections (and /health) waiting. The 0.5 s leaves a client its
  // time to send a head, so two cannot close each other in turn. Called on each new connection and
  // every 100 ms (httplib's idle callback), as a connection queued in a burst may find none old enough.
  void make_room();
  // Waits up to wait_s for the connections to end, then shuts the client sockets on `port` (a slow client
  // would otherwise hold its thread) and waits up to wait_s more.
  void shutdown(double wait_s, int port);
  std::size_t active() const;

  // For its lifetime, marks the connection on `fd` as still sending its request head: make_room may shut it.
  class HeadWait {
   public:
    HeadWait(ConnectionThreads& threads, int fd);
    ~HeadWait();
    HeadWait(const HeadWait&) = delete;
    HeadWait& operator=(const HeadWait&) = delete;

   private:
    ConnectionThreads& threads_;
    std::uint64_t id_;
  };

 private:
  void run(std::function<void()> fn);
  void make_room_locked();
  const std::size_t cap_;
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::size_t active_ = 0;
  std::deque<std::function<void()>> waiting_;
  struct Waiter {
    int fd;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::uint64_t, Waiter> head_waits_;  // by arrival, oldest first
  std::uint64_t next_head_wait_ = 0;
  std::size_t closing_ = 0;  // head waits shut by make_room whose HeadWait has not ended yet
};

struct Endpoint {
  std::string host;
  int port = -1;
};
// The two ends of a connected TCP socket (IPv4 or IPv6), or nullopt.
std::optional<Endpoint> peer_endpoint(int fd);
std::optional<Endpoint> local_endpoint(int fd);

// The connected socket of this process whose peer is addr:port (the request's client), or -1.
int socket_of_peer(const std::string& addr, int port);
// True when the peer has closed its side of `fd` (or the socket failed): nothing will read the answer.
bool peer_gone(int fd);
// shutdown(SHUT_RDWR) on every connected socket of this process whose local port is `port`.
void shut_client_sockets(int port);

}  // namespace mo::serve
