#pragma once
// stories260K's tokenizer (512-token SentencePiece), for targets whose input is tokenized.
#include "fuzz_util.h"
#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::fuzz {

inline const tok::Tokenizer& stories_tokenizer() {
  static const gguf::File file = gguf::read_metadata(shared_model("stories260K.gguf"));
  static const std::unique_ptr<tok::Tokenizer> t = tok::load_tokenizer_gguf(file);
  return *t;
}

}  // namespace mo::fuzz
