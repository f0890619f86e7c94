#include "mo/bench/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <nlohmann/json.hpp>

#include "mo/tokenizer/utf8.h"

namespace mo::bench {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Text of a completions or chat chunk (reasoning text counts: it is generated tokens too).
std::string chunk_text(const nlohmann::json& j) {
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return "";
  const auto& c = j["choices"][0];
  std::string out;
  if (c.contains("text") && c["text"].is_string()) out += c["text"].get<std::string>();
  if (c.contains("delta") && c["delta"].is_object()) {
    const auto& d = c["delta"];
    for (const char* k : {"reasoning_content", "content"})
      if (d.contains(k) && d[k].is_string()) out += d[k].get<std::string>();
  }
  return out;
}

std::string error_message(const nlohmann::json& j) {
  const auto& e = j["error"];
  if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
  return e.dump();
}

// For messages quoting what a server sent: one line, at most n bytes, valid UTF-8 (bad bytes become U+FFFD).
std::string clip(std::string s, std::size_t n) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return tok::utf8_sanitize(s.size() > n ? s.substr(0, n) + "..." : s);
}

}  // namespace

std::string request_body(const EndpointOptions& ep, const PromptSpec& p) {
  nlohmann::json j;
  if (!ep.model.empty()) j["model"] = ep.model;
  if (ep.endpoint == "chat")
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", p.text}}});
  else
    j["prompt"] = p.text;
  j["max_tokens"] = p.max_tokens;
  j["temperature"] = 0;
  j["stream"] = ep.stream;
  if (ep.stream) j["stream_options"] = {{"include_usage", true}};
  if (ep.ignore_eos) j["ignore_eos"] = true;
  return j.dump();
}

std::vector<long long> apportion_tokens(const std::vector<std::size_t>& text_bytes, long long n_tokens) {
  const std::size_t n = text_bytes.size();
  std::vector<long long> k(n, 0);
  if (n == 0 || n_tokens <= 0) return k;
  long long left = n_tokens;
  if (n_tokens >= static_cast<long long>(n)) {
    std::fill(k.begin(), k.end(), 1);
    left -= static_cast<long long>(n);
  }
  double total = 0;
  for (auto b : text_bytes) total += static_cast<double>(b);
  if (left == 0 || total == 0) {
    for (std::size_t i = 0; left > 0; i = (i + 1) % n, --left) ++k[i];
    return k;
  }
  std::vector<std::pair<double, std::size_t>> rem;
  long long given = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double share = static_cast<double>(left) * static_cast<double>(text_bytes[i]) / total;
    const auto whole = static_cast<long long>(share);
    k[i] += whole;
    given += whole;
    rem.emplace_back(share - static_cast<double>(whole), i);
  }
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; given < left; ++i, ++given) ++k[rem[i % n].second];
  return k;
}

void StreamAccounting::feed(std::string_view bytes, Clock::time_point t) {
  line_buf_.append(bytes);
  std::size_t pos = 0;
  for (;;) {
    // A line ends in CRLF, LF or CR alone (the SSE spec allows all three).
    const char* base = line_buf_.data();
    const char* from = base + std::max(pos, scanned_);
    const char* stop = base + line_buf_.size();
    const char* nl = static_cast<const char*>(std::memchr(from, '\n', static_cast<std::size_t>(stop - from)));
    const char* cr = static_cast<const char*>(std::memchr(from, '\r', static_cast<std::size_t>((nl ? nl : stop) - from)));
    if (!nl && !cr) {
      scanned_ = line_buf_.size();
      break;
    }
    const std::size_t end = static_cast<std::size_t>((cr ? cr : nl) - base);
    std::size_t next = end + 1;
    if (line_buf_[end] == '\r') {
      if (next == line_buf_.size()) {  // its LF may be in the next piece
        scanned_ = end;
        break;
      }
      if (line_buf_[next] == '\n') ++next;
    }
    std::string line = line_buf_.substr(pos, end - pos);
    pos = next;
    if (line.empty()) {  // end of an event
      if (!data_.empty()) on_event(data_, t);
      data_.clear();
      continue;
    }
    if (line[0] == ':') continue;  // comment / keep-alive
    const auto colon = line.find(':');
    const std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (field == "data") {
      if (!data_.empty()) data_ += "\n";
      data_ += value;
    } else if (field != "event" && field != "id" && field != "retry" && error_.empty()) {
      error_ = "malformed SSE: unexpected line '" + clip(line, 60) + "'";
    }
  }
  line_buf_.erase(0, pos);
  scanned_ = scanned_ > pos ? scanned_ - pos : 0;
}

void StreamAccounting::on_event(const std::string& data, Clock::time_point t) {
  any_event_ = true;
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (error_.empty()) error_ = "malformed SSE: data is not JSON: '" + clip(data, 60) + "'";
    return;
  }
  if (j.contains("error")) {
    if (error_.empty()) error_ = "error event: " + clip(error_message(j), 120);
    return;
  }
  long long cumulative = -1;
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) prompt_tokens_ = u["prompt_tokens"].get<long long>();
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      completion_tokens_ = u["completion_tokens"].get<long long>();
      cumulative = completion_tokens_;
    }
  }
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const auto& c = std::as_const(j)["choices"][0];  // may be any JSON value: a hostile server's choice
    if (c.is_object() && c.contains("finish_reason") && c["finish_reason"].is_string()) finish_reason_seen_ = true;
  }
  const std::string text = chunk_text(j);
  if (!text.empty()) chunks_.push_back({t, text.size(), cumulative});
}

