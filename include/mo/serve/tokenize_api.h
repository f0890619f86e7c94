#pragma once
// vLLM's tokenizer endpoints, which lm-evaluation-harness's `local-completions` finds on its own
// (tokenizer_backend "remote") instead of needing the model's Hugging Face tokenizer:
//   POST /tokenize   {"prompt": str | "messages": [...], "add_special_tokens", "add_generation_prompt", "return_token_strs"}
//                    -> {"count", "max_model_len", "tokens", "token_strs"}
//   POST /detokenize {"tokens": [ids]} -> {"prompt": str}
//   GET  /tokenizer_info -> {"tokenizer_class", "bos_token", "eos_token", "pad_token", "unk_token", "chat_template", ...}
// Prompts are tokenized as /v1/completions and /v1/chat/completions do: special tokens in the text are parsed.
#include <nlohmann/json.hpp>

#include "mo/serve/openai_request.h"

namespace mo::serve {

nlohmann::json tokenize_response(const nlohmann::json& body, const ApiContext& ctx);
nlohmann::json detokenize_response(const nlohmann::json& body, const ApiContext& ctx);
nlohmann::json tokenizer_info(const ApiContext& ctx);

}  // namespace mo::serve
