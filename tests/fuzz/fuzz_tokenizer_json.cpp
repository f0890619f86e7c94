// A Hugging Face tokenizer.json: model (BPE / WordPiece / Unigram), pre-tokenizer, normalizer, added tokens.
#include "fuzz_util.h"
#include "mo/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mo::fuzz::write_input(data, size, "tokenizer.json");
  mo::fuzz::refusals_are_errors([&] {
    auto t = mo::tok::load_tokenizer_json(path);
    for (const char* text : {"Hello world! 123", " <|im_start|>user\nünïcödé 🤗\t\t end", ""}) {
      const auto ids = t->encode(text, true, true);
      t->decode(ids, true);
      t->decode(ids, false);
    }
  });
  return 0;
}