void StreamAccounting::finish(RequestSample& s, Clock::time_point end, long long fallback_input_tokens) {
  // A last event without its closing blank line still counts (some servers end on "data: [DONE]\n").
  if (!line_buf_.empty()) feed("\n", end);
  if (!data_.empty()) on_event(data_, end);
  data_.clear();
  s.e2e_ms = ms_between(sent_, end);
  if (!error_.empty()) {
    s.error = error_;
    return;
  }
  if (!any_event_) {
    s.error = "malformed SSE: no data events in the response";
    return;
  }
  if (!done_ && !finish_reason_seen_) {
    s.error = "stream ended early (no finish_reason, no [DONE])";
    return;
  }
  if (chunks_.empty() && completion_tokens_ <= 0) {
    s.error = done_ ? "no tokens: the stream held only [DONE]" : "no tokens: the stream finished without any text";
    return;
  }
  s.ok = true;
  s.chunks = static_cast<int>(chunks_.size());
  // Every chunk with text is at least one token: usage that says fewer (0 with text streamed) is wrong, and
  // the streamed chunks are counted instead, flagged as estimated.
  const bool usage_ok = completion_tokens_ >= 0 && completion_tokens_ >= static_cast<long long>(chunks_.size());
  s.usage_reported = usage_ok;
  s.output_tokens = usage_ok ? completion_tokens_ : static_cast<long long>(chunks_.size());
  s.input_tokens = prompt_tokens_ >= 0 ? prompt_tokens_ : fallback_input_tokens;
  s.usage_reported = s.usage_reported && prompt_tokens_ >= 0;
  if (chunks_.empty()) return;
  s.ttft_ms = ms_between(sent_, chunks_.front().t);
  if (s.output_tokens > 1) s.tpot_ms = (s.e2e_ms - s.ttft_ms) / static_cast<double>(s.output_tokens - 1);

  // Tokens per chunk: exact from per-chunk cumulative usage when every chunk has it, else by text bytes.
  std::vector<long long> k;
  const bool per_chunk = usage_ok && std::all_of(chunks_.begin(), chunks_.end(), [](const Chunk& c) { return c.cumulative_tokens >= 0; });
  if (per_chunk) {
    long long prev = 0;
    for (const auto& c : chunks_) {
      k.push_back(std::max(0LL, c.cumulative_tokens - prev));
      prev = c.cumulative_tokens;
    }
  } else {
    std::vector<std::size_t> bytes;
    for (const auto& c : chunks_) bytes.push_back(c.text_bytes);
    k = apportion_tokens(bytes, s.output_tokens);
  }
  double carried_ms = 0;
  for (std::size_t i = 1; i < chunks_.size(); ++i) {
    const double gap = ms_between(chunks_[i - 1].t, chunks_[i].t) + carried_ms;
    if (k[i] == 0) {
      carried_ms = gap;
      continue;
    }
    carried_ms = 0;
    for (long long n = 0; n < k[i]; ++n) s.itl_ms.push_back(gap / static_cast<double>(k[i]));
  }
}

RequestSample run_request(const EndpointOptions& ep, const PromptSpec& p, Clock::time_point level_start, const std::atomic<bool>* cancel) {
  RequestSample s;
  HttpRequest req;
  req.method = "POST";
  req.path = ep.url.path_prefix + (ep.endpoint == "chat" ? "/chat/completions" : "/completions");
  req.headers = {{"Content-Type", "application/json"}, {"Accept", ep.stream ? "text/event-stream" : "application/json"}};
  if (!ep.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + ep.api_key);
  req.body = request_body(ep, p);
  req.timeout_s = ep.timeout_s;

  const Clock::time_point sent = Clock::now();
  s.start_s = std::chrono::duration<double>(sent - level_start).count();
  StreamAccounting acct(sent);
  std::string raw;  // the body as received, for error messages and non-streamed answers
  Clock::time_point last = sent;
  std::size_t received = 0;
  const HttpResult r = http_send(
      ep.url, req,
      [&](std::string_view piece) {
        last = Clock::now();
        received += piece.size();
        if (received > kMaxResponseBytes) return false;  // a runaway server: stop reading, fail this request
        if (raw.size() < 4096 || !ep.stream) raw.append(piece);
        if (ep.stream) acct.feed(piece, last);
        return true;
      },
      cancel);
  const Clock::time_point end = r.ok ? last : Clock::now();
  s.e2e_ms = ms_between(sent, end);
  if (!r.ok) {
    s.error = received > kMaxResponseBytes ? fmt::format("response body over {} MiB", kMaxResponseBytes >> 20) : r.error;
    return s;
  }
  if (r.status != 200) {
    nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
    const std::string why = !j.is_discarded() && j.is_object() && j.contains("error") ? error_message(j) : raw;
    s.error = fmt::format("HTTP {}: {}", r.status, clip(why, 120));
    return s;
  }
  if (ep.stream) {
    acct.finish(s, end, p.input_tokens);
    return s;
  }
  nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    s.error = "malformed response: body is not JSON";
    return s;
  }
  if (j.contains("error")) {
    s.error = "error response: " + clip(error_message(j), 120);
    return s;
  }
  s.ok = true;
  const auto& u = j.contains("usage") && j["usage"].is_object() ? j["usage"] : nlohmann::json::object();
  s.usage_reported = u.contains("completion_tokens") && u.contains("prompt_tokens");
  s.input_tokens = u.value("prompt_tokens", p.input_tokens);
  s.output_tokens = u.value("completion_tokens", 0LL);
  return s;
}

}  // namespace mo::bench
