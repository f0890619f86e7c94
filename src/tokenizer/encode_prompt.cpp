#include "mo/tokenizer/tokenizer.h"

namespace mo::tok {

std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, std::string_view text) {
  std::vector<std::int32_t> ids = tok.encode(text, true, true);
  const SpecialTokens& sp = tok.special();
  if (sp.add_bos && sp.bos && ids.size() >= 2 && ids[0] == *sp.bos && ids[1] == *sp.bos) ids.erase(ids.begin());
  return ids;
}

}  // namespace mo::tok
