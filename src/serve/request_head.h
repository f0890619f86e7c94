#pragma once
// A request's head (request line, header fields, blank line) checked as its bytes arrive, before httplib
// parses it: httplib 0.11 bounds one field's length but not their number, and takes framing that RFC 9112
// refuses (whitespace before the colon, obs-fold, NUL bytes, "Content-Length: +48", chunk data without
// its CRLF). Free of httplib, so the rules are tested and fuzzed on their own.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mo::serve {

struct HeadLimits {
  std::size_t max_fields = 100;        // header fields; 431 beyond (Apache's LimitRequestFields)
  std::size_t max_bytes = 64u << 10;   // request line + fields + blank line, bytes; 431 beyond
  std::size_t max_field_bytes = 8192;  // one field line, bytes; 431 beyond (httplib's own limit)
};

// A request refused before routing: its HTTP status (400 or 431) and a one-line reason.
struct HeadRefusal {
  int status = 0;
  std::string message;
};

// Collects a request head from a connection's bytes and refuses it at the first line past a limit or
// against RFC 9112's framing, so a hostile head costs at most about max_bytes of memory.
class HeadReader {
 public:
  enum class State { more, done, refused };
  explicit HeadReader(HeadLimits limits = {}) : limits_(limits) {}
  // Appends bytes read from the connection; a head already done or refused takes no more.
  State add(std::string_view bytes);
  State state() const { return state_; }
  // Everything added: once done, the head's head_size() bytes, then the first bytes of the body.
  const std::string& bytes() const { return buf_; }
  std::size_t head_size() const { return head_size_; }
  std::size_t fields() const { return fields_; }
  const HeadRefusal& refusal() const { return refusal_; }
  bool chunked() const { return chunked_; }  // the body comes with Transfer-Encoding: chunked
  // Content-Length or chunked: without either a request has no body (RFC 9112 6.3).
  bool has_body() const { return content_lengths_ > 0 || transfer_encodings_ > 0; }

 private:
  State refuse(int status, std::string message);
  State request_line(std::string_view line);
  State field_line(std::string_view line);
  State end_of_head();
  HeadLimits limits_;
  State state_ = State::more;
  std::string buf_;
  std::size_t scanned_ = 0, line_start_ = 0, head_size_ = 0, fields_ = 0;
  int content_lengths_ = 0, transfer_encodings_ = 0;
  bool chunked_ = false;
  HeadRefusal refusal_;
};

// Follows a chunked body as it is read and fails at the first byte outside RFC 9112's chunked framing:
// httplib 0.11 takes chunk data not followed by CRLF (reading on as if the body had ended) and sizes that
// strtoul reads ("+5", " 5", "0x5"). Chunk extensions are allowed; trailer fields are not (httplib
// refuses them too).
class ChunkedFraming {
 public:
  // False once the bytes read so far break the framing; bytes after the last chunk are not looked at.
  bool add(std::string_view bytes);
  bool done() const { return state_ == State::done; }

 private:
  enum class State { size, ext, size_lf, data, data_cr, data_lf, end_cr, end_lf, done, broken };
  State state_ = State::size;
  std::uint64_t left_ = 0;  // chunk data bytes still to come, bytes
  int digits_ = 0;
};

}  // namespace mo::serve
