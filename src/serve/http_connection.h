#pragma once
// The streams httplib's request parser reads from and writes to: a client socket, a request held in
// memory (HttpServer::answer), and, once our request head check passed (request_head.h), the bytes
// that check read followed by the rest of the connection.
#include <chrono>
#include <string>
#include <string_view>

#include "httplib_config.h"
#include "request_head.h"

namespace mo::serve {

using Clock = std::chrono::steady_clock;

// A client socket as httplib's Stream: each read and write waits up to 5 s, httplib's own timeouts, and
// reads stop at the deadline (read_timeout), where the socket is shut so the client sees it closed: a
// client sending a byte every few seconds cannot hold its connection for good.
class SocketConnection : public httplib::Stream {
 public:
  SocketConnection(int fd, Clock::time_point deadline) : fd_(fd), deadline_(deadline) {}
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  Clock::time_point deadline_;
};

// A request already in memory, and the bytes written back.
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string_view in) : in_(in) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string out;

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

// The connection as httplib's parser reads it after our head check: the bytes the check read, then the
// connection; a chunked body passes through ChunkedFraming, which fails the read at its first bad byte.
class CheckedRequestStream : public httplib::Stream {
 public:
  CheckedRequestStream(httplib::Stream& conn, const HeadReader& head) : conn_(conn), head_(head) {}
  bool is_readable() const override { return pos_ < head_.bytes().size() || (head_.has_body() && conn_.is_readable()); }
  bool is_writable() const override { return conn_.is_writable(); }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override { return conn_.write(ptr, size); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { conn_.get_remote_ip_and_port(ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { conn_.get_local_ip_and_port(ip, port); }
  socket_t socket() const override { return conn_.socket(); }

 private:
  httplib::Stream& conn_;
  const HeadReader& head_;
  std::size_t pos_ = 0;  // in head_.bytes()
  ChunkedFraming framing_;
};

// Reads the connection into `head` until it is done or refused, or the client closes or goes quiet.
void read_head(httplib::Stream& conn, HeadReader& head);
// The refusal as an HTTP answer with an OpenAI error body and `Connection: close`.
void write_refusal(httplib::Stream& conn, const HeadRefusal& refusal);
// Reads and drops what the client still sends, for up to 5 s: closing a socket with unread bytes resets
// the connection, and the client could lose the answer before reading it.
void drain_before_close(int fd);

}  // namespace mo::serve
