#pragma once
// Constructors of the tokenizer implementations, called by loader.cpp, which picks one by the
// tokenizer.json model / normalizer / pre-tokenizer or by GGUF tokenizer.ggml.model.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "mo/tokenizer/tokenizer.h"

namespace mo::tok {

// Byte-level BPE (GPT-2 style byte<->unicode map, pre-tokenizer regexes). `config` is the parsed
// tokenizer_config.json or null; `source` names the file in errors.
std::unique_ptr<Tokenizer> make_bpe_from_json(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& source);
std::unique_ptr<Tokenizer> make_bpe_from_gguf(const gguf::File& file);

// SentencePiece-style BPE with "▁" for spaces and <0xXX> byte fallback.
std::unique_ptr<Tokenizer> make_spm_from_json(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& source);
std::unique_ptr<Tokenizer> make_spm_from_gguf(const gguf::File& file);

}  // namespace mo::tok
