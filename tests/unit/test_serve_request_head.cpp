// The request head and chunked framing checks serve runs before httplib parses a request: what is
// refused (status and message), what passes, and that a flood of headers is refused after a bounded
// number of bytes whatever its size.
#include <gtest/gtest.h>

#include <string>

#include "../../src/serve/request_head.h"

namespace {

using mo::serve::ChunkedFraming;
using mo::serve::HeadLimits;
using mo::serve::HeadReader;
using namespace std::string_literals;

const std::string kGet = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";

// "done", or "<status> <message>" of the refusal, after the bytes were added `piece` bytes at a time.
std::string verdict(const std::string& bytes, std::size_t piece = 1 << 20, HeadLimits limits = {}) {
  HeadReader r(limits);
  for (std::size_t i = 0; i < bytes.size() && r.state() == HeadReader::State::more; i += piece)
    r.add(std::string_view(bytes).substr(i, piece));
  switch (r.state()) {
    case HeadReader::State::more: return "more";
    case HeadReader::State::done: return "done";
    case HeadReader::State::refused: return std::to_string(r.refusal().status) + " " + r.refusal().message;
  }
  return "?";
}

std::string headers(int n, const std::string& line = "X-a: b\r\n") {
  std::string s;
  for (int i = 0; i < n; ++i) s += line;
  return s;
}

TEST(ServeRequestHead, AHeadWithinTheLimitsIsDoneAndKeepsTheBodyStart) {
  HeadReader r;
  const std::string head = kGet + headers(98) + "Content-Length: 5\r\n\r\n";
  EXPECT_EQ(r.add(head + "hel"), HeadReader::State::done);
  EXPECT_EQ(r.head_size(), head.size());
  EXPECT_EQ(r.fields(), 100u);
  EXPECT_EQ(r.bytes().substr(r.head_size()), "hel");
  EXPECT_FALSE(r.chunked());
  EXPECT_EQ(verdict(head, 1), "done");  // a byte at a time: a CR at the end of a piece waits for its LF
  EXPECT_EQ(verdict(kGet + "Transfer-Encoding: Chunked\r\n\r\n"), "done");
}

TEST(ServeRequestHead, MoreThan100FieldsAre431AfterABoundedRead) {
  EXPECT_EQ(verdict(kGet + headers(99) + "\r\n"), "done");
  EXPECT_EQ(verdict(kGet + headers(100) + "\r\n"), "431 more than 100 header fields");
  // 4 M headers (32 MB) arriving in 4 KiB reads: refused at the 101st, having kept under 1 KiB.
  HeadReader r;
  const std::string block = headers(512);
  std::size_t added = 0;
  r.add(kGet);
  while (r.state() == HeadReader::State::more && added < (32u << 20)) {
    r.add(block);
    added += block.size();
  }
  EXPECT_EQ(r.state(), HeadReader::State::refused);
  EXPECT_EQ(r.refusal().status, 431);
  EXPECT_LE(r.bytes().size(), 8192u);
}

TEST(ServeRequestHead, AHeadOver64KiBOrALineOver8KiBIs431) {
  const std::string field = "X-Big: " + std::string(1000, 'v') + "\r\n";
  EXPECT_EQ(verdict(kGet + headers(60, field) + "\r\n"), "done");
  EXPECT_EQ(verdict(kGet + headers(70, field) + "\r\n"), "431 the request head is over 65536 bytes (request line and header fields)");
  EXPECT_EQ(verdict(kGet + headers(70, field)), "431 the request head is over 65536 bytes (request line and header fields)");
  EXPECT_EQ(verdict(kGet + "X-Long: " + std::string(9000, 'v') + "\r\n\r\n"), "431 header 'X-Long' is over 8192 bytes");
  EXPECT_EQ(verdict(kGet + "X-Long: " + std::string(9000, 'v'), 100), "431 header 'X-Long' is over 8192 bytes");
  EXPECT_EQ(verdict(kGet + headers(3) + "\r\n", 7, {.max_fields = 2}), "431 more than 2 header fields");
}

TEST(ServeRequestHead, FramingThatRfc9112RefusesIs400NamingTheHeader) {
  EXPECT_EQ(verdict(kGet + "Transfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n"),
            "400 whitespace between the header name 'Transfer-Encoding' and its colon");
  EXPECT_EQ(verdict(kGet + "Content-Length: +48\r\n\r\n"),
            "400 Content-Length: expected the body's size in bytes (digits only), got '+48'");
  for (const char* bad : {"-1", "4 8", "0x30", "48,48", "", "%34%38"})
    EXPECT_EQ(verdict(kGet + "Content-Length: " + bad + "\r\n\r\n").substr(0, 18), "400 Content-Length") << bad;
  EXPECT_EQ(verdict(kGet + "X-a: b\0c\r\n\r\n"s),
            "400 header 'X-a' holds the control byte 0x00 (NUL and other control characters are not allowed)");
  EXPECT_EQ(verdict(kGet + "X-a: b\r\n folded\r\n\r\n"),
            "400 a header line begins with whitespace (obsolete line folding): send each header on one line");
  EXPECT_EQ(verdict(kGet + "X-a: b\n\r\n"), "400 a line of the request head ends with a bare LF: its lines end with CR LF");
  EXPECT_EQ(verdict(kGet + "X-a: b\rc\r\n\r\n"), "400 a bare CR in the request head: its lines end with CR LF");
  EXPECT_EQ(verdict(kGet + "X-a b\r\n\r\n"), "400 the header line 'X-a b' has no colon");
  EXPECT_EQ(verdict(kGet + "X(a): b\r\n\r\n").substr(0, 30), "400 the header name 'X(a)' hol");
  EXPECT_EQ(verdict(kGet + "Transfer-Encoding: gzip, chunked\r\n\r\n"),
            "400 Transfer-Encoding: expected 'chunked', the only coding served, got 'gzip, chunked'");
  const std::string ambiguous = "400 ambiguous body framing: send one Content-Length or Transfer-Encoding: chunked, not both or two";
  EXPECT_EQ(verdict(kGet + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"), ambiguous);
  EXPECT_EQ(verdict(kGet + "Content-Length: 4\r\ncontent-length: 4\r\n\r\n"), ambiguous);
  EXPECT_EQ(verdict(kGet + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), ambiguous);
  EXPECT_EQ(verdict("GET /\0 HTTP/1.1\r\n\r\n"s), "400 the request line holds the control byte 0x00");
  EXPECT_EQ(verdict("\r\nGET / HTTP/1.1\r\n\r\n"), "400 the request line is empty");
}

TEST(ServeRequestHead, AnAuthorizationWithANulIsLeftWholeToTheKeyCheck) {
  EXPECT_EQ(verdict(kGet + "Authorization: Bearer k\0\r\n\r\n"s), "done");
}

// "done", "more" or "broken" after the body was added `piece` bytes at a time.
std::string chunked(const std::string& body, std::size_t piece = 1 << 20) {
  ChunkedFraming f;
  bool ok = true;
  for (std::size_t i = 0; i < body.size() && ok; i += piece) ok = f.add(std::string_view(body).substr(i, piece));
  return !ok ? "broken" : f.done() ? "done" : "more";
}

TEST(ServeChunkedFraming, WellFramedBodiesPassWhateverTheReads) {
  const std::string body = "5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\n\r\n";
  for (std::size_t piece : {1, 2, 3, 7, 100}) EXPECT_EQ(chunked(body, piece), "done") << piece;
  EXPECT_EQ(chunked("5\r\nhel"), "more");
  EXPECT_EQ(chunked(body + "GET / HTTP/1.1\r\n"), "done");  // what follows the body is not the body's
}

TEST(ServeChunkedFraming, ChunkDataWithoutItsCrlfOrALooseSizeIsBroken) {
  EXPECT_EQ(chunked("5\r\nhelloXYZ0\r\n\r\n"), "broken");
  EXPECT_EQ(chunked("5\r\nhello0\r\n\r\n", 1), "broken");
  for (const char* size : {"+5", " 5", "0x5", "-5", "", "g"})
    EXPECT_EQ(chunked(std::string(size) + "\r\nhello\r\n0\r\n\r\n"), "broken") << size;
  EXPECT_EQ(chunked("5\nhello\r\n0\r\n\r\n"), "broken");
  EXPECT_EQ(chunked("0\r\nX-Trailer: 1\r\n\r\n"), "broken");
  EXPECT_EQ(chunked("10000000000000000\r\n"), "broken");  // 17 hex digits: over 64 bits
}

}  // namespace
