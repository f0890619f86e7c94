#pragma once
// Tokenizer metadata both ways between GGUF (tokenizer.ggml.* keys) and Hugging Face files
// (tokenizer.json, tokenizer_config.json, special_tokens_map.json), so a model converted either way
// tokenizes text to the same ids:
//   GGUF -> HF follows transformers' GGUF loader (integrations/ggml.py, GGUFLlamaConverter) and
//     LlamaConverter: SentencePiece-style vocabularies become a BPE model with byte fallback whose
//     merges are derived from the scores; byte-level vocabularies get llama.cpp's pre-tokenizer
//     regexes for their tokenizer.ggml.pre as Split pre-tokenizers.
//   HF -> GGUF follows llama.cpp's convert_hf_to_gguf.py (_set_vocab_llama_hf, _set_vocab_gpt2) and
//     gguf-py's SpecialVocab; the pre-tokenizer name is found from the regexes in tokenizer.json
//     (llama.cpp hashes token ids of a probe text instead, which needs the HF runtime).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/io/gguf.h"

namespace mo::tok {

struct HfTokenizerFiles {
  nlohmann::json tokenizer_json;      // tokenizer.json (HF `tokenizers` format, version 1.0)
  nlohmann::json tokenizer_config;    // tokenizer_config.json
  nlohmann::json special_tokens_map;  // special_tokens_map.json
};

// tokenizer.ggml.model "llama" (SentencePiece-style) or "gpt2" (byte-level BPE) to HF files.
// Throws Error naming the file and key for a missing or malformed key, another tokenizer model, or
// a tokenizer.ggml.pre whose pre-tokenizer cannot be written as HF Split regexes.
HfTokenizerFiles hf_tokenizer_from_gguf(const gguf::File& f);

// The tokenizer.ggml.* keys (and tokenizer.chat_template) for a tokenizer.json, in the order
// convert_hf_to_gguf.py writes them. `tokenizer_config` may be null. The token list is padded with
// "[PAD<id>]" tokens of type UNUSED up to `vocab_size` (config.json's; 0 or less: no padding).
// Throws Error for a tokenizer model, normalizer or pre-tokenizer llama.cpp cannot express (the
// message lists the pre-tokenizer's patterns and the names known), duplicate tokens, or a
// vocabulary larger than `vocab_size`.
std::vector<std::pair<std::string, gguf::Value>> gguf_tokenizer_kv_from_hf(const nlohmann::json& tokenizer_json,
                                                                           const nlohmann::json& tokenizer_config, std::int64_t vocab_size);

// Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into `dir` (created when
// missing). Throws Error naming the file that could not be written.
void write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir);

}  // namespace mo::tok
