#pragma once
// Text <-> token ids for the models we load: byte-level BPE (GPT-2 family pre-tokenizers) and
// SentencePiece-style BPE with byte fallback, from an HF tokenizer.json or GGUF metadata.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mo::gguf {
struct File;
}

namespace mo::tok {

struct SpecialTokens {
  std::optional<std::int32_t> bos, eos, unk, pad;
  bool add_bos = false;  // encode(add_special = true) puts BOS first
  bool add_eos = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // `add_special`: add BOS/EOS as the model's config says. `parse_special`: text like "<|im_start|>"
  // becomes its special token id instead of being split as plain text.
  virtual std::vector<std::int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = false) const = 0;
  // Concatenated text of the ids; special tokens (BOS, EOS, control tokens) are left out when `skip_special`.
  virtual std::string decode(const std::vector<std::int32_t>& ids, bool skip_special = true) const = 0;
  // The raw bytes one token stands for in the output text (may be part of a UTF-8 character).
  virtual std::string token_bytes(std::int32_t id) const = 0;
  // The token's string as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>").
  virtual const std::string& token_text(std::int32_t id) const = 0;
  virtual std::optional<std::int32_t> token_id(std::string_view text) const = 0;
  virtual bool is_special(std::int32_t id) const = 0;
  virtual std::int32_t vocab_size() const = 0;
  virtual const SpecialTokens& special() const = 0;
  // "bpe" (byte-level) or "spm" (SentencePiece-style); and the pre-tokenizer name ("llama3", "qwen2", ...).
  virtual std::string kind() const = 0;
  virtual std::string pre() const = 0;
};

// A prompt's ids as llama-server (parse_special) and vLLM (HF tokenizers match added tokens in text) make
// them: "<|im_start|>" is its special token, not characters; BOS is added as the tokenizer config says,
// once: a prompt that starts with BOS itself is not given a second.
std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, std::string_view text);

// From tokenizer.json (a path to it, or a model directory holding it and tokenizer_config.json).
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);
// From GGUF metadata: tokenizer.ggml.model "llama" (SPM) or "gpt2" (byte-level BPE) with its pre type.
std::unique_ptr<Tokenizer> load_tokenizer_gguf(const gguf::File& file);

// Streams text out of ids one at a time without ever emitting half a UTF-8 character: bytes of an
// incomplete character are held until the character is complete (or flushed at the end).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special = true) : tok_(tok), skip_special_(skip_special) {}
  // Text that became complete with this token (possibly empty).
  std::string push(std::int32_t id);
  // Whatever is left at the end of the stream (invalid bytes become U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace mo::tok
