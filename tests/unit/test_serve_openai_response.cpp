// Response bodies as a client reads them: completions' top_logprobs most likely first (clients take the
// first key), fields in OpenAI's order.
#include <gtest/gtest.h>

#include "mo/serve/openai_response.h"
#include "test_serve_byte_tokenizer.h"

namespace {

using mo::serve::ChoiceResult;
using mo::serve::TokenLogprob;

TEST(ServeResponse, CompletionTopLogprobsAreOrderedByLikelihoodNotByText) {
  mo::serve::test_support::ByteTokenizer tok;
  mo::serve::ApiRequest req;
  req.prompts = {{256, 'x'}};
  req.prompt_texts = {"x"};
  req.logprobs = true;
  ChoiceResult r;
  r.text = ",";
  r.finish_reason = "length";
  r.completion_tokens = 1;
  // The byte tokens ',' < 'a' < 't' by text; by likelihood ',' then 't' then 'a'.
  r.tokens.push_back(TokenLogprob{',', -0.125f, {{',', -0.125f}, {'t', -4.5f}, {'a', -5.25f}}});
  const auto body = mo::serve::completion_response({"cmpl-1", 0, "tiny"}, req, {r}, tok);
  const std::string text = mo::serve::dump(body);
  EXPECT_NE(text.find(R"("top_logprobs":[{",":-0.125)"), std::string::npos) << text;
  const auto pos_t = text.find(R"("t":-4.5)"), pos_a = text.find(R"("a":-5.25)");
  ASSERT_NE(pos_t, std::string::npos) << text;
  ASSERT_NE(pos_a, std::string::npos) << text;
  EXPECT_LT(pos_t, pos_a) << text;
  // OpenAI's field order: id first, usage last.
  EXPECT_EQ(text.rfind(R"({"id":"cmpl-1","object":"text_completion")", 0), 0u) << text;
}

}  // namespace
