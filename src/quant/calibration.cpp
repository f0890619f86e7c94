#include "mo/quant/calibration.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include "calibration_records.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"

namespace mo::quant {

namespace {

struct Builtin {
  const char* name;
  const char* provenance;  // keep in step with scripts/fetch-calibration.sh and docs/calibration.md
};
constexpr Builtin kBuiltins[] = {
    {"general", "English Wikipedia articles (CC BY-SA 4.0) from exllamav2 0.3.2's standard_cal_data/wiki.utf8"},
    {"code",
     "Python and C++ source files of requests 2.32.3, click 8.1.7, jinja2 3.1.6, rich 13.9.4, pybind11 2.13.6 "
     "(Apache-2.0, BSD-3-Clause, MIT)"},
    {"chat",
     "conversations of chatterbot-corpus 1.3.3 (English, BSD-3-Clause) and chitchat-dataset 0.9.0 (MIT), "
     "rendered with the model's chat template"},
};

constexpr std::int64_t kMinSamples = 128, kMaxSamples = 512;

// The shuffle must give the same samples for the same seed on every platform, which
// std::uniform_int_distribution does not promise; splitmix64 with a multiply-shift bound does.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }

 private:
  std::uint64_t s_;
};

// Lowercase, ASCII punctuation dropped, whitespace runs as one space: records that differ only in
// these are the same calibration text (a re-scraped page, a trailing period, CRLF vs LF).
std::string near_key(std::string_view text) {
  std::string key;
  key.reserve(text.size());
  bool space = false;
  for (unsigned char c : text) {
    if (std::isspace(c)) {
      space = !key.empty();
    } else if (c < 0x80 && std::ispunct(c)) {
      continue;
    } else {
      if (space) key.push_back(' ');
      space = false;
      key.push_back(static_cast<char>(std::tolower(c)));
    }
  }
  return key;
}

struct Kept {
  std::vector<std::size_t> index;  // into records, first occurrences only
  std::int64_t exact = 0, near = 0;
};

Kept dedupe(const std::vector<detail::CalibrationRecord>& records) {
  Kept k;
  std::unordered_set<std::string_view> seen;
  std::unordered_set<std::string> seen_near;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (!seen.insert(records[i].text).second) {
      ++k.exact;
    } else if (!seen_near.insert(near_key(records[i].text)).second) {
      ++k.near;
    } else {
      k.index.push_back(i);
    }
  }
  return k;
}

// Token ids of a record without BOS/EOS. Only the first `max_tokens` are wanted, so a long record is
// encoded from a prefix of 64 bytes a token (far more than any tokenizer needs), cut at whitespace;
// the tokens near the cut may differ from a full encoding, so that prefix must give a margin.
std::vector<std::int32_t> encode_record(const tok::Tokenizer& tok, const detail::CalibrationRecord& r, std::size_t max_tokens) {
  constexpr std::size_t kBytesPerToken = 64, kMargin = 64;
  const std::string_view text = r.text;
  const std::size_t budget = max_tokens > (std::numeric_limits<std::size_t>::max() / kBytesPerToken) - kMargin
                                 ? text.size()
                                 : (max_tokens + kMargin) * kBytesPerToken;
  if (text.size() > budget) {
    std::size_t cut = budget;
    while (cut > budget / 2 && !std::isspace(static_cast<unsigned char>(text[cut]))) --cut;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    auto ids = tok.encode(text.substr(0, cut), false, r.chat);
    if (ids.size() >= max_tokens + kMargin) {
      ids.resize(max_tokens);
      return ids;
    }
  }
  auto ids = tok.encode(text, false, r.chat);
  if (ids.size() > max_tokens) ids.resize(max_tokens);
  return ids;
}

struct Resolved {
  std::string path;
  const Builtin* builtin = nullptr;
};

