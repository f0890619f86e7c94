#pragma once
// The model metadata every GGUF we write carries, shared by `convert` (HF -> GGUF floats) and
// `quantize --quant_method gguf`: architecture keys, tokenizer keys and the chat template.
#include <string>
#include <vector>

#include "mo/io/gguf_writer.h"
#include "mo/model/model_files.h"

namespace mo::convert {

// "llama" or "qwen2": the general.architecture llama.cpp expects for `hp`.
std::string gguf_arch_name(const model::Hparams& hp);

// Sets `<arch>.*` hyperparameters, tokenizer.ggml.* and tokenizer.chat_template on `w` from `in`. An
// HF directory's keys are built from config.json / tokenizer.json / tokenizer_config.json; a GGUF
// input's own keys are copied in file order, except the file-type and quantization keys and our own
// model-optimizer.* keys, which describe the file being written. Appends to `notes` what could not
// be written (no tokenizer).
void set_model_keys(gguf::Writer& w, const model::ModelFiles& in, std::vector<std::string>& notes);

}  // namespace mo::convert
