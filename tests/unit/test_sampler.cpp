#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/engine/sampler.h"

namespace {

using mo::engine::Sampler;
using mo::engine::SamplingParams;

const std::vector<std::int32_t> kNone;

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Deterministic logits in [-8, 8).
std::vector<float> pseudo_logits(std::size_t vocab, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> out(vocab);
  for (float& l : out) l = static_cast<float>(gen() % 16000) / 1000.0f - 8.0f;
  return out;
}

std::vector<double> softmax(const std::vector<double>& x) {
  double m = x[0], sum = 0;
  for (double v : x) m = std::max(m, v);
  std::vector<double> out;
  for (double v : x) sum += std::exp(v - m);
  for (double v : x) out.push_back(std::exp(v - m) / sum);
  return out;
}

void expect_probs(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "token " << i;
}

TEST(Sampler, GreedyReturnsArgmaxAndLowestIdOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  for (double t : {0.0, 1e-6}) {
    Sampler s(SamplingParams{.temperature = t}, 7);
    EXPECT_EQ(s.sample(logits, kNone, kNone).id, 1) << "temperature " << t;
    expect_probs(s.distribution(logits, kNone, kNone), {0, 1, 0, 0});
  }
}

TEST(Sampler, GreedyIgnoresTopKTopPMinP) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f};
  Sampler s(SamplingParams{.temperature = 0, .top_k = 2, .top_p = 0.1, .min_p = 0.9}, 0);
  EXPECT_EQ(s.sample(logits, kNone, kNone).id, 1);
}

TEST(Sampler, TemperatureDividesTheLogits) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  for (double t : {0.5, 1.0, 2.0}) {
    Sampler s(SamplingParams{.temperature = t}, 0);
    expect_probs(s.distribution(logits, kNone, kNone), softmax({0.0 / t, 1.0 / t, 2.0 / t}));
  }
  // Lower temperature sharpens: the top token's probability falls as temperature rises.
  Sampler cold(SamplingParams{.temperature = 0.5}, 0);
  Sampler hot(SamplingParams{.temperature = 2.0}, 0);
  EXPECT_GT(cold.distribution(logits, kNone, kNone)[2], 0.86);
  EXPECT_LT(hot.distribution(logits, kNone, kNone)[2], 0.51);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  const std::vector<float> logits = pseudo_logits(1000, 3);
  const auto argmax = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  ASSERT_EQ(std::count(logits.begin(), logits.end(), logits[argmax]), 1);  // else top_k 1 keeps the tie
  Sampler s(SamplingParams{.temperature = 1.5, .top_k = 1}, 99);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(s.sample(logits, kNone, kNone).id, argmax) << "draw " << i;
}

