#pragma once
// The OpenAI-compatible HTTP front end (cpp-httplib): request head limits and framing checks (before
// httplib parses a request), routes, bearer-token check, JSON errors in OpenAI's shape, SSE streaming.
// Each connection runs on a thread of its own (connection_threads.h) and its requests talk to the
// ServingLoop through a RequestStream.
#include <memory>
#include <string>
#include <string_view>

#include "mo/serve/openai_request.h"
#include "mo/serve/serving_loop.h"

namespace mo::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;                     // empty = no check
  int max_connections = 1024;              // connections served at once, a thread each; when all are taken, those
                                           // waiting over 0.5 s for their request headers are closed for new ones
  std::size_t max_body_bytes = 32u << 20;  // larger bodies get 413
  double read_timeout_s = 60;              // to send the request headers after connecting, and again the body after them
};

class HttpServer {
 public:
  HttpServer(ServingLoop& loop, ApiContext ctx, HttpOptions opt);
  ~HttpServer();
  // Binds host:port; throws mo::Error naming the address when it cannot.
  void bind();
  // Serves until stop(); call bind() first.
  void serve();
  // Waits up to `seconds` for open streams to write their last chunk and [DONE] (httplib cuts a stream
  // short once stop() is called).
  void drain_streams(double seconds);
  void stop();
  int port() const;
  // One request given as raw bytes (a connection's whole input), processed as a connection's would be but
  // in memory: the bytes written back. For the fuzz target and tests; needs no bind().
  std::string answer(std::string_view raw_request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mo::serve
