#include "bpe_pretokenize.h"

#include <utility>

#include "bpe_bytes.h"
#include "mo/core/error.h"

namespace mo::tok {

namespace {

using json = nlohmann::json;
using Range = std::pair<std::size_t, std::size_t>;

// HF's Punctuation pre-tokenizer: Unicode punctuation plus every ASCII punctuation character.
constexpr const char* kPunctuationRegex = R"([\p{P}!-/:-@\[-`{-~])";

std::shared_ptr<const BpeRegex> cached_regex(const std::string& pattern, bool literal, const std::string& source) {
  return std::make_shared<const BpeRegex>(pattern, literal, source);
}

SplitBehavior parse_behavior(const json& step, const std::string& source) {
  const std::string b = step.value("behavior", std::string("Isolated"));
  if (b == "Isolated") return SplitBehavior::isolated;
  if (b == "Removed") return SplitBehavior::removed;
  if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (b == "Contiguous") return SplitBehavior::contiguous;
  throw Error(source + ": pre_tokenizer Split behavior '" + b + "' is not supported");
}

void add_steps(const json& pt, const std::string& source, std::vector<PreStep>& steps) {
  if (!pt.is_object() || !pt.contains("type")) {
    throw Error(source + ": pre_tokenizer must be an object with a 'type'");
  }
  const std::string type = pt["type"].get<std::string>();
  PreStep step;
  if (type == "Sequence") {
    for (const auto& sub : pt.at("pretokenizers")) add_steps(sub, source, steps);
    return;
  }
  if (type == "ByteLevel") {
    step.kind = PreStep::Kind::byte_level;
    step.add_prefix_space = pt.value("add_prefix_space", true);
    if (pt.value("use_regex", true)) step.regex = cached_regex(kGpt2Regex, false, source);
  } else if (type == "Split") {
    const json& pattern = pt.at("pattern");
    if (pattern.contains("Regex")) {
      step.regex = cached_regex(pattern["Regex"].get<std::string>(), false, source);
    } else if (pattern.contains("String")) {
      step.regex = cached_regex(pattern["String"].get<std::string>(), true, source);
    } else {
      throw Error(source + ": pre_tokenizer Split pattern needs 'Regex' or 'String'");
    }
    step.behavior = parse_behavior(pt, source);
    step.invert = pt.value("invert", false);
  } else if (type == "Digits") {
    // Rust's char::is_numeric is the N categories; runs of digits stay together unless individual.
    step.regex = cached_regex(pt.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", false, source);
  } else if (type == "Punctuation") {
    step.regex = cached_regex(kPunctuationRegex, false, source);
    step.behavior = parse_behavior(pt, source);
  } else {
    throw Error(source + ": pre_tokenizer type '" + type + "' is not supported for byte-level BPE");
  }
  steps.push_back(std::move(step));
}

// HF's NormalizedString::split: the pattern's matches and the gaps between them, tagged, then
// combined per `behavior`; empty pieces are dropped.
void split_piece(std::string_view piece, const PreStep& step, std::vector<std::string_view>& out) {
  thread_local std::vector<Range> matches;
  thread_local std::vector<std::pair<Range, bool>> segs;
  matches.clear();
  segs.clear();
  step.regex->find_all(piece, matches);
  if (matches.empty()) {
    const bool whole_is_match = step.invert;
    if (!(whole_is_match && step.behavior == SplitBehavior::removed)) out.push_back(piece);
    return;
  }
  std::size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) segs.push_back({{prev, b}, false});
    segs.push_back({{b, e}, true});
    prev = e;
  }
  if (prev != piece.size()) segs.push_back({{prev, piece.size()}, false});
  if (step.invert)
    for (auto& s : segs) s.second = !s.second;