Resolved resolve_source(const std::string& source) {
  if (source.empty())
    throw UsageError("calibration_data is empty; expected a JSON/JSONL/text file or a built-in set (general, code, chat)");
  std::string name = source;
  for (std::string_view prefix : {"built-in:", "builtin:"})
    if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (const Builtin& b : kBuiltins) {
    if (name != b.name) continue;
    const std::string dir = builtin_calibration_dir();
    const std::string path = (std::filesystem::path(dir) / (name + ".jsonl")).string();
    if (!std::filesystem::is_regular_file(path))
      throw UsageError("built-in calibration set '" + name + "' not found in " + dir + ": run scripts/fetch-calibration.sh");
    return {path, &b};
  }
  std::error_code ec;
  if (!std::filesystem::exists(source, ec)) {
    std::string msg =
        "calibration data '" + source + "' not found: no such file, and not a built-in set (" + join(builtin_calibration_names()) + ")";
    if (const auto guess = closest_match(source, builtin_calibration_names())) msg += "; did you mean '" + *guess + "'?";
    throw UsageError(msg);
  }
  return {source, nullptr};
}

void check_options(const CalibrationOptions& o) {
  // Bounds that keep num_samples * seq_len far from overflow; real runs are a few hundred of each.
  constexpr std::int64_t kLimit = 1 << 24;
  if (o.num_samples < 1 || o.num_samples > kLimit)
    throw UsageError(fmt::format("num_samples must be between 1 and {} (got {}); 128-512 is the usual range", kLimit, o.num_samples));
  if (o.seq_len < 2 || o.seq_len > kLimit)
    throw UsageError(fmt::format("max_seq_len must be between 2 and {} (got {})", kLimit, o.seq_len));
  if (o.text_field.empty())
    throw UsageError("calibration_field is empty; expected auto, text, messages, prompt+completion or a field name");
}

}  // namespace

std::string builtin_calibration_dir() {
  if (const char* env = std::getenv("MO_CALIBRATION_DIR"); env && *env) return env;
#ifdef MO_DEFAULT_CALIBRATION_DIR
  return MO_DEFAULT_CALIBRATION_DIR;
#else
  return ".cache/calibration";
#endif
}

std::vector<std::string> builtin_calibration_names() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.emplace_back(b.name);
  return names;
}

CalibrationSet load_calibration(const CalibrationOptions& opt, const tok::Tokenizer& tok, const std::string& chat_template) {
  tok::ModelChatTemplate chat;
  chat.tmpl = chat_template;
  const auto text_of = [&](std::optional<std::int32_t> id) { return id && *id >= 0 && *id < tok.vocab_size() ? tok.token_text(*id) : ""; };
  chat.bos_token = text_of(tok.special().bos);
  chat.eos_token = text_of(tok.special().eos);
  return load_calibration(opt, tok, chat);
}

