// Raw bytes as one connection's input, through serve's request head and chunked framing checks and then
// httplib's own parser (as HttpServer does), to a route that echoes the body. A finding is a body httplib
// hands the route that differs from the one RFC 9112 frames in those bytes (read here independently:
// Content-Length bytes, strict chunks, or none without either), a refusal that is not an HTTP 4xx answer,
// or a crash. This is how httplib 0.11 was found to read a request without a length on to the end of the
// connection, and to take a chunked body cut short as complete.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "../../src/serve/http_connection.h"

namespace {

using namespace mo::serve;

struct EchoServer : httplib::Server {
  using httplib::Server::process_request;
  EchoServer() {
    Post("/echo", [](const httplib::Request& req, httplib::Response& res) { res.set_content(req.body, "text/plain"); });
    set_payload_max_length(1 << 20);
  }
};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_http_framing: %s\n", what);
  std::abort();
}

// The body of a chunked message as RFC 9112 reads it, or nullopt when malformed or cut short.
std::optional<std::string> dechunked(std::string_view b) {
  std::string out;
  for (std::size_t p = 0;;) {
    std::uint64_t n = 0;
    std::size_t q = p;
    for (; q < b.size() && std::isxdigit(static_cast<unsigned char>(b[q])); ++q) {
      if (n >> 60) return std::nullopt;
      n = n * 16 + static_cast<std::uint64_t>(std::isdigit(static_cast<unsigned char>(b[q])) ? b[q] - '0' : std::tolower(b[q]) - 'a' + 10);
    }
    const std::size_t eol = b.find("\r\n", q);
    if (q == p || eol == std::string_view::npos) return std::nullopt;
    for (char c : b.substr(q, eol - q))
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return std::nullopt;
    if (eol > q && b[q] != ';' && b[q] != ' ' && b[q] != '\t') return std::nullopt;
    p = eol + 2;
    if (n == 0) return b.substr(p, 2) == "\r\n" ? std::optional(out) : std::nullopt;
    if (b.size() - p < n + 2 || b.substr(p + n, 2) != "\r\n") return std::nullopt;
    out.append(b.substr(p, n));
    p += n + 2;
  }
}

// The Content-Length of a checked head (digits only, at most one), or 0.
std::size_t content_length(std::string_view head) {
  std::string lower(head);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos) return 0;
  std::size_t v = at + 17;
  while (head[v] == ' ' || head[v] == '\t') ++v;
  return std::stoull(std::string(head.substr(v, head.find("\r\n", v) - v)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static EchoServer* server = new EchoServer;  // kept, so leak checks stay quiet
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  MemoryStream conn(in);
  HeadReader head;
  read_head(conn, head);
  if (head.state() == HeadReader::State::refused) {
    write_refusal(conn, head.refusal());
    if (conn.out.rfind("HTTP/1.1 4", 0) != 0) finding("a refusal that is not a 4xx answer");
    return 0;
  }
  if (head.state() != HeadReader::State::done) return 0;
  CheckedRequestStream checked(conn, head);
  bool closed = false;
  server->process_request(checked, true, closed, nullptr);
  if (conn.out.rfind("HTTP/1.1 200", 0) != 0 || in.rfind("POST /echo HTTP/1.1\r\n", 0) != 0) return 0;
  const std::string echoed = conn.out.substr(conn.out.find("\r\n\r\n") + 4);
  const std::string_view rest = in.substr(head.head_size());
  std::string framed;
  if (head.chunked()) {
    const auto body = dechunked(rest);
    if (!body) finding("httplib took a chunked body that RFC 9112 framing refuses");
    framed = *body;
  } else {
    const std::size_t n = content_length(in.substr(0, head.head_size()));
    if (rest.size() < n) finding("a body shorter than its Content-Length was answered 200");
    framed = std::string(rest.substr(0, n));
  }
  if (echoed != framed) finding("the body httplib read differs from the one the bytes frame");
  return 0;
}
