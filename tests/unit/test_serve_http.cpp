// serve's HTTP front end through HttpServer::answer (one connection's bytes in, its answer out), over a
// fake model: the status and OpenAI error a client gets for request heads past the limits, for framing
// RFC 9112 refuses, and for its API key; well-framed requests still answered 200.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "mo/serve/http_server.h"
#include "mo/serve/serving_loop.h"
#include "test_serve_byte_tokenizer.h"

namespace {

using namespace mo::serve;
using namespace std::string_literals;

ServingOptions options() {
  ServingOptions o;
  o.scheduler = {.num_blocks = 64,
                 .block_size = 8,
                 .max_num_seqs = 4,
                 .max_num_batched_tokens = 64,
                 .enable_chunked_prefill = true,
                 .enable_prefix_caching = true};
  o.vocab_size = 257;
  o.max_queue_len = 16;
  o.eos_ids = {'z'};
  return o;
}

const std::string kBody = R"({"prompt": "ab", "max_tokens": 2, "temperature": 0})";
const std::string kPost = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n";
const std::string kLength = "Content-Length: " + std::to_string(kBody.size()) + "\r\n";

class ServeHttp : public ::testing::Test {
 protected:
  ServeHttp() : loop(test_support::next_byte_forward, tok, options()), http(loop, context(), {.api_key = "k"}) {}
  ApiContext context() {
    ApiContext ctx;
    ctx.tokenizer = &tok;
    ctx.model_name = "tiny";
    ctx.max_model_len = 64;
    ctx.max_token_bytes = 1;
    return ctx;
  }
  // "<status> <error message>", or "<status>" when the answer is not an error.
  std::string ask(const std::string& raw) {
    const std::string answer = http.answer(raw);
    if (answer.rfind("HTTP/1.1 ", 0) != 0) return "no answer: " + answer.substr(0, 80);
    const std::string status = answer.substr(9, 3);
    const auto body = nlohmann::json::parse(answer.substr(answer.find("\r\n\r\n") + 4), nullptr, false);
    if (!body.is_object() || !body.contains("error")) return status;
    return status + " " + body["error"]["message"].get<std::string>();
  }
  test_support::ByteTokenizer tok;
  ServingLoop loop;
  HttpServer http;
};

std::string fields(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "X-a: b\r\n";
  return s;
}

TEST_F(ServeHttp, HeaderCountAndSizeAreBoundedBeforeTheApiKey) {
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(ask(get + "Authorization: Bearer k\r\n" + fields(98) + "\r\n"), "200");
  EXPECT_EQ(ask(get + "Authorization: Bearer k\r\n" + fields(99) + "\r\n"), "431 more than 100 header fields");
  // Without the key the limits answer first: the server has not kept the flood to then say 401.
  EXPECT_EQ(ask(get + fields(5000) + "\r\n"), "431 more than 100 header fields");
  std::string big;
  for (int i = 0; i < 70; ++i) big += "X-Big: " + std::string(1000, 'v') + "\r\n";
  EXPECT_EQ(ask(get + big + "\r\n"), "431 the request head is over 65536 bytes (request line and header fields)");
  EXPECT_EQ(ask(get + "X-Long: " + std::string(9000, 'v') + "\r\n\r\n"), "431 header 'X-Long' is over 8192 bytes");
}

TEST_F(ServeHttp, LenientFramingIs400) {
  EXPECT_EQ(ask(kPost + kLength + "\r\n" + kBody), "200");
  EXPECT_EQ(ask(kPost + "Transfer-Encoding : chunked\r\n" + kLength + "\r\n" + kBody),
            "400 whitespace between the header name 'Transfer-Encoding' and its colon");
  EXPECT_EQ(ask(kPost + "Content-Length: +" + std::to_string(kBody.size()) + "\r\n\r\n" + kBody),
            "400 Content-Length: expected the body's size in bytes (digits only), got '+51'");
  EXPECT_EQ(ask(kPost + "X-a: b\0c\r\n"s + kLength + "\r\n" + kBody),
            "400 header 'X-a' holds the control byte 0x00 (NUL and other control characters are not allowed)");
  EXPECT_EQ(ask(kPost + "X-a: b\r\n c\r\n" + kLength + "\r\n" + kBody),
            "400 a header line begins with whitespace (obsolete line folding): send each header on one line");
  EXPECT_EQ(ask(kPost + kLength + "Transfer-Encoding: chunked\r\n\r\n" + kBody).substr(0, 30), "400 ambiguous body framing: se");
}

TEST_F(ServeHttp, ARequestWithoutContentLengthOrChunkedHasNoBody) {
  // httplib read such a body on to the end of the connection: the client hung until its read timed out.
  EXPECT_EQ(ask(kPost + "\r\n" + kBody).substr(0, 60), "400 the request body is not valid JSON: [json.exception.pars");
  EXPECT_EQ(ask("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"), "200");
}

TEST_F(ServeHttp, ChunkDataWithoutItsCrlfIs400) {
  const std::string chunked = kPost + "Transfer-Encoding: chunked\r\n\r\n";
  const std::string size = fmt::format("{:x}", kBody.size());
  EXPECT_EQ(ask(chunked + size + "\r\n" + kBody + "\r\n0\r\n\r\n"), "200");
  EXPECT_EQ(ask(chunked + size + ";ext=1\r\n" + kBody + "\r\n0\r\n\r\n"), "200");
  const std::string refused =
      "400 the chunked request body is malformed or incomplete: each chunk is its size in hex, CR LF, its data, CR LF; then 0, CR LF, CR "
      "LF";
  EXPECT_EQ(ask(chunked + size + "\r\n" + kBody + "XYZ0\r\n\r\n"), refused);
  EXPECT_EQ(ask(chunked + "+" + size + "\r\n" + kBody + "\r\n0\r\n\r\n"), refused);
  EXPECT_EQ(ask(chunked + size + "\r\n" + kBody + "\r\n1\r\n\r\r"), refused);  // the connection ends inside the body
}

TEST_F(ServeHttp, TheApiKeyIsComparedWhole) {
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(ask(get + "Authorization: Bearer k\r\n\r\n"), "200");
  const std::string refused = "401 Incorrect API key provided; send it as 'Authorization: Bearer <key>'";
  EXPECT_EQ(ask(get + "Authorization: Bearer k\0\r\n\r\n"s), refused);
  EXPECT_EQ(ask(get + "Authorization: Bearer k\0garbage\r\n\r\n"s), refused);
  EXPECT_EQ(ask(get + "Authorization: Bearer k%00\r\n\r\n"), refused);  // httplib decodes %XX in header values
  EXPECT_EQ(ask(get + "Authorization: Bearer kk\r\n\r\n"), refused);
}

}  // namespace
