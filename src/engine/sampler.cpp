#include "mo/engine/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "mo/core/error.h"

namespace mo::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::size_t kBlock = 64;  // tokens per block of the cumulative walk

struct Candidate {
  float logit;
  float weight;
  std::int32_t id;
};

// Descending logit, ties -> lower id: the order top-p ranks tokens in.
bool ranks_before(const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

// Buffers shared by the Samplers of one thread, so a sequence keeps nothing vocab-sized between steps.
struct Scratch {
  std::vector<float> work;          // [vocab] logits after penalties, when a penalty is set
  std::vector<float> weights;       // [vocab] exp((logit - max) / temperature), 0 for dropped tokens
  std::vector<float> raw;           // [vocab] exp(raw logit - raw max), for the logprobs
  std::vector<float> values;        // top-k heap
  std::vector<double> bucket_mass;  // top-p histogram
  std::vector<Candidate> order;     // top-p ranking within the boundary bucket
};
thread_local Scratch t_scratch;

// exp(x) for x <= 0, within a few ulp of std::exp (Cephes' expf polynomial); 0 below -87 and for NaN.
// Every operation is computed unconditionally and n is rounded with the 1.5 * 2^23 trick rather than
// floorf, so GCC vectorises the loops that call it under its default -ftrapping-math; and being plain
// float arithmetic it does not vary with the C library as expf does.
inline float exp_nonpositive(float x) {
  const bool in_range = x >= -87.0f;
  const float xc = in_range ? x : -87.0f;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // nearest integer to x / ln 2
  float r = xc - n * 0.693359375f;                                          // ln 2 in two parts, so r is exact
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);  // 2^n, n in [-126, 0]
  const float v = y * scale;
  return in_range ? v : 0.0f;
}

// Sum of w[0, n), n <= kBlock: eight float lanes, then double. total_weight and draw add the same way.
double block_sum(const float* w, std::size_t n) {
  float lanes[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) lanes[j] += w[i + j];
  double s = 0;
  for (float l : lanes) s += l;
  for (; i < n; ++i) s += w[i];
  return s;
}

double total_weight(std::span<const float> w) {
  double t = 0;
  for (std::size_t b = 0; b < w.size(); b += kBlock) t += block_sum(w.data() + b, std::min(kBlock, w.size() - b));
  return t;
}

