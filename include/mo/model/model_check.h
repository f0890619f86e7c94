#pragma once
// The one answer to "does this model load?": generate, serve, eval, diagnose and quantize ask it before
// they run a model, convert before it rewrites one, and inspect's "loads:" line reports it. A model that
// passes runs as its hyperparameters describe it, and what convert or quantize write from it loads again.
#include <memory>

#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::model {

// Commands that turn text into tokens need a tokenizer; convert and quantize carry one along when there is one.
enum class TokenizerUse { required, optional };

// Longest tensor name accepted: llama.cpp's GGML_MAX_NAME (64, with the NUL) for GGUF; for safetensors
// far above any real checkpoint's names.
inline constexpr std::size_t kMaxGgufTensorName = 63;
inline constexpr std::size_t kMaxHfTensorName = 255;

// What ModelFiles::open leaves unchecked (it validated the hyperparameters):
// - the model is dense (mixture-of-experts models are not supported yet);
// - every tensor has a name of printable bytes within the limit above, and no dimension of 0;
// - every tensor the hyperparameters call for is there, with the shape they give and a type we read
//   (linears of a quantized HF checkpoint are left to the engine, which knows their layouts);
// - no tensor belongs to a layer at or past the block count;
// - the tokenizer loads, and every id it has is inside the model's vocabulary.
// Returns the tokenizer (null when there is none and `use` allows that). Throws Error naming the file
// and the tensor or token; UsageError for an unsupported kind of model or a missing required tokenizer.
std::unique_ptr<tok::Tokenizer> check_model(const ModelFiles& m, TokenizerUse use);

// The model's tokenizer (tokenizer.json of the directory, or the GGUF's tokenizer.ggml.* keys) without the
// checks against the model; null when it has none. For describing a model that check_model refused.
std::unique_ptr<tok::Tokenizer> load_tokenizer(const ModelFiles& m);

}  // namespace mo::model
