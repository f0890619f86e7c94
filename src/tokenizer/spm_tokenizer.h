#pragma once
// SentencePiece-style BPE ("▁" for spaces, <0xXX> byte fallback) in the two flavours we must match
// id for id: llama.cpp's SPM tokenizer (GGUF "llama": merge by score) and Hugging Face tokenizers'
// BPE model with byte_fallback (tokenizer.json: merge by rank). Built by spm_gguf.cpp / spm_json.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mo/tokenizer/tokenizer.h"

namespace mo::tok::spm {

// Token attributes, named after llama.cpp's llama_token_attr (GGUF token types map onto them).
enum SpmAttr : uint32_t {
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,  // an added token swallows the whitespace before it
  kAttrRstrip = 1u << 8,  // ... and after it
};

struct SpmToken {
  std::string text;    // as stored: "▁the", "<0x0A>", "<s>"
  float score = 0.0f;  // llama.cpp merges the pair whose result scores highest
  uint32_t attr = kAttrNormal;
};

enum class SpmAlgorithm {
  llama_cpp,  // llm_tokenizer_spm: bigrams by score, resegment, space prefix after each special token
  hf_bpe,     // tokenizers' BPE model: merges by rank, normalizer / Metaspace in front
};

enum class PrependScheme { always, first, never };

// One step of a tokenizer.json normalizer (flattened Sequence).
struct HfNormalizeStep {
  enum Kind { prepend, replace } kind = prepend;
  std::string text;         // prepend: what is put in front; replace: the pattern
  std::string replacement;  // replace only
};

struct HfMetaspace {
  std::string replacement = "\xe2\x96\x81";
  PrependScheme scheme = PrependScheme::always;
  bool split = true;
};

// One step of a tokenizer.json decoder (flattened Sequence); applied to the list of token strings.
struct HfDecodeStep {
  enum Kind { replace, byte_fallback, fuse, strip, metaspace } kind = fuse;
  std::string pattern, content;  // replace: pattern -> content; strip: content (one character)
  int start = 0, stop = 0;       // strip: characters removed at each end
  std::string replacement;       // metaspace
  PrependScheme scheme = PrependScheme::always;
};

// A token matched verbatim in the input before the model sees the text (special and added tokens).
struct SpmAddedToken {
  std::int32_t id = 0;
  bool special = true;  // only matched with parse_special; left out by decode(skip_special)
  bool lstrip = false, rstrip = false, single_word = false;
};

struct SpmConfig {
  std::string source;  // file named in errors
  SpmAlgorithm algorithm = SpmAlgorithm::llama_cpp;
  std::string pre = "default";
  std::vector<SpmToken> tokens;
  SpecialTokens special;
  std::vector<std::int32_t> prefix_ids, suffix_ids;  // what encode(add_special) puts around the text

  // Matched in this order (llama.cpp: longest text first) or leftmost-longest (HF).
  std::vector<SpmAddedToken> added;

  // llama.cpp
  bool add_space_prefix = true;

  // Hugging Face
  std::vector<HfNormalizeStep> normalizer;
  std::optional<HfMetaspace> metaspace;
  std::unordered_map<std::string, std::int32_t> model_vocab;                        // the BPE model's own vocab
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;  // (left<<32|right) -> (rank, merged id)
  std::optional<std::int32_t> model_unk;
  bool byte_fallback = true, fuse_unk = false, ignore_merges = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
  bool has_decoder = true;  // tokens are joined with " " when tokenizer.json has no decoder
  std::vector<HfDecodeStep> decoder;
};

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(SpmConfig config);

  std::vector<std::int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = false) const override;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special = true) const override;
  std::string token_bytes(std::int32_t id) const override;
  const std::string& token_text(std::int32_t id) const override;
  std::optional<std::int32_t> token_id(std::string_view text) const override;
  bool is_special(std::int32_t id) const override;
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(cfg_.tokens.size()); }
  const SpecialTokens& special() const override { return cfg_.special; }
  std::string kind() const override { return "spm"; }
  std::string pre() const override { return cfg_.pre; }

 private:
  // A piece of the input: an added token (token >= 0) or raw text [offset, offset + length).
  struct Fragment {
    std::int32_t token = -1;
    std::size_t offset = 0, length = 0;
  };

  std::size_t check(std::int32_t id) const;
  std::optional<std::int32_t> find(std::string_view text) const;
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  std::vector<Fragment> partition_llama_cpp(std::string_view text, bool parse_special) const;
  std::vector<Fragment> partition_hf(std::string_view text, bool parse_special) const;

  // spm_encode.cpp
  void encode_llama_cpp(std::string_view text, std::vector<std::int32_t>& out) const;
  void merge_llama_cpp(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_hf_piece(std::string_view text, bool at_start, std::vector<std::int32_t>& out) const;
  void encode_hf_word(std::string_view word, std::vector<std::int32_t>& out) const;
  void merge_hf(std::string_view word, std::vector<std::int32_t>& out) const;
  std::int32_t byte_token(unsigned char byte) const;

  SpmConfig cfg_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<bool> special_;                                  // left out by decode(skip_special)
  std::int32_t byte_ids_[256];                                 // <0xXX> token per byte, -1 when missing
  std::vector<std::vector<std::size_t>> added_by_first_byte_;  // indices into cfg_.added
  // Words can be merged one at a time (cut before each "▁" that follows another character) without
  // changing the result: no token has "▁" after another character, so no merge crosses such a cut.
  // Keeps long inputs fast: the merge queue stays word-sized.
  bool split_words_ = false;
};

}  // namespace mo::tok::spm
