// Request bodies of the OpenAI API turned into prompts and sampling parameters, and the errors a client
// sees for bad ones: status, message and the parameter named.
#include <gtest/gtest.h>

#include <filesystem>

#include "mo/io/gguf.h"
#include "mo/serve/openai_request.h"
#include "test_serve_byte_tokenizer.h"

namespace {

using mo::serve::ApiContext;
using mo::serve::ApiError;
using nlohmann::json;

class ServeRequest : public ::testing::Test {
 protected:
  ServeRequest() {
    ctx.tokenizer = &tok;
    ctx.model_name = "tiny";
    ctx.max_model_len = 64;
    ctx.max_token_bytes = 1;
  }
  // The error a body gets from /v1/completions, as "status param: message".
  std::string completion_error(const json& body) {
    try {
      mo::serve::parse_completion_request(body, ctx);
    } catch (const ApiError& e) {
      return std::to_string(e.status) + " " + e.param + ": " + e.what();
    }
    return "accepted";
  }
  mo::serve::test_support::ByteTokenizer tok;
  ApiContext ctx;
};

TEST_F(ServeRequest, CompletionPromptAndSamplingParameters) {
  auto r = mo::serve::parse_completion_request(
      {{"model", "tiny"}, {"prompt", "hi"}, {"max_tokens", 5}, {"temperature", 0}, {"top_k", 3}, {"stop", "\n"}, {"seed", 42}, {"n", 2}},
      ctx);
  EXPECT_EQ(r.prompts.at(0), (std::vector<std::int32_t>{256, 'h', 'i'}));
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_TRUE(r.params.greedy());
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.n, 2);
}

TEST_F(ServeRequest, CompletionMaxTokensDefaultsTo16AndPromptsMayBeTokenIds) {
  auto r = mo::serve::parse_completion_request({{"model", "tiny"}, {"prompt", json::array({json::array({1, 2}), json::array({3})})}}, ctx);
  EXPECT_EQ(r.params.max_tokens, 16);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1], (std::vector<std::int32_t>{3}));
}

TEST_F(ServeRequest, RequestWithoutModelIsForTheServedModel) {
  EXPECT_EQ(completion_error({{"prompt", "x"}}), "accepted");
  EXPECT_EQ(completion_error({{"model", nullptr}, {"prompt", "x"}}), "accepted");
  const auto r = mo::serve::parse_chat_request({{"messages", json::array({json{{"role", "user"}, {"content", "hi"}}})}}, ctx);
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.prompts.size(), 1u);
}

TEST_F(ServeRequest, BadParametersAreNamed) {
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"temperature", "hot"}}),
            "400 temperature: temperature: expected a number, got string");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"temperature", 3}}),
            "400 temperature: temperature: expected a number in [0, 2], got 3");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", -1}}),
            "400 max_tokens: max_tokens: expected an integer in [1, 2147483647], got -1");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"n", 1.5}}), "400 n: n: expected an integer, got number");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", 5}}),
            "400 prompt: prompt: expected a string, a list of strings, a list of token ids or a list of such lists (1 to 64 prompts)");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"bogus", 1}}),
            "400 bogus: Unrecognized request argument supplied: bogus");
  EXPECT_EQ(completion_error({{"model", "other"}, {"prompt", "x"}}),
            "404 model: The model `other` does not exist; this server serves `tiny`");
  EXPECT_EQ(completion_error({{"model", 5}, {"prompt", "x"}}), "400 model: model: expected a string, got number");
  EXPECT_EQ(completion_error(json::array()), "400 : the request body must be a JSON object, got array");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"stop", json::array({1})}}),
            "400 stop: stop: expected a list of strings, found number");
}

TEST_F(ServeRequest, PromptLongerThanMaxModelLenIsRefused) {
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", std::string(63, 'a')}}),
            "400 prompt: This model's maximum context length is 64 tokens. However, your prompt has 64 tokens, which leaves no room for "
            "the output.");
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", std::string(10, 'a')}, {"max_tokens", 60}}),
            "400 max_tokens: This model's maximum context length is 64 tokens. However, you requested 71 tokens (11 in the prompt, 60 for "
            "the output).");
  // Too many bytes to possibly fit: refused before tokenizing.
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", std::string(1000, 'a')}}),
            "400 prompt: This model's maximum context length is 64 tokens; the prompt of 1000 bytes is longer than that.");
}

TEST_F(ServeRequest, EchoWithZeroMaxTokensNeedsLogprobs) {
  auto r =
      mo::serve::parse_completion_request({{"model", "tiny"}, {"prompt", "ab"}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}}, ctx);
  EXPECT_EQ(r.params.max_tokens, 0);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(completion_error({{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 0}}),
            "400 max_tokens: max_tokens: expected an integer in [1, 2147483647], got 0");
}

