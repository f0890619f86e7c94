#include "mo/serve/openai_response.h"

namespace mo::serve {

using json = ResponseJson;

void ChoiceResult::add(const ChoiceEvent& e) {
  text += e.text;
  tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
  if (!e.prompt.empty()) prompt = e.prompt;
  if (!e.finish_reason.empty()) {
    finish_reason = e.finish_reason;
    prompt_tokens = e.prompt_tokens;
    completion_tokens = e.completion_tokens;
  }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
}

json request_usage(const ApiRequest& req, const std::vector<ChoiceResult>& results) {
  int prompt = 0, completion = 0;
  for (const auto& p : req.prompts) prompt += static_cast<int>(p.size());
  for (const auto& r : results) completion += r.completion_tokens;
  return usage_json(prompt, completion);
}

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
json chat_logprobs(const std::vector<TokenLogprob>& tokens, const tok::Tokenizer& tok) {
  json content = json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string text = tok.token_bytes(t.id);
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string s = tok.token_bytes(id);
      top.push_back({{"token", s}, {"logprob", lp}, {"bytes", bytes_of(s)}});
    }
    content.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; an echoed prompt's first token has null.
void add_completion_logprob(json& lp, const std::optional<TokenLogprob>& t, std::int32_t id, const tok::Tokenizer& tok, int& offset) {
  const std::string text = tok.token_bytes(id);
  lp["tokens"].push_back(text);
  lp["text_offset"].push_back(offset);
  offset += static_cast<int>(text.size());
  if (!t) {
    lp["token_logprobs"].push_back(nullptr);
    lp["top_logprobs"].push_back(nullptr);
    return;
  }
  lp["token_logprobs"].push_back(t->logprob);
  // Most likely first, as vLLM and OpenAI send it; of two ids with the same text the likelier one's value stays.
  json top = json::object();
  for (const auto& [tid, v] : t->top) top.emplace(tok.token_bytes(tid), v);
  lp["top_logprobs"].push_back(top);
}

json empty_completion_logprobs() {
  return {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
}

int prompt_of_choice(const ApiRequest& req, int choice) { return choice / req.n; }

}  // namespace

json chat_response(const ResponseIds& ids, const ApiRequest& req, const std::vector<ChoiceResult>& results, const tok::Tokenizer& tok) {
  json choices = json::array();
  for (std::size_t i = 0; i < results.size(); ++i) {
    const ChoiceResult& r = results[i];
    choices.push_back({{"index", i},
                       {"message", {{"role", "assistant"}, {"content", r.text}}},
                       {"logprobs", req.logprobs ? chat_logprobs(r.tokens, tok) : json(nullptr)},
                       {"finish_reason", r.finish_reason}});
  }
  return {{"id", ids.id},       {"object", "chat.completion"}, {"created", ids.created},
          {"model", ids.model}, {"choices", choices},          {"usage", request_usage(req, results)}};
}

json completion_response(const ResponseIds& ids, const ApiRequest& req, const std::vector<ChoiceResult>& results,
                         const tok::Tokenizer& tok) {
  json choices = json::array();
  for (std::size_t i = 0; i < results.size(); ++i) {
    const ChoiceResult& r = results[i];
    const int p = prompt_of_choice(req, static_cast<int>(i));
    std::string text = req.echo ? req.prompt_texts[p] + r.text : r.text;
    json lp = nullptr;
    if (req.logprobs) {
      lp = empty_completion_logprobs();
      int offset = 0;
      if (req.echo) {
        const auto& prompt = req.prompts[p];
        for (std::size_t k = 0; k < prompt.size(); ++k)
          add_completion_logprob(lp, k < r.prompt.size() ? r.prompt[k] : std::nullopt, prompt[k], tok, offset);
      }
      for (const TokenLogprob& t : r.tokens) add_completion_logprob(lp, t, t.id, tok, offset);
    }
    choices.push_back({{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", r.finish_reason}});
  }
  return {{"id", ids.id},       {"object", "text_completion"}, {"created", ids.created},
          {"model", ids.model}, {"choices", choices},          {"usage", request_usage(req, results)}};
}

namespace {

json chunk(const ResponseIds& ids, const char* object, const ApiRequest& req, json choice) {
  json c = {
      {"id", ids.id}, {"object", object}, {"created", ids.created}, {"model", ids.model}, {"choices", json::array({std::move(choice)})}};
  if (req.include_usage) c["usage"] = nullptr;
  return c;
}

json finish_of(const ChoiceEvent& e) { return e.finish_reason.empty() ? json(nullptr) : json(e.finish_reason); }

}  // namespace

json chat_role_chunk(const ResponseIds& ids, const ApiRequest& req, int choice) {
  return chunk(ids, "chat.completion.chunk", req,
               {{"index", choice}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
}

std::optional<json> chat_chunk(const ResponseIds& ids, const ApiRequest& req, const ChoiceEvent& e, const tok::Tokenizer& tok) {
  if (e.text.empty() && e.finish_reason.empty() && (e.tokens.empty() || !req.logprobs)) return std::nullopt;
  json delta = json::object();
  if (!e.text.empty() || e.finish_reason.empty()) delta["content"] = e.text;
  json lp = req.logprobs && !e.tokens.empty() ? chat_logprobs(e.tokens, tok) : json(nullptr);
  return chunk(ids, "chat.completion.chunk", req,
               {{"index", e.choice}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish_of(e)}});
}

std::optional<json> completion_chunk(const ResponseIds& ids, const ApiRequest& req, const ChoiceEvent& e, const tok::Tokenizer& tok) {
  if (e.text.empty() && e.finish_reason.empty() && (e.tokens.empty() || !req.logprobs)) return std::nullopt;
  json lp = nullptr;
  if (req.logprobs) {
    lp = empty_completion_logprobs();
    int offset = 0;
    for (const TokenLogprob& t : e.tokens) add_completion_logprob(lp, t, t.id, tok, offset);
  }
  return chunk(ids, "text_completion", req, {{"index", e.choice}, {"text", e.text}, {"logprobs", lp}, {"finish_reason", finish_of(e)}});
}

json usage_chunk(const ResponseIds& ids, bool chat, const json& usage) {
  return {{"id", ids.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array()},
          {"usage", usage}};
}

}  // namespace mo::serve
