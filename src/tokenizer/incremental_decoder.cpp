#include <string>

#include "mo/tokenizer/tokenizer.h"
#include "mo/tokenizer/utf8.h"

namespace mo::tok {

std::string IncrementalDecoder::push(std::int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  std::string bytes = tok_.token_bytes(id);
  if (bytes.empty()) return {};
  if (first_) {
    first_ = false;
    // SentencePiece decoders drop the space that encoding put in front of the text. Whatever
    // decode() removes from the first token on its own, we remove here, but only when it is spaces.
    const std::string alone = tok_.decode({id}, skip_special_);
    if (alone.size() < bytes.size() && bytes.compare(bytes.size() - alone.size(), alone.size(), alone) == 0 &&
        bytes.find_first_not_of(' ') >= bytes.size() - alone.size()) {
      bytes.erase(0, bytes.size() - alone.size());
    }
  }
  pending_ += bytes;
  // Complete characters go out now (ill-formed bytes as U+FFFD); an unfinished one waits.
  const std::size_t keep = utf8_incomplete_tail(pending_);
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace mo::tok
