#pragma once
// llama.cpp's pre-tokenizer types for GGUF byte-level BPE vocabularies (tokenizer.ggml.pre), from
// src/llama-vocab.cpp: the regex list each name selects and the flags it sets.
#include <string>
#include <vector>

namespace mo::tok {

struct GgufPreType {
  std::vector<std::string> regexes;  // applied in order, each splitting every piece (Isolated)
  bool add_bos = false;              // default when tokenizer.ggml.add_bos_token is absent
  bool ignore_merges = false;
};

// nullptr for a name llama.cpp does not know or we do not implement. An empty name is "default".
const GgufPreType* find_gguf_pre_type(const std::string& name);

}  // namespace mo::tok
