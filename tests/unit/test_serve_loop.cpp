// The serving loop with a fake model over a byte tokenizer: the model always makes byte b + 1 the most
// likely token after byte b, so greedy output from "ab" is "cdef...". What a client would get back is
// checked: text, finish reason, token counts, logprobs, errors, and that every KV block is free after.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "mo/serve/serving_loop.h"
#include "test_serve_byte_tokenizer.h"

namespace {

using namespace mo::serve;
using namespace std::chrono_literals;

constexpr int kVocab = 257;

struct Answer {
  std::vector<std::string> text;
  std::vector<std::string> finish;
  std::vector<int> completion_tokens;
  std::vector<std::vector<TokenLogprob>> tokens;
  std::vector<std::optional<TokenLogprob>> prompt;
  std::string error;
};

class ServeLoop : public ::testing::Test {
 protected:
  ServingOptions options(int max_queue_len = 64) {
    ServingOptions o;
    o.scheduler = {.num_blocks = 64,
                   .block_size = 8,
                   .max_num_seqs = 8,
                   .max_num_batched_tokens = 64,
                   .enable_chunked_prefill = true,
                   .enable_prefix_caching = true};
    o.vocab_size = kVocab;
    o.max_queue_len = max_queue_len;
    o.eos_ids = {'z'};
    return o;
  }
  SeqSpec spec(const std::string& prompt, int max_tokens, int choice = 0) {
    SeqSpec s;
    s.choice = choice;
    s.prompt = tok.encode(prompt, true, false);
    s.params.temperature = 0;
    s.params.max_tokens = max_tokens;
    s.max_total_tokens = 256;
    return s;
  }
  Answer ask(ServingLoop& loop, std::vector<SeqSpec> specs) {
    const int n = static_cast<int>(specs.size());
    auto stream = std::make_shared<RequestStream>(n);
    EXPECT_EQ(loop.submit(std::move(specs), stream), SubmitStatus::ok);
    Answer a;
    a.text.resize(n);
    a.finish.resize(n);
    a.completion_tokens.resize(n);
    a.tokens.resize(n);
    for (int finished = 0, waits = 0; finished < n && waits < 200;) {
      auto e = stream->pop(50ms);
      if (!e) {
        ++waits;
        continue;
      }
      if (!e->error.empty()) {
        a.error = e->error;
        break;
      }
      a.text[e->choice] += e->text;
      a.tokens[e->choice].insert(a.tokens[e->choice].end(), e->tokens.begin(), e->tokens.end());
      if (!e->prompt.empty()) a.prompt = e->prompt;
      if (!e->finish_reason.empty()) {
        a.finish[e->choice] = e->finish_reason;
        a.completion_tokens[e->choice] = e->completion_tokens;
        ++finished;
      }
    }
    return a;
  }
  static void wait_idle(ServingLoop& loop) {
    for (int i = 0; i < 200 && (!loop.idle() || loop.metrics().kv_blocks_used > 0); ++i) std::this_thread::sleep_for(10ms);
  }
  test_support::ByteTokenizer tok;
};

TEST_F(ServeLoop, GreedyTextStopsAtMaxTokens) {
  ServingLoop loop(test_support::next_byte_forward, tok, options());
  Answer a = ask(loop, {spec("ab", 4)});
  EXPECT_EQ(a.text[0], "cdef");
  EXPECT_EQ(a.finish[0], "length");
  EXPECT_EQ(a.completion_tokens[0], 4);
  wait_idle(loop);
  EXPECT_EQ(loop.metrics().kv_blocks_used, 0);
  EXPECT_EQ(loop.metrics().generation_tokens_total, 4);
}

TEST_F(ServeLoop, StopStringAcrossTokensEndsTheTextBeforeIt) {
  ServingLoop loop(test_support::next_byte_forward, tok, options());
  SeqSpec s = spec("ab", 10);
  s.params.stop = {"ef"};
  Answer a = ask(loop, {s});
  EXPECT_EQ(a.text[0], "cd");
  EXPECT_EQ(a.finish[0], "stop");
}

// As vLLM: EOS ends the output and stays out of the text, but is a generated token with its logprob
// (lm-evaluation-harness drops the last logprob entry of an echoed request, taking it for the generated one).
TEST_F(ServeLoop, EosEndsTheTextButKeepsItsLogprob) {
  ServingLoop loop(test_support::next_byte_forward, tok, options());
  Answer a = ask(loop, {spec("w", 10)});
  EXPECT_EQ(a.text[0], "xy");
  EXPECT_EQ(a.finish[0], "stop");
  EXPECT_EQ(a.completion_tokens[0], 3);
  ASSERT_EQ(a.tokens[0].size(), 3u);
  EXPECT_EQ(a.tokens[0][2].id, 'z');
  EXPECT_NEAR(a.tokens[0][2].logprob, 10 - std::log(std::exp(10.0) + 256), 1e-4);  // 256 other tokens at 0
}

TEST_F(ServeLoop, OutputStopsAtMaxModelLen) {
  ServingLoop loop(test_support::next_byte_forward, tok, options());
  SeqSpec s = spec("ab", 100);
  s.max_total_tokens = 6;  // BOS a b + 3
  Answer a = ask(loop, {s});
  EXPECT_EQ(a.text[0], "cde");
  EXPECT_EQ(a.finish[0], "length");
}

TEST_F(ServeLoop, ChoicesOfOneRequestAllAnswer) {
  ServingLoop loop(test_support::next_byte_forward, tok, options());
  Answer a = ask(loop, {spec("ab", 3, 0), spec("kl", 2, 1)});
  EXPECT_EQ(a.text, (std::vector<std::string>{"cde", "mn"}));
  EXPECT_EQ(a.finish, (std::vector<std::string>{"length", "length"}));
}

TEST_F(ServeLoop, LogprobsOfSampledAndPromptTokens) {
  ServingLoop loop(test_support::next_byte_forward, tok, options());
  SeqSpec s = spec("ab", 0);
  s.prompt_logprobs = true;
  s.params.logprobs = 2;
  Answer a = ask(loop, {s});
  EXPECT_EQ(a.finish[0], "length");
  EXPECT_EQ(a.completion_tokens[0], 0);
  ASSERT_EQ(a.prompt.size(), 3u);  // BOS a b
  EXPECT_FALSE(a.prompt[0]);
  const double top = 10 - std::log(std::exp(10.0) + 256);  // the favoured token under log_softmax
  const double other = -std::log(std::exp(10.0) + 256);
  ASSERT_TRUE(a.prompt[1] && a.prompt[2]);
  EXPECT_NEAR(a.prompt[1]->logprob, other, 1e-4);  // 'a' after BOS: not the favoured token (BOS+1 = 1)
  EXPECT_NEAR(a.prompt[2]->logprob, top, 1e-4);    // 'b' after 'a'
  ASSERT_EQ(a.prompt[2]->top.size(), 2u);
  EXPECT_EQ(a.prompt[2]->top[0].first, 'b');
  EXPECT_EQ(a.prompt[2]->top[1].first, 0);  // ties: the lowest id

  SeqSpec g = spec("ab", 2);
  g.params.logprobs = 1;
  Answer b = ask(loop, {g});
  ASSERT_EQ(b.tokens[0].size(), 2u);
  EXPECT_EQ(b.tokens[0][0].id, 'c');
  EXPECT_NEAR(b.tokens[0][0].logprob, top, 1e-4);
}

// A client that goes away mid-generation (cancel) gets an error instead of the 200 tokens it asked for:
// the model step in flight when it cancels is the last one, and its blocks come back.
TEST_F(ServeLoop, CancelledRequestStopsGeneratingAndFreesItsBlocks) {
  constexpr int kCancelAtStep = 5;
  std::mutex mu;
  std::condition_variable cv;
  int steps = 0;
  bool cancelled = false;
  // Holds the 5th model step until the test has cancelled, so that the cancel lands mid-generation.
  auto forward = [&](std::span<const mo::engine::SeqChunk> chunks) {
    std::unique_lock lock(mu);
    if (++steps == kCancelAtStep) {
      cv.notify_all();
      cv.wait(lock, [&] { return cancelled; });
    }
    return test_support::next_byte_forward(chunks);
  };
  ServingLoop loop(forward, tok, options());
  auto stream = std::make_shared<RequestStream>(1);
  SeqSpec s = spec("ab", 200);
  s.params.ignore_eos = true;
  ASSERT_EQ(loop.submit({s}, stream), SubmitStatus::ok);
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return steps >= kCancelAtStep; });
  }
  stream->cancel();
  {
    std::lock_guard lock(mu);
    cancelled = true;
  }
  cv.notify_all();
  std::string text, error, finish;
  for (int waits = 0; waits < 200 && error.empty() && finish.empty();) {
    auto e = stream->pop(50ms);
    if (!e) {
      ++waits;
      continue;
    }
    text += e->text;
    error = e->error;
    finish = e->finish_reason;
  }
  EXPECT_NE(error.find("the request was cancelled"), std::string::npos) << "error '" << error << "', finish '" << finish << "'";
  EXPECT_EQ(finish, "");
  // One token per step (the prefill gives the first), none after the step that was running at the cancel.
  EXPECT_LE(text.size(), static_cast<std::size_t>(kCancelAtStep)) << text;
  EXPECT_EQ(std::string("cdefghijklmnopqrstuvwxyz").rfind(text, 0), 0u) << text;
  wait_idle(loop);
  EXPECT_TRUE(loop.idle());
  EXPECT_EQ(loop.metrics().kv_blocks_used, 0);
  EXPECT_LE(loop.metrics().generation_tokens_total, kCancelAtStep);
  std::lock_guard lock(mu);
  EXPECT_EQ(steps, kCancelAtStep);
}

TEST_F(ServeLoop, FullQueueAndShutdownRefuseNewRequests) {
  ServingLoop loop(test_support::next_byte_forward, tok, options(1));
  EXPECT_EQ(loop.submit({spec("ab", 1), spec("cd", 1)}, std::make_shared<RequestStream>(2)), SubmitStatus::queue_full);
  loop.stop_accepting();
  EXPECT_EQ(loop.submit({spec("ab", 1)}, std::make_shared<RequestStream>(1)), SubmitStatus::shutting_down);
}

}  // namespace