TEST(Sampler, TopKKeepsTheKLargestLogitsAndTiesAtTheKth) {
  const std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
  Sampler two(SamplingParams{.top_k = 2}, 0);
  expect_probs(two.distribution(logits, kNone, kNone), {0, 1 / (1 + std::exp(-1.0)), 0, 1 / (1 + std::exp(1.0)), 0});
  // As vLLM: the mask is "logit < k-th largest", so a tie at the k-th value keeps all of them.
  Sampler tie(SamplingParams{.top_k = 2}, 0);
  const std::vector<float> tied = {5.0f, 4.0f, 4.0f, 1.0f};
  const auto d = tie.distribution(tied, kNone, kNone);
  EXPECT_GT(d[1], 0);
  EXPECT_GT(d[2], 0);
  EXPECT_EQ(d[3], 0);
  // -1 and 0 keep every token.
  for (int k : {-1, 0, 5}) {
    Sampler all(SamplingParams{.top_k = k}, 0);
    for (float prob : all.distribution(logits, kNone, kNone)) EXPECT_GT(prob, 0) << "top_k " << k;
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetWithMassAtLeastP) {
  // Ranked: id1 0.4, id2 0.3, id3 0.2, id0 0.1.
  const std::vector<float> logits = log_of({0.1, 0.4, 0.3, 0.2});
  auto dist = [&](double top_p) { return Sampler(SamplingParams{.top_p = top_p}, 0).distribution(logits, kNone, kNone); };
  expect_probs(dist(0.3), {0, 1, 0, 0});                     // 0.4 >= 0.3
  expect_probs(dist(0.65), {0, 4 / 7.0, 3 / 7.0, 0});        // 0.4 < 0.65 <= 0.7
  expect_probs(dist(0.75), {0, 4 / 9.0, 3 / 9.0, 2 / 9.0});  // 0.7 < 0.75 <= 0.9
  expect_probs(dist(0.95), {0.1, 0.4, 0.3, 0.2});            // 0.9 < 0.95
  expect_probs(dist(1.0), {0.1, 0.4, 0.3, 0.2});
}

// What top-p keeps, from a full sort: ranked by logit (ties -> lower id), tokens while the mass above < top_p.
std::vector<double> top_p_reference(const std::vector<float>& logits, double top_p) {
  const std::vector<double> probs = softmax(std::vector<double>(logits.begin(), logits.end()));
  std::vector<std::int32_t> ids(logits.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  std::sort(ids.begin(), ids.end(), [&](auto a, auto b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<double> out(logits.size(), 0.0);
  double mass = 0;
  for (std::int32_t id : ids) {
    if (mass >= top_p) break;
    out[id] = probs[id];
    mass += probs[id];
  }
  for (double& p : out) p /= mass;
  return out;
}

TEST(Sampler, TopPOnALargeVocabMatchesAFullSort) {
  // Fine-grained logits, and logits on 8 levels, whose ties fill the boundary bucket with hundreds of tokens.
  std::vector<float> coarse = pseudo_logits(4000, 12);
  for (float& l : coarse) l = std::floor(l);
  for (const auto& logits : {pseudo_logits(5000, 11), coarse})
    for (double top_p : {0.05, 0.5, 0.9, 0.999}) {
      const auto got = Sampler(SamplingParams{.top_p = top_p}, 0).distribution(logits, kNone, kNone);
      const auto want = top_p_reference(logits, top_p);
      for (std::size_t i = 0; i < logits.size(); ++i) {
        ASSERT_EQ(got[i] > 0, want[i] > 0) << "token " << i << " top_p " << top_p;
        ASSERT_NEAR(got[i], want[i], 1e-6) << "token " << i << " top_p " << top_p;
      }
    }
}

TEST(Sampler, TopPTiesGoToTheLowerIds) {
  // 1000 equal tokens: a quarter of the mass is exactly the first 250 ids.
  const std::vector<float> logits(1000, 0.0f);
  const auto got = Sampler(SamplingParams{.top_p = 0.25}, 0).distribution(logits, kNone, kNone);
  for (std::size_t i = 0; i < logits.size(); ++i) ASSERT_FLOAT_EQ(got[i], i < 250 ? 1 / 250.0f : 0.0f) << "token " << i;
}

TEST(Sampler, TopKOnALargeVocabKeepsTheKLargest) {
  const std::vector<float> logits = pseudo_logits(5000, 13);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  for (int k : {1, 7, 100, 4999}) {
    const auto got = Sampler(SamplingParams{.top_k = k}, 0).distribution(logits, kNone, kNone);
    for (std::size_t i = 0; i < logits.size(); ++i)
      ASSERT_EQ(got[i] > 0, logits[i] >= sorted[static_cast<std::size_t>(k - 1)]) << "token " << i << " top_k " << k;
  }
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTopProbability) {
  const std::vector<float> logits = log_of({0.5, 0.3, 0.15, 0.05});
  Sampler quarter(SamplingParams{.min_p = 0.25}, 0);  // threshold 0.125
  expect_probs(quarter.distribution(logits, kNone, kNone), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  // min-p looks at the probabilities after temperature: at T=2 the ratios to the top are sqrt(p / 0.5),
  // {1, 0.77, 0.55, 0.32}, so min_p 0.4 drops only id 3 (at T=1 it would also drop id 2, ratio 0.3).
  Sampler warm(SamplingParams{.temperature = 2.0, .min_p = 0.4}, 0);
  const double w0 = 1, w1 = std::sqrt(0.6), w2 = std::sqrt(0.3), sum = w0 + w1 + w2;
  expect_probs(warm.distribution(logits, kNone, kNone), {w0 / sum, w1 / sum, w2 / sum, 0});
  Sampler cool(SamplingParams{.min_p = 0.4}, 0);
  expect_probs(cool.distribution(logits, kNone, kNone), {0.5 / 0.8, 0.3 / 0.8, 0, 0});
}

TEST(Sampler, MinPTopKAndTopPCombine) {
  // min_p 0.25 drops id 3 (0.05 / 0.4 = 0.125); top_k 2 keeps ids 1, 2; top_p 0.5 of {0.4, 0.3} keeps id 1.
  const std::vector<float> logits = log_of({0.2, 0.4, 0.3, 0.05, 0.05});
  Sampler s(SamplingParams{.top_k = 2, .min_p = 0.25}, 0);
  expect_probs(s.distribution(logits, kNone, kNone), {0, 4 / 7.0, 3 / 7.0, 0, 0});
  Sampler all3(SamplingParams{.top_k = 2, .top_p = 0.5, .min_p = 0.25}, 0);
  expect_probs(all3.distribution(logits, kNone, kNone), {0, 1, 0, 0, 0});
}

TEST(SamplerPenalties, RepetitionPenaltyCoversPromptAndOutputOnce) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f, 0.0f};
  const std::vector<std::int32_t> prompt = {0, 1, 0}, output = {2, 5, 2};
  mo::engine::apply_penalties(logits, SamplingParams{.repetition_penalty = 2.0}, prompt, output);
  // Positive logits halved, negative doubled, zero stays; token 0 twice in the prompt still counts once.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.25f, 3.0f, 1.0f, 0.0f}));
}

TEST(SamplerPenalties, FrequencyPenaltyCountsOutputTokensOnly) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<std::int32_t> prompt = {0, 0}, output = {1, 2, 2, 2};
  mo::engine::apply_penalties(logits, SamplingParams{.frequency_penalty = 0.5}, prompt, output);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.5f, -0.5f, 1.0f}));
}

