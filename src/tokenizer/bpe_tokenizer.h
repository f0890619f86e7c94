#pragma once
// The byte-level BPE Tokenizer, assembled by make_bpe_from_json / make_bpe_from_gguf.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bpe_added.h"
#include "bpe_model.h"
#include "bpe_pretokenize.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::tok {

// What a loader collects before the tokenizer is built.
struct BpeSetup {
  std::string source;  // file named in errors
  std::string pre_name;
  // Per id (holes allowed): the text as stored, and how it becomes bytes.
  enum TextForm : std::uint8_t {
    mapped = 0,  // byte-level text ("Ġthe")
    raw = 1,     // the text itself (added, control and user-defined tokens)
    byte = 2,    // "<0x0A>"
  };
  std::vector<std::string> text;
  std::vector<std::uint8_t> form;
  std::vector<std::uint8_t> special;                          // left out of decode(skip_special)
  std::unordered_map<std::string, std::int32_t> model_vocab;  // mapped text -> id, the BPE model's tokens
  std::vector<std::pair<std::string, std::string>> merges;
  BpeModelOptions model_options;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::vector<AddedToken> added;
  bool nfc = false;                          // normalizer
  std::vector<std::int32_t> prefix, suffix;  // what add_special adds around the ids
  SpecialTokens special_tokens;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeSetup setup);

  std::vector<std::int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special) const override;
  std::string token_bytes(std::int32_t id) const override;
  const std::string& token_text(std::int32_t id) const override;
  std::optional<std::int32_t> token_id(std::string_view text) const override;
  bool is_special(std::int32_t id) const override;
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(text_.size()); }
  const SpecialTokens& special() const override { return special_tokens_; }
  std::string kind() const override { return "bpe"; }
  std::string pre() const override { return pre_name_; }

 private:
  void check_id(std::int32_t id) const;
  void encode_plain(std::string_view text, bool parse_special, std::vector<std::int32_t>& out) const;
  void encode_normalized(std::string_view text, std::vector<std::int32_t>& out) const;

  std::string source_, pre_name_;
  std::vector<std::string> text_, bytes_;
  std::vector<std::uint8_t> special_;
  std::unordered_map<std::string, std::int32_t> text_to_id_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  bool nfc_ = false;
  // Added tokens matched on the raw text, and (with a normalizer) those matched after normalizing;
  // [0] without special tokens, [1] with them (parse_special).
  AddedMatcher raw_added_[2], normalized_added_[2];
  std::vector<std::int32_t> prefix_, suffix_;
  SpecialTokens special_tokens_;
};

}  // namespace mo::tok
