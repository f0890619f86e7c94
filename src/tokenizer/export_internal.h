#pragma once
// Shared pieces of the GGUF <-> Hugging Face tokenizer conversion (tokenizer_export.h).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/io/gguf.h"

namespace mo::tok::hfx {

// GGUF tokenizer.ggml.token_type values (gguf-py TokenType, llama.cpp llama_token_type).
enum TokenType : std::int32_t {
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

inline constexpr std::string_view kSpmSpace = "\xe2\x96\x81";  // "▁", SentencePiece's space

// One llama.cpp tokenizer.ggml.pre name and the flags llama-vocab.cpp sets for it.
struct PreName {
  const char* name;
  bool clean_spaces;  // detokenizer cleans " ," etc. (HF clean_up_tokenization_spaces)
  bool add_bos;       // BOS added when tokenizer.ggml.add_bos_token is absent
};

// Pre-type names that share one pre-tokenizer (regex list and ignore_merges); they differ only in
// flags, so the HF side cannot tell them apart.
struct PreFamily {
  std::vector<PreName> names;                      // the first is the canonical name
  std::vector<std::string> regexes;                // Split patterns (Isolated) written to tokenizer.json
  std::vector<std::vector<std::string>> variants;  // other pattern lists that mean the same
  bool ignore_merges = false;                      // a whole pre-token in the vocabulary is one token
};

// The family holding `name` (nullptr when unknown); `*which` is set to the entry for `name`.
const PreFamily* find_pre_family(std::string_view name, const PreName** which = nullptr);
// The families whose regexes or a variant equal `patterns` (canonical_regex'd) with `ignore_merges`.
std::vector<const PreFamily*> match_pre_families(const std::vector<std::string>& patterns, bool ignore_merges);
// The canonical names of every family, for error messages.
std::vector<std::string> known_pre_names();

// The regex HF's ByteLevel(use_regex=true) splits with (GPT-2's).
extern const std::string kGpt2Regex;
// Placeholder pattern for HF's Punctuation pre-tokenizer (behavior "Contiguous").
extern const std::string kPunctuationContiguous;

// A regex with every \x{HHHH} escape of a non-ASCII code point written as the UTF-8 character, so
// patterns can be compared with the literal ones in published tokenizer.json files.
std::string canonical_regex(std::string_view pattern);

// Byte offsets where each UTF-8 character of `s` starts (Python str indexing).
std::vector<std::size_t> utf8_char_starts(std::string_view s);

// transformers' generate_merges(vocab, vocab_scores): every split of every token into two tokens,
// ordered by the token's score (then longer left part, then longer right part), highest first.
std::vector<std::pair<std::string, std::string>> spm_merges_from_scores(const std::vector<std::string>& tokens,
                                                                        const std::vector<float>& scores);

// SentencePiece-style scores for `tokens` whose order of merged tokens reproduces `merges`' ranks:
// a NORMAL token scores -(id - first NORMAL id), as SentencePiece BPE training assigns them, lowered
// where needed so each merge result scores below every result of an earlier merge.
std::vector<float> spm_scores_from_merges(const std::vector<std::string>& tokens, const std::vector<std::int32_t>& types,
                                          const std::vector<std::pair<std::string, std::string>>& merges);

// convert_hf_to_gguf.py does_token_look_special: "<|...|>", "<｜...｜>", "<pad>", "<unused...>", ...
bool token_looks_special(std::string_view token);

// An added_tokens entry of tokenizer.json (also the added_tokens_decoder value, without "id").
nlohmann::json added_token_json(std::int64_t id, const std::string& content, bool special);

// tokenizers' merge formats: "a b" strings or ["a", "b"] pairs. Throws Error naming `source`.
std::vector<std::pair<std::string, std::string>> parse_hf_merges(const nlohmann::json& merges, const std::string& source);

// The tokenizer keys of a GGUF file, read and checked once.
struct GgufVocab {
  std::string path;
  std::string model;               // tokenizer.ggml.model
  std::optional<std::string> pre;  // tokenizer.ggml.pre
  std::vector<std::string> tokens;
  std::vector<float> scores;                       // empty when absent
  std::vector<std::int32_t> types;                 // NORMAL when absent
  std::vector<std::string> merges;                 // "left right", empty when absent
  std::optional<std::int32_t> bos, eos, unk, pad;  // only ids inside the vocabulary
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::optional<std::string> chat_template;
  std::vector<std::pair<std::string, std::string>> named_chat_templates;  // tokenizer.chat_template.<name>
  std::optional<std::int64_t> context_length;                             // <arch>.context_length
};
GgufVocab read_gguf_vocab(const gguf::File& f);

// What hf_tokenizer_from_gguf decided about a GGUF vocabulary.
struct HfPlan {
  bool spm = false;                   // tokenizer.ggml.model "llama"; otherwise "gpt2"
  std::string pre;                    // gpt2: llama.cpp pre-tokenizer name
  const PreFamily* family = nullptr;  // gpt2: its Split regexes
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;  // spm: "▁" put in front of the text
  bool clean_spaces = false;     // llama.cpp's clean_spaces for this vocabulary
};
nlohmann::json hf_tokenizer_config(const GgufVocab& v, const HfPlan& plan);
nlohmann::json hf_special_tokens_map(const GgufVocab& v);

// HF -> GGUF pieces. `source` names tokenizer.json in errors.
using KeyValues = std::vector<std::pair<std::string, gguf::Value>>;
// llama.cpp's tokenizer.ggml.pre for a byte-level tokenizer.json, found from its pre-tokenizer
// patterns and model.ignore_merges; among names sharing those, the one tokenizer_config.json names
// ("gguf_tokenizer_pre", written by hf_tokenizer_from_gguf) or whose clean_spaces matches its
// clean_up_tokenization_spaces. Throws Error listing the patterns when none matches.
std::string gguf_pre_from_hf(const nlohmann::json& tokenizer_json, const nlohmann::json& config, const std::string& source);
// Special token ids, add_bos/add_eos and chat templates, as gguf-py's SpecialVocab reads them.
void append_special_kv(const nlohmann::json& tokenizer_json, const nlohmann::json& config, std::size_t n_tokens, KeyValues& out);
// The token id for `text`: an added token with that content first, then the model vocabulary.
std::optional<std::int64_t> hf_token_id(const nlohmann::json& tokenizer_json, const std::string& text);
// The content of tokenizer_config.json's `key` ("bos_token": "<s>" or {"content": "<s>", ...}).
std::optional<std::string> config_token(const nlohmann::json& config, const char* key);

}  // namespace mo::tok::hfx
