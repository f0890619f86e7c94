#include "mo/engine/stop_checker.h"

#include <algorithm>
#include <utility>

namespace mo::engine {

bool is_stop_token(std::int32_t id, const SamplingParams& params, std::span<const std::int32_t> eos_ids) {
  if (std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), id) != params.stop_token_ids.end()) return true;
  return !params.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
}

StopChecker::StopChecker(std::vector<std::string> stops, bool include_stop_str_in_output)
    : stops_(std::move(stops)), include_stop_(include_stop_str_in_output) {
  // SamplingParams::validate rejects empty stop strings; one here would match before every text.
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
  for (const std::string& s : stops_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

StopChecker::Result StopChecker::push(std::string_view new_text) {
  if (stopped_) return {"", true, matched_};
  if (stops_.empty()) return {std::string(new_text), false, ""};

  // tail_ holds no complete stop string (it would have matched), so any match ends in new_text.
  const std::string buf = tail_ + std::string(new_text);
  const std::size_t emitted_end = tail_.size() - held_;  // buf[0, emitted_end) was sent already

  std::size_t best_pos = std::string::npos, best_end = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stops_) {
    const std::size_t pos = buf.find(s);
    if (pos == std::string::npos) continue;
    if (pos + s.size() < best_end) {
      best_pos = pos;
      best_end = pos + s.size();
      best = &s;
    }
  }
  if (best) {
    const std::size_t cut = std::max(include_stop_ ? best_end : best_pos, emitted_end);
    stopped_ = true;
    matched_ = *best;
    tail_.clear();
    held_ = 0;
    return {buf.substr(emitted_end, cut - emitted_end), true, matched_};
  }

  // Hold back the longest tail of buf that is a proper prefix of a stop string. It begins with the first
  // byte of a stop string, a character boundary, so what is emitted is whole UTF-8 characters.
  std::size_t hold = 0;
  if (!include_stop_)
    for (const std::string& s : stops_)
      for (std::size_t k = std::min(s.size() - 1, buf.size()); k > hold; --k)
        if (buf.compare(buf.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
  const std::size_t send_end = std::max(buf.size() - hold, emitted_end);
  Result r{buf.substr(emitted_end, send_end - emitted_end), false, ""};
  held_ = buf.size() - send_end;
  const std::size_t keep = std::max(max_stop_len_ - 1, held_);
  tail_ = buf.size() > keep ? buf.substr(buf.size() - keep) : buf;
  return r;
}

std::string StopChecker::flush() {
  if (stopped_) return "";
  std::string out = tail_.substr(tail_.size() - held_);
  held_ = 0;
  return out;
}

}  // namespace mo::engine
