// Raw bytes as the start of a connection, through serve's request head check (HeadReader) and, for a
// chunked body, its framing check (ChunkedFraming), with the default limits and with small ones so
// that short inputs reach the count and size limits. A finding is: a verdict that depends on how the
// bytes were split into reads; a head accepted past a limit or with a line RFC 9112 refuses (checked
// again here, independently); more bytes kept than the limit allows; a refusal other than 400/431 or
// whose message is not one printable line.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../../src/serve/request_head.h"
#include "fuzz_util.h"

namespace {

using mo::serve::ChunkedFraming;
using mo::serve::HeadLimits;
using mo::serve::HeadReader;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz_http_head: %s %.*s\n", what, static_cast<int>(std::min<std::size_t>(detail.size(), 200)), detail.data());
  std::abort();
}

bool lower_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

// The accepted head line by line, against the rules as RFC 9112 words them.
void recheck(std::string_view head, const HeadReader& r, const HeadLimits& limits) {
  if (head.size() > limits.max_bytes || r.fields() > limits.max_fields) finding("accepted past a limit");
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") finding("accepted a head without its blank line");
  int lengths = 0, codings = 0;
  std::size_t start = head.find("\r\n") + 2;
  for (std::size_t end; (end = head.find("\r\n", start)) != start; start = end + 2) {
    const std::string_view line = head.substr(start, end - start);
    if (line.size() + 2 > limits.max_field_bytes) finding("accepted a field line over the limit");
    const std::size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) finding("accepted a field line without a name and colon", line);
    for (char c : line.substr(0, colon))
      if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos)
        finding("accepted a field name with a non-token byte", line);
    const std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
    if (!lower_equals(name, "authorization"))
      for (char c : value)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) finding("accepted a control byte in a value", line);
    if (lower_equals(name, "content-length")) ++lengths;
    if (lower_equals(name, "transfer-encoding")) ++codings;
  }
  if (lengths + codings > 1) finding("accepted an ambiguous body framing", head);
  if (r.chunked() != (codings == 1)) finding("chunked() disagrees with the head", head);
}

HeadReader read(std::string_view in, std::size_t piece, const HeadLimits& limits) {
  HeadReader r(limits);
  for (std::size_t i = 0; i < in.size() && r.state() == HeadReader::State::more; i += piece) {
    r.add(in.substr(i, piece));
    if (r.bytes().size() > limits.max_bytes + piece) finding("kept more bytes than the limit allows");
  }
  return r;
}

void check(std::string_view in, std::size_t piece, const HeadLimits& limits) {
  const HeadReader whole = read(in, in.size() + 1, limits), pieces = read(in, piece, limits);
  if (whole.state() != pieces.state() || whole.refusal().status != pieces.refusal().status ||
      whole.refusal().message != pieces.refusal().message || whole.head_size() != pieces.head_size())
    finding("the verdict depends on how the bytes were read", whole.refusal().message + " / " + pieces.refusal().message);
  if (whole.state() == HeadReader::State::refused) {
    const auto& m = whole.refusal().message;
    if (whole.refusal().status != 400 && whole.refusal().status != 431) finding("refused with another status", m);
    if (m.empty() || m.size() > 300) finding("a refusal message empty or too long", m);
    for (char c : m)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) finding("a refusal message with a raw byte", m);
    if (mo::fuzz::verbose()) std::fprintf(stderr, "refused: %d %s\n", whole.refusal().status, m.c_str());
    return;
  }
  if (whole.state() != HeadReader::State::done) return;
  recheck(in.substr(0, whole.head_size()), whole, limits);
  if (!whole.chunked()) return;
  const std::string_view body = in.substr(whole.head_size());
  ChunkedFraming at_once, bytewise;
  const bool ok = at_once.add(body);
  bool ok_bytewise = true;
  for (std::size_t i = 0; i < body.size() && ok_bytewise; i += piece) ok_bytewise = bytewise.add(body.substr(i, piece));
  if (ok != ok_bytewise || at_once.done() != bytewise.done()) finding("the chunked verdict depends on how the body was read");
  if (mo::fuzz::verbose()) std::fprintf(stderr, "chunked body: %s\n", !ok ? "broken" : at_once.done() ? "done" : "incomplete");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the read size, so that lines and CR LF pairs split across reads are covered.
  const std::size_t piece = 1 + data[0] % 17;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  check(in, piece, HeadLimits{});
  check(in, piece, HeadLimits{.max_fields = 4, .max_bytes = 256, .max_field_bytes = 64});
  return 0;
}