TEST(SamplerPenalties, PresencePenaltyOncePerOutputToken) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<std::int32_t> prompt = {0}, output = {1, 2, 2, 2};
  mo::engine::apply_penalties(logits, SamplingParams{.presence_penalty = 0.25}, prompt, output);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.75f, 0.75f, 1.0f}));
  // Negative values encourage repeats.
  std::vector<float> again = {1.0f, 1.0f};
  mo::engine::apply_penalties(again, SamplingParams{.presence_penalty = -2.0}, kNone, std::vector<std::int32_t>{1});
  EXPECT_EQ(again, (std::vector<float>{1.0f, 3.0f}));
}

TEST(SamplerPenalties, AllThreeApplyRepetitionFirst) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  const std::vector<std::int32_t> prompt = {0, 1}, output = {1, 2, 2};
  mo::engine::apply_penalties(logits, SamplingParams{.repetition_penalty = 2.0, .presence_penalty = 0.25, .frequency_penalty = 0.5}, prompt,
                              output);
  // id1: -1 * 2 - 0.5 * 1 - 0.25 = -2.75; id2: 0.5 / 2 - 0.5 * 2 - 0.25 = -1.0.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.75f, -1.0f, 3.0f, 1.0f}));
}

TEST(SamplerPenalties, ChangeTheGreedyChoiceButNotTheLogprob) {
  const std::vector<float> logits = {3.0f, 2.9f};
  Sampler s(SamplingParams{.temperature = 0, .presence_penalty = 0.5}, 0);
  const auto tok = s.sample(logits, kNone, std::vector<std::int32_t>{0});
  EXPECT_EQ(tok.id, 1);
  EXPECT_NEAR(tok.logprob, std::log(softmax({3.0, 2.9})[1]), 1e-6);  // raw, before the penalty
}

TEST(SamplerPenalties, RejectTokenIdsOutsideTheVocab) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  try {
    mo::engine::apply_penalties(logits, SamplingParams{.repetition_penalty = 1.5}, std::vector<std::int32_t>{7}, kNone);
    FAIL();
  } catch (const mo::Error& e) {
    EXPECT_STREQ(e.what(), "sampler: token id 7 is outside the vocabulary [0, 4)");
  }
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f}));
  // The scratch counters stay clean after the error: a valid call afterwards penalises exactly once.
  mo::engine::apply_penalties(logits, SamplingParams{.repetition_penalty = 2.0}, std::vector<std::int32_t>{3}, kNone);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.0f, 1.0f, 0.5f}));
}