// Largest value, NaN skipped; -inf when there is none. Sixteen independent lanes, so it vectorises.
float max_logit(std::span<const float> x) {
  float lanes[16];
  std::fill(std::begin(lanes), std::end(lanes), kNegInf);
  std::size_t i = 0;
  for (; i + 16 <= x.size(); i += 16)
    for (std::size_t j = 0; j < 16; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  float m = kNegInf;
  for (float l : lanes) m = l > m ? l : m;
  for (; i < x.size(); ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float checked_max(std::span<const float> x) {
  const float m = max_logit(x);
  if (!std::isfinite(m)) throw Error(fmt::format("sampler: expected a finite largest logit, got {}", m));
  return m;
}

// Max of x[0, 16), NaN skipped: lets the scans below skip a whole chunk with one vectorised test.
float chunk_max(const float* x) {
  float m = kNegInf;
  for (std::size_t j = 0; j < 16; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// The k-th largest logit (NaN skipped), or -inf when there are fewer than k. A min-heap of the k largest
// so far; once it is full, a chunk whose max does not beat its smallest is skipped.
float kth_largest(std::span<const float> work, std::size_t k, std::vector<float>& heap) {
  heap.clear();
  heap.reserve(k);
  const auto offer = [&](float l) {
    if (std::isnan(l)) return;
    if (heap.size() < k) {
      heap.push_back(l);
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
    } else if (l > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = l;
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
    }
  };
  std::size_t i = 0;
  for (; i + 16 <= work.size(); i += 16) {
    if (heap.size() == k && !(chunk_max(&work[i]) > heap.front())) continue;
    for (std::size_t j = i; j < i + 16; ++j) offer(work[j]);
  }
  for (; i < work.size(); ++i) offer(work[i]);
  return heap.size() == k ? heap.front() : kNegInf;
}

// Weights are in [0, 1], so the top bits of their IEEE patterns order them: 2^14 buckets of 1/128 octave.
std::size_t weight_bucket(float w) { return std::bit_cast<std::uint32_t>(w) >> 16; }
constexpr std::size_t kBuckets = std::size_t{1} << 14;

// Zeroes the weights of the tokens outside the nucleus: ranked by logit, a token stays while the mass
// ranked above it is < top_p (vLLM drops it when the mass ranked below it, itself included, is
// <= 1 - top_p). A histogram of the mass by weight finds the bucket holding the boundary in one pass;
// only that bucket is ranked, by quickselect on the mass.
void apply_top_p(double top_p, double total, std::span<const float> work, Scratch& s) {
  float* w = s.weights.data();
  const std::size_t vocab = work.size();
  const double target = top_p * total;
  s.bucket_mass.assign(kBuckets, 0.0);
  for (std::size_t i = 0; i < vocab; ++i) s.bucket_mass[weight_bucket(w[i])] += w[i];
  // Weight rises with the logit, so every token of a higher bucket ranks above every token of a lower one.
  double above = 0;  // mass of the buckets above `boundary`
  std::size_t boundary = kBuckets;
  while (boundary > 0 && above + s.bucket_mass[boundary - 1] < target) above += s.bucket_mass[--boundary];
  if (boundary == 0) return;  // rounding: the whole mass stays below target, keep everything
  --boundary;

  std::vector<Candidate>& order = s.order;
  order.clear();
  for (std::size_t i = 0; i < vocab; ++i) w[i] = weight_bucket(w[i]) < boundary ? 0.0f : w[i];
  for (std::size_t i = 0; i < vocab; ++i)
    if (w[i] > 0 && weight_bucket(w[i]) == boundary) order.push_back({work[i], w[i], static_cast<std::int32_t>(i)});
  // Invariant: order[0, lo) are the lo top-ranked tokens of the bucket and above + their mass < target,
  // so the first rank whose mass above reaches target lies in (lo, hi].
  std::size_t lo = 0, hi = order.size();
  double mass_lo = above;
  const auto at = [&](std::size_t i) { return order.begin() + static_cast<std::ptrdiff_t>(i); };
  while (hi - lo > kBlock) {
    const std::size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), ranks_before);
    double mass = mass_lo;
    for (std::size_t j = lo; j < mid; ++j) mass += order[j].weight;
    if (mass >= target) {
      hi = mid;
    } else {
      lo = mid;
      mass_lo = mass;
    }
  }
  std::sort(at(lo), at(hi), ranks_before);
  std::size_t keep = lo;
  for (double mass = mass_lo; keep < hi && mass < target; ++keep) mass += order[keep].weight;
  for (std::size_t j = keep; j < order.size(); ++j) w[static_cast<std::size_t>(order[j].id)] = 0.0f;
}

struct Selection {
  std::int32_t argmax = -1;  // greedy: the one token left
  double total = 0;          // otherwise: the sum of s.weights
};

Selection select_tokens(const SamplingParams& p, std::span<const float> logits, std::span<const std::int32_t> prompt,
                        std::span<const std::int32_t> output, Scratch& s) {
  std::span<const float> work = logits;
  if (!p.logit_bias.empty() || p.repetition_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    s.work.assign(logits.begin(), logits.end());
    apply_penalties(s.work, p, prompt, output);
    work = s.work;
  }
  const float m = checked_max(work);
  if (p.greedy()) return {static_cast<std::int32_t>(std::find(work.begin(), work.end(), m) - work.begin()), 1.0};

  const std::size_t vocab = work.size();
  float floor_logit = kNegInf;
  if (p.top_k > 0 && static_cast<std::size_t>(p.top_k) < vocab)
    floor_logit = kth_largest(work, static_cast<std::size_t>(p.top_k), s.values);
  // e = p_i / p_max after temperature (vLLM: softmax(logits / t)), so min-p drops e < min_p. min-p and
  // top-k are both thresholds on the logit, so their order (vLLM: min-p first) does not matter.
  const float t = static_cast<float>(p.temperature);
  const float min_ratio = static_cast<float>(p.min_p);
  s.weights.resize(vocab);
  float* w = s.weights.data();
  for (std::size_t i = 0; i < vocab; ++i) {
    const float l = work[i];
    const float e = exp_nonpositive((l - m) / t);
    w[i] = (l >= floor_logit && e >= min_ratio) ? e : 0.0f;
  }
  if (p.top_p < 1.0) apply_top_p(p.top_p, total_weight(s.weights), work, s);
  // The top token has weight exactly 1 and survives every filter, so total >= 1.
  return {-1, total_weight(s.weights)};
}

// The first token, in id order, whose cumulative weight exceeds u * total.
std::int32_t draw(std::span<const float> w, double total, double u) {
  const double target = u * total;
  double cum = 0;
  for (std::size_t b = 0; b < w.size(); b += kBlock) {
    const std::size_t n = std::min(kBlock, w.size() - b);
    const double block = block_sum(w.data() + b, n);
    if (cum + block > target) {
      double c = cum;
      std::size_t last = b;
      for (std::size_t i = b; i < b + n; ++i) {
        if (!(w[i] > 0)) continue;
        last = i;
        c += w[i];
        if (c > target) return static_cast<std::int32_t>(i);
      }
      return static_cast<std::int32_t>(last);  // the in-block walk rounded below the lane sum
    }
    cum += block;
  }
  // u * total rounded up to total: the last token left.
  std::size_t i = w.size();
  while (i > 0 && !(w[i - 1] > 0)) --i;
  return static_cast<std::int32_t>(i > 0 ? i - 1 : 0);
}

// vLLM v1's default logprobs_mode "raw_logprobs": log_softmax of the logits as the model produced them.
void fill_logprobs(std::span<const float> logits, int n_top, SampledToken& out, Scratch& s) {
  const float m = max_logit(logits);
  s.raw.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) s.raw[i] = exp_nonpositive(logits[i] - m);
  const double log_sum = std::log(total_weight(s.raw));
  const auto logprob = [m, log_sum](float l) { return static_cast<float>(static_cast<double>(l - m) - log_sum); };
  out.logprob = logprob(logits[static_cast<std::size_t>(out.id)]);

  const std::size_t n = std::min(static_cast<std::size_t>(n_top), logits.size());
  if (n == 0) return;
  // Insertion into a short sorted list; once it is full, a chunk whose max does not beat its last is skipped.
  std::vector<std::pair<float, std::int32_t>> best;
  best.reserve(n + 1);
  const auto offer = [&](std::size_t i) {
    const float l = logits[i];
    if (std::isnan(l)) return;
    if (best.size() == n) {
      if (!(l > best.back().first)) return;
      best.pop_back();
    }
    const auto pos = std::upper_bound(best.begin(), best.end(), l, [](float v, const auto& e) { return v > e.first; });
    best.insert(pos, {l, static_cast<std::int32_t>(i)});
  };
  std::size_t i = 0;
  for (; i + 16 <= logits.size(); i += 16) {
    if (best.size() == n && !(chunk_max(&logits[i]) > best.back().first)) continue;
    for (std::size_t j = i; j < i + 16; ++j) offer(j);
  }
  for (; i < logits.size(); ++i) offer(i);
  out.top_logprobs.reserve(best.size());
  for (const auto& [l, id] : best) out.top_logprobs.emplace_back(id, logprob(l));
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::uint64_t default_seed) : params_(params) {
  params_.validate();
  rng_.seed(params_.seed.value_or(default_seed));
}

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

SampledToken Sampler::sample(std::span<const float> logits, std::span<const std::int32_t> prompt_tokens,
                             std::span<const std::int32_t> output_tokens) {
  Scratch& s = t_scratch;
  const Selection sel = select_tokens(params_, logits, prompt_tokens, output_tokens, s);
  SampledToken out;
  // Exactly one draw per random step, however many tokens are left, so the stream stays in step.
  out.id = sel.argmax >= 0 ? sel.argmax : draw(s.weights, sel.total, next_uniform());
  fill_logprobs(logits, params_.logprobs, out, s);
  return out;
}

std::vector<float> Sampler::distribution(std::span<const float> logits, std::span<const std::int32_t> prompt_tokens,
                                         std::span<const std::int32_t> output_tokens) const {
  Scratch& s = t_scratch;
  const Selection sel = select_tokens(params_, logits, prompt_tokens, output_tokens, s);
  std::vector<float> probs(logits.size(), 0.0f);
  if (sel.argmax >= 0) {
    probs[static_cast<std::size_t>(sel.argmax)] = 1.0f;
  } else {
    for (std::size_t i = 0; i < probs.size(); ++i) probs[i] = static_cast<float>(s.weights[i] / sel.total);
  }
  return probs;
}

}  // namespace mo::engine
