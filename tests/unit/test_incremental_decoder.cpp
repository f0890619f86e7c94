#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"
#include "mo/tokenizer/utf8.h"

#ifndef MO_SHARED_DATA
#error "MO_SHARED_DATA must be defined by the build as the path of the shared data folder"
#endif

namespace {

namespace fs = std::filesystem;
using mo::tok::IncrementalDecoder;
using mo::tok::Tokenizer;
using Ids = std::vector<std::int32_t>;

const std::string kData = MO_SHARED_DATA;
const std::string kLlama2 = kData + "/tokenizers/hf/llama2";  // SentencePiece-style, byte fallback
const std::string kLlama3 = kData + "/tokenizers/hf/llama3";  // byte-level BPE
const std::string kStories = kData + "/models/stories260K.gguf";
const std::string kFffd = "\xef\xbf\xbd";

// Emoji (one with a ZWJ and a variation selector), CJK, Khmer, accents: characters that SentencePiece
// vocabularies spell as several <0xXX> tokens and byte-level BPE splits across tokens.
const std::string kMixed =
    "Hello \xf0\x9f\x9a\x80 (rocket) \xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8"
    "apple\xe5\xb7\xa5\xe4\xbd\x9c "
    "\xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f \xe2\x9c\x85 na\xc3\xafve caf\xc3\xa9\n"
    "\xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b\xe1\x9e\x8f\xe1\x9f\x82 \xf0\x9f\xa6\x99";

struct Streamed {
  std::string text;
  std::size_t held = 0;  // pushes that returned nothing because a character was unfinished
};

Streamed stream(const Tokenizer& tok, const Ids& ids, bool skip_special) {
  IncrementalDecoder dec(tok, skip_special);
  Streamed s;
  for (std::int32_t id : ids) {
    const std::string piece = dec.push(id);
    EXPECT_TRUE(mo::tok::utf8_is_valid(piece)) << "push(" << id << ") returned half a character";
    if (piece.empty() && !tok.token_bytes(id).empty() && !(skip_special && tok.is_special(id))) ++s.held;
    s.text += piece;
  }
  const std::string rest = dec.flush();
  EXPECT_TRUE(mo::tok::utf8_is_valid(rest));
  s.text += rest;
  return s;
}

// Loaded once: the tokenizer.json files take a noticeable fraction of a second each to parse.
const Tokenizer& cached(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& tok = loaded[path];
  if (!tok) tok = mo::tok::load_tokenizer_json(path);
  return *tok;
}

std::int32_t id_of(const Tokenizer& tok, const std::string& text) {
  auto id = tok.token_id(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(0);
}

TEST(IncrementalDecoder, SpmJsonStreamsLikeDecode) {
  if (!fs::exists(kLlama2)) GTEST_SKIP() << kLlama2 << " not found";
  const Tokenizer* tok = &cached(kLlama2);
  const Ids ids = tok->encode(kMixed, true);
  for (bool skip : {true, false}) {
    const Streamed s = stream(*tok, ids, skip);
    EXPECT_EQ(s.text, tok->decode(ids, skip)) << "skip_special=" << skip;
    EXPECT_GT(s.held, 0u) << "the text should need byte-fallback tokens";
  }
  EXPECT_EQ(stream(*tok, ids, true).text, kMixed);
}

TEST(IncrementalDecoder, ByteLevelJsonStreamsLikeDecode) {
  if (!fs::exists(kLlama3)) GTEST_SKIP() << kLlama3 << " not found";
  const Tokenizer* tok = &cached(kLlama3);
  Ids ids = tok->encode(kMixed, false);
  ids.insert(ids.begin(), id_of(*tok, "<|begin_of_text|>"));
  for (bool skip : {true, false}) {
    const Streamed s = stream(*tok, ids, skip);
    EXPECT_EQ(s.text, tok->decode(ids, skip)) << "skip_special=" << skip;
    EXPECT_GT(s.held, 0u) << "byte-level tokens should split some characters";
  }
  EXPECT_EQ(stream(*tok, ids, true).text, kMixed);
}

TEST(IncrementalDecoder, SpmGgufStreamsTinyStories) {
  const std::string path = kData + "/text/tinystories-sample.txt";
  if (!fs::exists(kStories) || !fs::exists(path)) GTEST_SKIP() << "stories260K.gguf or tinystories-sample.txt not found";
  auto tok = mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(kStories));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str() + kMixed;
  const Ids ids = tok->encode(text, true);
  const Streamed s = stream(*tok, ids, true);
  EXPECT_EQ(s.text, tok->decode(ids));
  EXPECT_EQ(s.text, text);
}

TEST(IncrementalDecoder, SpmDropsTheLeadingSpaceOnce) {
  if (!fs::exists(kLlama2)) GTEST_SKIP() << kLlama2 << " not found";
  const Tokenizer* tok = &cached(kLlama2);
  const Ids ids = tok->encode("Hello world", true);  // <s> ▁Hello ▁world
  ASSERT_EQ(ids.size(), 3u);
  IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push(ids[0]), "");
  EXPECT_EQ(dec.push(ids[1]), "Hello");
  EXPECT_EQ(dec.push(ids[2]), " world");
  EXPECT_EQ(dec.flush(), "");

  IncrementalDecoder keep(*tok, false);
  EXPECT_EQ(keep.push(ids[0]), "<s>");
  EXPECT_EQ(keep.push(ids[1]), " Hello");
}

TEST(IncrementalDecoder, ByteFallbackCharacterAcrossIds) {
  if (!fs::exists(kLlama2)) GTEST_SKIP() << kLlama2 << " not found";
  const Tokenizer* tok = &cached(kLlama2);
  IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push(id_of(*tok,
                           "\xe2\x96\x81"
                           "a")),
            "a");
  EXPECT_EQ(dec.push(id_of(*tok, "<0xF0>")), "");
  EXPECT_EQ(dec.push(id_of(*tok, "<0x9F>")), "");
  EXPECT_EQ(dec.push(id_of(*tok, "<0x9A>")), "");
  EXPECT_EQ(dec.push(id_of(*tok, "<0x80>")), "\xf0\x9f\x9a\x80");
  EXPECT_EQ(dec.flush(), "");
}

TEST(IncrementalDecoder, InvalidBytesBecomeReplacementCharacters) {
  if (!fs::exists(kLlama2)) GTEST_SKIP() << kLlama2 << " not found";
  const Tokenizer* tok = &cached(kLlama2);
  IncrementalDecoder dec(*tok);
  // A continuation byte with no lead can never complete: replaced at once, the text goes on.
  EXPECT_EQ(dec.push(id_of(*tok, "<0x80>")), kFffd);
  EXPECT_EQ(dec.push(id_of(*tok,
                           "\xe2\x96\x81"
                           "a")),
            " a");
  // An unfinished character at the end of the stream: held, then one U+FFFD from flush.
  EXPECT_EQ(dec.push(id_of(*tok, "<0xE4>")), "");
  EXPECT_EQ(dec.push(id_of(*tok, "<0xB8>")), "");
  EXPECT_EQ(dec.flush(), kFffd);
  EXPECT_EQ(dec.flush(), "");
}

}  // namespace
