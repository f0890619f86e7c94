#pragma once
// A small blocking HTTP/1.1 client over POSIX sockets for the load generator: one connection per
// request (Connection: close), the body handed over as it arrives so streamed tokens are timed on
// receipt, and every failure (refused, timeout, bad framing) a value, never an exception.
#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mo::bench {

struct Url {
  std::string host;
  int port = 80;
  std::string path_prefix;  // "/v1" of http://host:8000/v1, without a trailing '/'
};
// Parses "http://host[:port][/prefix]". Throws UsageError naming `what` (the flag) for anything else,
// https included: TLS is not supported.
Url parse_url(const std::string& text, const std::string& what);

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // absolute, e.g. "/v1/completions"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  double timeout_s = 60;  // whole request, connect to last byte
};

struct HttpResult {
  bool ok = false;    // a complete response was received (any status)
  std::string error;  // why not: "connection refused", "timeout after 5.0 s", ...
  int status = 0;
  std::string content_type;
  std::string body;  // the whole decoded body unless on_body consumed it
};

// Called with each decoded piece of the body as it arrives; return false to abort the request.
using BodySink = std::function<bool(std::string_view piece)>;

// Sends `req` to `url`'s host. With `on_body`, the body goes to it instead of HttpResult::body.
// `cancel`, when set to true by another thread, ends the request within ~50 ms (error "cancelled").
HttpResult http_send(const Url& url, const HttpRequest& req, const BodySink& on_body = nullptr, const std::atomic<bool>* cancel = nullptr);

}  // namespace mo::bench
