#pragma once
// The OpenAI-compatible HTTP front end (cpp-httplib): routes, bearer-token check, JSON errors in
// OpenAI's shape, SSE streaming. Each request runs on an httplib worker thread and talks to the
// ServingLoop through a RequestStream.
#include <memory>
#include <string>

#include "mo/serve/openai_request.h"
#include "mo/serve/serving_loop.h"

namespace mo::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;        // empty = no check
  int worker_threads = 64;    // connections served at once (each streaming client holds one)
  std::size_t max_body_bytes = 32u << 20;  // larger bodies get 413
};

class HttpServer {
 public:
  HttpServer(ServingLoop& loop, ApiContext ctx, HttpOptions opt);
  ~HttpServer();
  // Binds host:port; throws mo::Error naming the address when it cannot.
  void bind();
  // Serves until stop(); call bind() first.
  void serve();
  void stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mo::serve