CalibrationSet load_calibration(const CalibrationOptions& opt, const tok::Tokenizer& tok, const tok::ModelChatTemplate& chat) {
  check_options(opt);
  const Resolved src = resolve_source(opt.source);
  detail::CalibrationRecords read = detail::read_calibration_records(src.path, opt.text_field, chat);

  CalibrationSet set;
  set.builtin = src.builtin != nullptr;
  set.source = set.builtin ? std::string("built-in:") + src.builtin->name : src.path;
  set.records = read.total;
  set.empty_skipped = read.empty;
  set.warnings = std::move(read.warnings);
  Kept kept = dedupe(read.records);
  set.duplicates_removed = kept.exact;
  set.near_duplicates_removed = kept.near;
  if (kept.index.empty())
    throw UsageError(
        fmt::format("{}: no usable text: {} records, {} empty, {} duplicates", src.path, read.total, read.empty, kept.exact + kept.near));

  Rng rng(opt.seed);
  std::vector<std::size_t>& order = kept.index;
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);

  const auto& special = tok.special();
  // A plain int and flag rather than std::optional: GCC 12 warns, wrongly, that the optional may be unset.
  const bool add_bos = special.add_bos && special.bos.has_value();
  const std::int32_t bos = add_bos ? *special.bos : 0;
  const auto seq_len = static_cast<std::size_t>(opt.seq_len);
  const auto num_samples = static_cast<std::size_t>(opt.num_samples);

  if (opt.pack) {
    // Records joined by EOS (a blank line when the vocabulary has none) into one stream, cut into
    // windows of seq_len tokens less the BOS each window starts with.
    const std::vector<std::int32_t> sep = special.eos ? std::vector<std::int32_t>{*special.eos} : tok.encode("\n\n", false);
    const std::size_t body = seq_len - (add_bos ? 1 : 0);
    const std::size_t need = num_samples * body;
    std::vector<std::int32_t> stream;
    for (std::size_t i : order) {
      if (stream.size() >= need) break;
      const auto ids = encode_record(tok, read.records[i], need - stream.size());
      if (ids.empty()) continue;
      if (!stream.empty()) stream.insert(stream.end(), sep.begin(), sep.end());
      stream.insert(stream.end(), ids.begin(), ids.end());
      ++set.records_used;
    }
    for (std::size_t start = 0; start < stream.size() && set.samples.size() < num_samples; start += body) {
      std::vector<std::int32_t> s;
      if (add_bos) s.push_back(bos);
      s.insert(s.end(), stream.begin() + static_cast<std::ptrdiff_t>(start),
               stream.begin() + static_cast<std::ptrdiff_t>(std::min(start + body, stream.size())));
      set.samples.push_back(std::move(s));
    }
  } else {
    std::size_t short_samples = 0;
    for (std::size_t i : order) {
      if (set.samples.size() >= num_samples) break;
      auto ids = encode_record(tok, read.records[i], seq_len);
      if (ids.empty()) continue;
      if (add_bos && ids.front() != bos) ids.insert(ids.begin(), bos);  // a chat template may have written BOS itself
      if (ids.size() > seq_len) ids.resize(seq_len);
      short_samples += ids.size() < seq_len;
      set.samples.push_back(std::move(ids));
      ++set.records_used;
    }
    if (set.samples.size() < num_samples)
      set.warnings.push_back(
          fmt::format("{} usable records give {} samples where {} were asked for", kept.index.size(), set.samples.size(), num_samples));
    if (short_samples > 0)
      set.warnings.push_back(
          fmt::format("{} of {} samples are shorter than max_seq_len {} (short records); calibration_pack: true fills every sample",
                      short_samples, set.samples.size(), seq_len));
  }
  if (set.samples.empty()) throw UsageError(src.path + ": no usable text: the records give no tokens");
  for (const auto& s : set.samples) set.tokens += static_cast<std::int64_t>(s.size());

  if (opt.pack && set.tokens < opt.num_samples * opt.seq_len) {
    const auto full = std::count_if(set.samples.begin(), set.samples.end(), [&](const auto& s) { return s.size() == seq_len; });
    const std::string got = static_cast<std::size_t>(full) == set.samples.size()
                                ? fmt::format("{} samples", full)
                                : fmt::format("{} full samples and one of {} tokens", full, set.samples.back().size());
    set.warnings.push_back(fmt::format("only {} tokens of calibration text: {} where {} x {} = {} were asked for", format_count(set.tokens),
                                       got, num_samples, seq_len, format_count(opt.num_samples * opt.seq_len)));
  }
  if (opt.num_samples < kMinSamples)
    set.warnings.push_back(
        fmt::format("num_samples {} is below {}: the layer statistics GPTQ and AWQ estimate get noisy; {}-{} is the usual range",
                    opt.num_samples, kMinSamples, kMinSamples, kMaxSamples));
  if (opt.num_samples > kMaxSamples)
    set.warnings.push_back(fmt::format("num_samples {} is above {}: quantizing takes longer for little gain; {}-{} is the usual range",
                                       opt.num_samples, kMaxSamples, kMinSamples, kMaxSamples));

  std::string removed;
  if (set.duplicates_removed || set.near_duplicates_removed)
    removed += fmt::format(", {} duplicates and {} near-duplicates removed", format_count(set.duplicates_removed),
                           format_count(set.near_duplicates_removed));
  if (set.empty_skipped) removed += fmt::format(", {} empty skipped", format_count(set.empty_skipped));
  const std::string what =
      set.builtin ? fmt::format("built-in {}: {}; {} records", src.builtin->name, src.builtin->provenance, format_count(set.records))
                  : fmt::format("{} ({}{}): {} records", src.path, read.format,
                                read.format == "text paragraphs" ? "" : ", field " + opt.text_field, format_count(set.records));
  set.description = fmt::format("{}{}; {} {} samples, {} tokens from {} records", what, removed, set.samples.size(),
                                opt.pack ? "packed" : "truncated", format_count(set.tokens), format_count(set.records_used));
  return set;
}

}  // namespace mo::quant