TEST_F(ServeRequest, ChatUsesTheTemplateAndChecksMessages) {
  auto r = mo::serve::parse_chat_request(
      {{"model", "tiny"}, {"messages", json::array({json{{"role", "user"}, {"content", "hi"}}})}, {"logprobs", true}, {"top_logprobs", 2}},
      ctx);
  // No template: ChatML.
  EXPECT_EQ(r.prompt_texts.at(0), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_EQ(r.params.max_tokens, 64 - static_cast<int>(r.prompts[0].size()));  // the rest of the context
  try {
    mo::serve::parse_chat_request({{"model", "tiny"}, {"messages", json::array({json{{"role", "king"}, {"content", "hi"}}})}}, ctx);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.what()), "messages: messages[0].role: expected one of system, developer, user, assistant, tool");
  }
  try {
    mo::serve::parse_chat_request(
        {{"model", "tiny"}, {"messages", json::array({json{{"role", "user"}, {"content", "x"}}})}, {"top_logprobs", 2}}, ctx);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "top_logprobs");
  }
}

TEST_F(ServeRequest, ErrorBodyHasOpenAIsShape) {
  json b = mo::serve::error_body(ApiError(400, "top_p: bad", "top_p"));
  EXPECT_EQ(b, json::parse(R"({"error":{"message":"top_p: bad","type":"invalid_request_error","param":"top_p","code":null}})"));
}

// As llama-server and vLLM: "<s>" / "</s>" in a completion prompt are the special tokens, not characters; a
// prompt that starts with BOS is not given a second one; token-id prompts are taken as they are.
TEST(ServeRequestSpecialTokens, CompletionPromptsParseSpecialTokensAndAddBosOnce) {
  const std::string stories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(stories)) GTEST_SKIP() << stories << " not found";
  const auto tok = mo::tok::load_tokenizer_gguf(mo::gguf::read_metadata(stories));
  ApiContext ctx;
  ctx.tokenizer = tok.get();
  ctx.model_name = "stories";
  ctx.max_model_len = 256;
  ctx.max_token_bytes = 16;
  const std::int32_t bos = tok->special().bos.value(), eos = tok->special().eos.value();
  const auto plain = tok->encode("Once upon a time", true, false);
  ASSERT_EQ(plain.front(), bos);
  auto prompt_of = [&](const json& p) { return mo::serve::parse_completion_request({{"prompt", p}}, ctx).prompts.at(0); };
  EXPECT_EQ(prompt_of("Once upon a time"), plain);
  EXPECT_EQ(prompt_of("<s>Once upon a time"), plain);  // one BOS, not two
  auto with_eos = prompt_of("Once upon a time</s>");
  ASSERT_EQ(with_eos.size(), plain.size() + 1);
  EXPECT_EQ(with_eos.back(), eos);
  // Split as text, "</s>" would be several tokens.
  EXPECT_GT(tok->encode("Once upon a time</s>", true, false).size(), plain.size() + 1);
  EXPECT_EQ(prompt_of(json::array({bos, bos, 5})), (std::vector<std::int32_t>{bos, bos, 5}));
}

TEST_F(ServeRequest, LogitBiasMapsTokenIdsToBiases) {
  auto r = mo::serve::parse_completion_request({{"prompt", "x"}, {"logit_bias", {{"104", -100}, {"3", 5.5}}}}, ctx);  // in key order
  EXPECT_EQ(r.params.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{104, -100.0f}, {3, 5.5f}}));
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", json::object()}}), "accepted");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", {{"257", 1}}}}),
            "400 logit_bias: logit_bias: '257' is not a token id; expected keys that are integers in [0, 257)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", {{"a", 1}}}}),
            "400 logit_bias: logit_bias: 'a' is not a token id; expected keys that are integers in [0, 257)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", {{"-1", 1}}}}),
            "400 logit_bias: logit_bias: '-1' is not a token id; expected keys that are integers in [0, 257)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", {{"99999999999999999999", 1}}}}),
            "400 logit_bias: logit_bias: '99999999999999999999' is not a token id; expected keys that are integers in [0, 257)");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", {{"1", 101}}}}),
            "400 logit_bias: logit_bias: token 1: expected a bias in [-100, 100], got 101");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", {{"1", "a"}}}}),
            "400 logit_bias: logit_bias: token 1: expected a bias in [-100, 100], got \"a\"");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logit_bias", json::array()}}),
            "400 logit_bias: logit_bias: expected an object mapping token ids to biases, got array");
}

}  // namespace