TEST(SamplerLogitBias, BansAndForcesATokenWithoutChangingTheLogprobs) {
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  Sampler ban(SamplingParams{.temperature = 0, .logprobs = 2, .logit_bias = {{0, -100.0f}}}, 0);
  const auto banned = ban.sample(logits, kNone, kNone);
  EXPECT_EQ(banned.id, 1);
  // Raw logprobs, as vLLM's default: the bias changes the choice, not what the model said.
  EXPECT_NEAR(banned.logprob, std::log(softmax({3, 2, 1, 0})[1]), 1e-6);
  ASSERT_EQ(banned.top_logprobs.size(), 2u);
  EXPECT_EQ(banned.top_logprobs[0].first, 0);

  Sampler force(SamplingParams{.temperature = 0, .logit_bias = {{3, 100.0f}}}, 0);
  EXPECT_EQ(force.sample(logits, kNone, kNone).id, 3);
  // Sampled at temperature 1, a token with +100 is all but certain and a banned one never drawn.
  Sampler hot(SamplingParams{.temperature = 1.0, .logit_bias = {{2, 100.0f}, {0, -100.0f}}}, 0);
  const auto probs = hot.distribution(logits, kNone, kNone);
  EXPECT_GT(probs[2], 0.999f);
  EXPECT_LT(probs[0], 1e-30f);
}

TEST(SamplerLogitBias, AppliesBeforeThePenaltiesAndChecksTheIds) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  // (1 + 1) / 2 for the biased token repeated in the prompt, then the plain repetition penalty on the other.
  mo::engine::apply_penalties(logits, SamplingParams{.repetition_penalty = 2.0, .logit_bias = {{0, 1.0f}}}, std::vector<std::int32_t>{0, 1},
                              kNone);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.5f, 1.0f}));
  try {
    mo::engine::apply_penalties(logits, SamplingParams{.logit_bias = {{3, 1.0f}}}, kNone, kNone);
    FAIL();
  } catch (const mo::Error& e) {
    EXPECT_STREQ(e.what(), "sampler: logit_bias token id 3 is outside the vocabulary [0, 3)");
  }
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.5f, 1.0f}));
}

TEST(SamplerSeed, SameSeedSameThousandDraws) {
  const std::vector<float> logits = pseudo_logits(50, 5);
  auto run = [&](std::uint64_t seed) {
    Sampler s(SamplingParams{.top_p = 0.95, .seed = seed}, 0);
    std::vector<std::int32_t> ids;
    for (int i = 0; i < 1000; ++i) ids.push_back(s.sample(logits, kNone, kNone).id);
    return ids;
  };
  const auto a = run(42), b = run(42), c = run(43);
  EXPECT_EQ(a, b);
  int differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i];
  EXPECT_GT(differ, 500);
}

TEST(SamplerSeed, OtherSequencesInTheBatchDoNotChangeTheTokens) {
  // Sequence A alone, then interleaved with B (another vocab size, penalties, top-p) on the same thread,
  // whose per-thread scratch buffers A shares.
  const std::vector<float> a_logits = pseudo_logits(300, 21), b_logits = pseudo_logits(7000, 22);
  const SamplingParams a_params = SamplingParams{.repetition_penalty = 1.2, .frequency_penalty = 0.3, .seed = 5};
  const SamplingParams b_params = SamplingParams{.top_p = 0.8, .repetition_penalty = 1.5, .presence_penalty = 1};
  auto run_a = [&](bool with_b) {
    Sampler a(a_params, 0), b(b_params, 9);
    std::vector<std::int32_t> a_out, b_out;
    const std::vector<std::int32_t> prompt = {1, 2, 3};
    for (int i = 0; i < 200; ++i) {
      a_out.push_back(a.sample(a_logits, prompt, a_out).id);
      if (with_b) b_out.push_back(b.sample(b_logits, prompt, b_out).id);
    }
    return a_out;
  };
  EXPECT_EQ(run_a(false), run_a(true));
}

