#include "mo/bench/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mo/core/error.h"
#include "mo/core/file_read.h"

namespace mo::bench {
namespace {

// Short, frequent words: one token each (with their leading space) in the common BPE vocabularies.
constexpr const char* kWords[] = {"the",   "of",    "and",   "to",    "in",    "is",   "that", "for",   "it",    "as",     "was",  "with",
                                  "be",    "by",    "on",    "not",   "he",    "this", "are",  "or",    "his",   "from",   "at",   "which",
                                  "but",   "have",  "an",    "had",   "they",  "you",  "were", "their", "one",   "all",    "we",   "can",
                                  "her",   "has",   "there", "been",  "if",    "more", "when", "will",  "would", "who",    "so",   "no",
                                  "she",   "other", "its",   "may",   "these", "what", "them", "than",  "some",  "him",    "time", "into",
                                  "only",  "do",    "new",   "about", "two",   "any",  "then", "first", "also",  "made",   "most", "over",
                                  "after", "such",  "where", "world", "out",   "up",   "very", "years", "each",  "should", "work", "life"};
constexpr std::size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);
// A prompt opens with random words, so no two share a prefix (prefix caching cannot skip their prefill),
// and goes on through the word list in order from a random place: every full cycle of the list then has
// the same token count on any tokenizer, which is what the probes measure.
constexpr long long kRandomHeadWords = 8;
constexpr long long kProbeShort = kRandomHeadWords + kNumWords, kProbeLong = kRandomHeadWords + 3 * kNumWords;

std::string first_user_turn(const nlohmann::json& turns) {
  if (!turns.is_array()) return "";
  for (const auto& t : turns) {
    if (!t.is_object()) continue;
    const std::string who = t.value("from", t.value("role", ""));
    const auto& v = t.contains("value") ? t["value"] : t.contains("content") ? t["content"] : nlohmann::json();
    if ((who == "human" || who == "user") && v.is_string()) return v.get<std::string>();
  }
  return "";
}

std::string prompt_of(const nlohmann::json& rec) {
  if (!rec.is_object()) return "";
  for (const char* k : {"prompt", "text"})
    if (rec.contains(k) && rec[k].is_string()) return rec[k].get<std::string>();
  for (const char* k : {"conversations", "messages"})
    if (rec.contains(k)) return first_user_turn(rec[k]);
  return "";
}

long long probe_prompt_tokens(const EndpointOptions& probe, long long words, std::string& why) {
  std::mt19937_64 rng(12345 + static_cast<std::uint64_t>(words));
  RequestSample s = run_request(probe, {synthetic_text(words, rng), words, 1}, Clock::now(), nullptr);
  if (!s.ok) {
    why = s.error;
    return -1;
  }
  if (!s.usage_reported) {
    why = "the server reports no usage.prompt_tokens";
    return -1;
  }
  return s.input_tokens;
}

}  // namespace

long long LengthDist::sample(std::mt19937_64& rng) const {
  double x = static_cast<double>(mean);
  if (kind == "uniform" && spread > 0) {
    std::uniform_real_distribution<double> d(x * (1 - spread), x * (1 + spread));
    x = d(rng);
  } else if (kind == "normal" && spread > 0) {
    std::normal_distribution<double> d(x, x * spread);
    x = d(rng);
  }
  return std::max(1LL, std::llround(x));
}

long long PromptCalibration::words_for(long long tokens) const {
  return std::max(1LL, std::llround((static_cast<double>(tokens) - overhead_tokens) / tokens_per_word));
}

PromptCalibration calibrate_prompts(const EndpointOptions& ep) {
  EndpointOptions probe = ep;
  probe.stream = false;
  probe.ignore_eos = false;
  probe.timeout_s = std::min(ep.timeout_s, 120.0);
  PromptCalibration c;
  std::string why;
  const long long a = probe_prompt_tokens(probe, kProbeShort, why);
  const long long b = a < 0 ? -1 : probe_prompt_tokens(probe, kProbeLong, why);
  if (a < 0 || b < 0 || b <= a) {
    if (why.empty()) why = fmt::format("probe lengths did not grow ({} -> {} tokens)", a, b);
    c.note = "not calibrated (" + why + "); assumed 1 token per word";
    return c;
  }
  c.tokens_per_word = static_cast<double>(b - a) / static_cast<double>(kProbeLong - kProbeShort);
  c.overhead_tokens = std::max(0.0, static_cast<double>(a) - static_cast<double>(kProbeShort) * c.tokens_per_word);
  c.measured = true;
  c.note = fmt::format("usage.prompt_tokens of {} and {} words: {} and {} tokens -> {:.3f} tokens/word + {:.1f}", kProbeShort, kProbeLong,
                       a, b, c.tokens_per_word, c.overhead_tokens);
  return c;
}

std::string synthetic_text(long long n_words, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, kNumWords - 1);
  const std::size_t offset = pick(rng);
  std::string out;
  out.reserve(static_cast<std::size_t>(n_words) * 5);
  for (long long i = 0; i < n_words; ++i) {
    if (i) out += ' ';
    out += kWords[i < kRandomHeadWords ? pick(rng) : (offset + static_cast<std::size_t>(i)) % kNumWords];
  }
  return out;
}

std::vector<std::string> load_dataset_prompts(const std::string& path) {
  const std::string text = read_regular_file(path, "--dataset", 4096 * kMiB);
  std::vector<std::string> out;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    nlohmann::json arr = nlohmann::json::parse(text, nullptr, false);
    if (arr.is_discarded()) throw UsageError(fmt::format("--dataset '{}': not valid JSON", path));
    for (const auto& rec : arr)
      if (auto p = prompt_of(rec); !p.empty()) out.push_back(p);
  } else {
    std::istringstream lines(text);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
      if (rec.is_discarded()) throw UsageError(fmt::format("--dataset '{}' line {}: not valid JSON", path, n));
      if (auto p = prompt_of(rec); !p.empty()) out.push_back(p);
    }
  }
  if (out.empty())
    throw UsageError(fmt::format("--dataset '{}': no prompts found (expected \"prompt\", \"text\", or ShareGPT \"conversations\")", path));
  return out;
}

std::vector<PromptSpec> make_prompts(const WorkloadSpec& w, const PromptCalibration& cal, std::uint64_t stream_id) {
  std::mt19937_64 rng(w.seed * 1000003 + stream_id);
  std::vector<std::string> dataset;
  if (!w.dataset.empty()) {
    dataset = load_dataset_prompts(w.dataset);
    std::shuffle(dataset.begin(), dataset.end(), rng);
  }
  std::vector<PromptSpec> out;
  for (long long i = 0; i < w.num_prompts; ++i) {
    PromptSpec p;
    p.max_tokens = w.output.sample(rng);
    if (dataset.empty()) {
      p.input_tokens = w.input.sample(rng);
      p.text = synthetic_text(cal.words_for(p.input_tokens), rng);
    } else {
      p.text = dataset[static_cast<std::size_t>(i) % dataset.size()];
      const auto words = std::count(p.text.begin(), p.text.end(), ' ') + 1;
      p.input_tokens = std::llround(static_cast<double>(words) * cal.tokens_per_word + cal.overhead_tokens);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<double> arrival_times(long long n, double rate, const std::string& kind, std::uint64_t seed) {
  std::vector<double> t(static_cast<std::size_t>(std::max(0LL, n)), 0.0);
  if (rate <= 0) return t;
  std::mt19937_64 rng(seed * 7919 + 17);
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i] = now;
    now += kind == "constant" ? 1.0 / rate : gap(rng);
  }
  return t;
}

}  // namespace mo::bench