  const auto emit = [&](std::size_t b, std::size_t e) {
    if (e > b) out.push_back(piece.substr(b, e - b));
  };
  switch (step.behavior) {
    case SplitBehavior::isolated:
      for (const auto& [r, m] : segs) emit(r.first, r.second);
      break;
    case SplitBehavior::removed:
      for (const auto& [r, m] : segs)
        if (!m) emit(r.first, r.second);
      break;
    case SplitBehavior::contiguous: {
      std::size_t i = 0;
      while (i < segs.size()) {
        std::size_t j = i;
        while (j + 1 < segs.size() && segs[j + 1].second == segs[i].second) ++j;
        emit(segs[i].first.first, segs[j].first.second);
        i = j + 1;
      }
      break;
    }
    case SplitBehavior::merged_with_previous: {
      // A match joins the piece before it unless that piece was itself a match.
      std::vector<Range> acc;
      bool previous_match = false;
      for (const auto& [r, m] : segs) {
        if (m && !previous_match && !acc.empty())
          acc.back().second = r.second;
        else
          acc.push_back(r);
        previous_match = m;
      }
      for (const auto& r : acc) emit(r.first, r.second);
      break;
    }
    case SplitBehavior::merged_with_next: {
      std::vector<Range> acc;
      bool previous_match = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->second && !previous_match && !acc.empty())
          acc.back().first = it->first.first;
        else
          acc.push_back(it->first);
        previous_match = it->second;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->first, it->second);
      break;
    }
  }
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const json& pre_tokenizer, const std::string& source) {
  PreTokenizer p;
  if (pre_tokenizer.is_null()) throw Error(source + ": pre_tokenizer is null; byte-level BPE needs a ByteLevel step");
  add_steps(pre_tokenizer, source, p.steps_);
  p.byte_level_at_ = p.steps_.size();
  for (std::size_t i = 0; i < p.steps_.size(); ++i) {
    if (p.steps_[i].kind == PreStep::Kind::byte_level) {
      p.byte_level_at_ = i;
      break;
    }
  }
  if (p.byte_level_at_ == p.steps_.size()) {
    throw Error(source + ": pre_tokenizer has no ByteLevel step; not a byte-level BPE tokenizer");
  }
  return p;
}

PreTokenizer PreTokenizer::from_regexes(const std::vector<std::string>& regexes, const std::string& source) {
  PreTokenizer p;
  for (const auto& r : regexes) {
    PreStep step;
    step.regex = cached_regex(r, false, source);
    p.steps_.push_back(std::move(step));
  }
  PreStep bl;
  bl.kind = PreStep::Kind::byte_level;
  p.steps_.push_back(std::move(bl));
  p.byte_level_at_ = p.steps_.size() - 1;
  return p;
}

std::vector<std::string> PreTokenizer::patterns() const {
  std::vector<std::string> out;
  for (const auto& s : steps_)
    if (s.regex) out.push_back(s.regex->pattern());
  return out;
}

void PreTokenizer::run(std::string_view text, PreTokenized& out) const {
  if (text.empty()) return;
  std::vector<std::string_view> cur{text}, next;
  // Steps after the first ByteLevel see mapped text ("Ġ" is a letter there), as in HF.
  bool mapped = false;
  for (std::size_t si = 0; si < steps_.size(); ++si) {
    const PreStep& step = steps_[si];
    next.clear();
    if (step.kind == PreStep::Kind::byte_level) {
      for (std::string_view piece : cur) {
        if (step.add_prefix_space && piece.front() != ' ') {
          const std::string_view space = mapped ? std::string_view("\xC4\xA0") : std::string_view(" ");
          if (!(mapped && piece.substr(0, 2) == space)) {
            out.arena.push_back(std::make_unique<std::string>(std::string(space) + std::string(piece)));
            piece = *out.arena.back();
          }
        }
        if (step.regex)
          split_piece(piece, step, next);
        else
          next.push_back(piece);
      }
      if (!mapped && si + 1 < steps_.size()) {
        // Later steps split mapped text: map every piece once.
        for (auto& piece : next) {
          out.arena.push_back(std::make_unique<std::string>(bytes_to_mapped(piece)));
          piece = *out.arena.back();
        }
        mapped = true;
      }
    } else {
      for (const std::string_view piece : cur) split_piece(piece, step, next);
    }
    std::swap(cur, next);
  }
  if (!mapped) {
    out.words.insert(out.words.end(), cur.begin(), cur.end());
    return;
  }
  std::string raw;
  for (const std::string_view piece : cur) {
    mapped_to_bytes(piece, raw);
    out.arena.push_back(std::make_unique<std::string>(raw));
    out.words.push_back(*out.arena.back());
  }
}

}  // namespace mo::tok