TEST(SamplerSeed, RequestSeedWinsOverTheDefault) {
  const std::vector<float> logits = pseudo_logits(50, 6);
  auto first10 = [&](std::optional<std::uint64_t> seed, std::uint64_t default_seed) {
    Sampler s(SamplingParams{.seed = seed}, default_seed);
    std::vector<std::int32_t> ids;
    for (int i = 0; i < 10; ++i) ids.push_back(s.sample(logits, kNone, kNone).id);
    return ids;
  };
  EXPECT_EQ(first10(7, 1), first10(7, 2));
  EXPECT_EQ(first10(std::nullopt, 7), first10(7, 2));
  EXPECT_NE(first10(std::nullopt, 1), first10(std::nullopt, 2));
}

TEST(SamplerSeed, DrawRuleIsTheDocumentedOne) {
  // 1024 equal logits: the walk picks floor(u * 1024) with u = (x >> 11) * 2^-53, i.e. x >> 54, where x is
  // the engine's next output. std::mt19937_64's outputs are fixed by the standard, so these ids are too.
  const std::vector<float> logits(1024, 0.0f);
  Sampler s(SamplingParams{.seed = 2024}, 0);
  std::mt19937_64 ref(2024);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(s.sample(logits, kNone, kNone).id, static_cast<std::int32_t>(ref() >> 54));
  // The engine itself: the 10000th output of a default-constructed mt19937_64 is fixed by the standard.
  std::mt19937_64 std_check;
  std_check.discard(9999);
  EXPECT_EQ(std_check(), 9981545732273789042ull);
}

TEST(SamplerSeed, EmpiricalFrequenciesMatchTheDistribution) {
  const std::vector<double> want = {0.1, 0.2, 0.3, 0.4};
  const std::vector<float> logits = log_of(want);
  Sampler s(SamplingParams{.seed = 12345}, 0);
  const int n = 200000;
  std::vector<int> counts(want.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s.sample(logits, kNone, kNone).id)];
  // Within half a percentage point (the standard error is at most 0.0011 here).
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(counts[i] / double(n), want[i], 0.005) << "token " << i;
}

TEST(SamplerLogprobs, TopNSortedAndEqualToRawLogSoftmax) {
  const std::vector<float> logits = pseudo_logits(100, 8);
  std::vector<double> ref(logits.begin(), logits.end());
  ref = softmax(ref);
  // Temperature and a penalty change what is sampled, not the logprobs (vLLM's raw_logprobs default).
  Sampler s(SamplingParams{.temperature = 0.7, .repetition_penalty = 1.3, .seed = 1, .logprobs = 5}, 0);
  const std::vector<std::int32_t> prompt = {0, 1, 2, 3};
  for (int step = 0; step < 20; ++step) {
    const auto tok = s.sample(logits, prompt, kNone);
    EXPECT_NEAR(tok.logprob, std::log(ref[tok.id]), 1e-5);
    ASSERT_EQ(tok.top_logprobs.size(), 5u);
    std::vector<std::int32_t> order(logits.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (std::size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(tok.top_logprobs[i].first, order[i]);
      EXPECT_NEAR(tok.top_logprobs[i].second, std::log(ref[order[i]]), 1e-5);
      if (i > 0) {
        EXPECT_GE(tok.top_logprobs[i - 1].second, tok.top_logprobs[i].second);
      }
    }
  }
}

TEST(SamplerLogprobs, NoneByDefaultAndTiesGoToTheLowerId) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 0.0f};
  Sampler none(SamplingParams{}, 0);
  EXPECT_TRUE(none.sample(logits, kNone, kNone).top_logprobs.empty());
  Sampler three(SamplingParams{.logprobs = 20}, 0);  // more than the vocab: all of it
  const auto tok = three.sample(logits, kNone, kNone);
  ASSERT_EQ(tok.top_logprobs.size(), 4u);
  EXPECT_EQ(tok.top_logprobs[0].first, 1);
  EXPECT_EQ(tok.top_logprobs[1].first, 2);
  EXPECT_EQ(tok.top_logprobs[2].first, 0);
  EXPECT_EQ(tok.top_logprobs[3].first, 3);
}

TEST(Sampler, NegInfAndNaNLogitsAreNeverSampled) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 0.0f, std::nanf(""), 0.0f};
  Sampler s(SamplingParams{.seed = 3}, 0);
  for (int i = 0; i < 200; ++i) {
    const auto id = s.sample(logits, kNone, kNone).id;
    ASSERT_TRUE(id == 1 || id == 3) << id;
  }
  expect_probs(s.distribution(logits, kNone, kNone), {0, 0.5, 0, 0.5});
}

TEST(Sampler, NoFiniteLogitIsAnError) {
  const float inf = std::numeric_limits<float>::infinity();
  Sampler s(SamplingParams{}, 0);
  for (const std::vector<float>& logits : {std::vector<float>{-inf, -inf}, std::vector<float>{}, std::vector<float>{0.0f, inf}}) {
    try {
      s.sample(logits, kNone, kNone);
      FAIL();
    } catch (const mo::Error& e) {
      EXPECT_NE(std::string(e.what()).find("sampler: expected a finite largest logit"), std::string::npos) << e.what();
    }
  }
}

TEST(SamplerParams, ValidateNamesTheParameterAndTheRange) {
  struct Case {
    SamplingParams params;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{.temperature = -0.1}, "temperature: expected a number in [0, 2], got -0.1"},
      {{.temperature = 2.5}, "temperature: expected a number in [0, 2], got 2.5"},
      {{.temperature = std::nan("")}, "temperature: expected a number in [0, 2], got nan"},
      {{.top_p = 1.5}, "top_p: expected a number in (0, 1], got 1.5"},
      {{.top_p = 0}, "top_p: expected a number in (0, 1], got 0"},
      {{.top_k = -2}, "top_k: expected -1 or 0 (all tokens) or an integer >= 1, got -2"},
      {{.min_p = 1.01}, "min_p: expected a number in [0, 1], got 1.01"},
      {{.repetition_penalty = 0}, "repetition_penalty: expected a number in [0.001, 1000], got 0"},
      {{.repetition_penalty = INFINITY}, "repetition_penalty: expected a number in [0.001, 1000], got inf"},
      {{.repetition_penalty = 1e-45}, "repetition_penalty: expected a number in [0.001, 1000], got 1e-45"},  // every logit became inf
      {{.presence_penalty = 2.5}, "presence_penalty: expected a number in [-2, 2], got 2.5"},
      {{.frequency_penalty = -3}, "frequency_penalty: expected a number in [-2, 2], got -3"},
      {{.max_tokens = 0}, "max_tokens: expected an integer >= 1, got 0"},
      {{.logprobs = 21}, "logprobs: expected an integer in [0, 20], got 21"},
      {{.logprobs = -1}, "logprobs: expected an integer in [0, 20], got -1"},
      {{.stop_token_ids = {2, -1}}, "stop_token_ids: expected token ids >= 0, got -1"},
      {{.stop = {"a", ""}}, "stop: expected non-empty strings, got an empty string at index 1"},
      {{.logit_bias = {{3, 100.5f}}}, "logit_bias: expected a number in [-100, 100], got 100.5"},
      {{.logit_bias = {{3, std::nanf("")}}}, "logit_bias: expected a number in [-100, 100], got nan"},
      {{.logit_bias = {{-1, 1.0f}}}, "logit_bias: expected token ids >= 0, got -1"},
  };
  for (const Case& c : cases) {
    try {
      c.params.validate();
      ADD_FAILURE() << "no error for: " << c.message;
    } catch (const mo::UsageError& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(SamplerParams, EdgesOfTheRangesAreAccepted) {
  const SamplingParams low{.temperature = 0,
                           .top_k = -1,
                           .top_p = 1,
                           .min_p = 1,
                           .repetition_penalty = 0.01,
                           .presence_penalty = -2,
                           .frequency_penalty = 2,
                           .max_tokens = 1,
                           .stop_token_ids = {0},
                           .logprobs = 20};
  const SamplingParams high{.temperature = 2, .top_k = 1, .top_p = 1e-9};
  EXPECT_NO_THROW(SamplingParams{}.validate());
  EXPECT_NO_THROW(low.validate());
  EXPECT_NO_THROW(high.validate());
}

TEST(SamplerParams, SamplerRefusesInvalidParams) { EXPECT_THROW(Sampler(SamplingParams{.top_p = 1.5}, 0), mo::UsageError); }

}  // namespace
