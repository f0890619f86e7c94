#include "request_head.h"

#include <fmt/format.h>

#include <algorithm>

namespace mo::serve {

namespace {

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x >= 'A' && x <= 'Z' ? x + 32 : x) == (y >= 'A' && y <= 'Z' ? y + 32 : y);
         });
}

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

// RFC 9110's token characters, the only ones a field name may hold.
bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// 'text' for a message: printable, others as \xNN, cut at about 60 bytes, so a hostile header cannot break the log line.
std::string quoted(std::string_view s) {
  std::string out = "'";
  std::size_t i = 0;
  for (; i < s.size() && out.size() < 60; ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u >= 0x7f || s[i] == '\\' || s[i] == '\'')
      out += fmt::format("\\x{:02x}", u);
    else
      out += s[i];
  }
  return out + (i < s.size() ? "...'" : "'");
}

}  // namespace

HeadReader::State HeadReader::refuse(int status, std::string message) {
  refusal_ = {status, std::move(message)};
  return state_ = State::refused;
}

HeadReader::State HeadReader::add(std::string_view bytes) {
  if (state_ != State::more) return state_;
  buf_.append(bytes);
  std::size_t i = scanned_;
  // Every check is made at the byte where it fails, so the verdict does not depend on how reads split the head.
  for (; i < buf_.size(); ++i) {
    if (i >= limits_.max_bytes)
      return refuse(431, fmt::format("the request head is over {} bytes (request line and header fields)", limits_.max_bytes));
    if (line_start_ > 0 && i - line_start_ >= limits_.max_field_bytes) {
      const std::string_view line(buf_.data() + line_start_, i - line_start_);
      return refuse(431,
                    fmt::format("header {} is over {} bytes", quoted(trim_ows(line.substr(0, line.find(':')))), limits_.max_field_bytes));
    }
    if (buf_[i] == '\r') {
      if (i + 1 == buf_.size()) break;  // its LF has not come yet
      if (buf_[i + 1] != '\n') return refuse(400, "a bare CR in the request head: its lines end with CR LF");
      continue;
    }
    if (buf_[i] != '\n') continue;
    if (i == 0 || buf_[i - 1] != '\r') return refuse(400, "a line of the request head ends with a bare LF: its lines end with CR LF");
    const std::string_view line(buf_.data() + line_start_, i - 1 - line_start_);
    const bool first = line_start_ == 0;
    line_start_ = i + 1;
    State s = State::more;
    if (first) {
      s = request_line(line);
    } else if (line.empty()) {
      head_size_ = i + 1;
      return end_of_head();
    } else {
      s = field_line(line);
    }
    if (s != State::more) return s;
  }
  scanned_ = i;
  return State::more;
}

HeadReader::State HeadReader::request_line(std::string_view line) {
  if (line.empty()) return refuse(400, "the request line is empty");
  for (char c : line)
    if (is_control(c) || c == '\t')
      return refuse(400, fmt::format("the request line holds the control byte 0x{:02x}", static_cast<unsigned char>(c)));
  return State::more;
}

HeadReader::State HeadReader::field_line(std::string_view line) {
  if (++fields_ > limits_.max_fields) return refuse(431, fmt::format("more than {} header fields", limits_.max_fields));
  if (is_ows(line.front()))
    return refuse(400, "a header line begins with whitespace (obsolete line folding): send each header on one line");
  const std::size_t colon = line.find(':');
  const std::string_view name = line.substr(0, colon);
  if (colon == std::string_view::npos) return refuse(400, fmt::format("the header line {} has no colon", quoted(line)));
  if (name.empty()) return refuse(400, "a header line has no name before its colon");
  if (is_ows(name.back())) return refuse(400, fmt::format("whitespace between the header name {} and its colon", quoted(trim_ows(name))));
  if (!std::all_of(name.begin(), name.end(), is_tchar))
    return refuse(400, fmt::format("the header name {} holds a character other than letters, digits and !#$%&'*+-.^_`|~", quoted(name)));
  const std::string_view value = trim_ows(line.substr(colon + 1));
  // Authorization goes whole to the API key check, which answers any wrong credential with 401.
  if (!iequals(name, "Authorization"))
    for (char c : value)
      if (is_control(c))
        return refuse(400, fmt::format("header {} holds the control byte 0x{:02x} (NUL and other control characters are not allowed)",
                                       quoted(name), static_cast<unsigned char>(c)));
  if (iequals(name, "Content-Length")) {
    ++content_lengths_;
    if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return refuse(400, fmt::format("Content-Length: expected the body's size in bytes (digits only), got {}", quoted(value)));
  } else if (iequals(name, "Transfer-Encoding")) {
    ++transfer_encodings_;
    if (!iequals(value, "chunked"))
      return refuse(400, fmt::format("Transfer-Encoding: expected 'chunked', the only coding served, got {}", quoted(value)));
    chunked_ = true;
  }
  return State::more;
}

HeadReader::State HeadReader::end_of_head() {
  // Two lengths, or a length and chunking, frame the body ambiguously (request smuggling).
  if (content_lengths_ > 1 || transfer_encodings_ > 1 || (content_lengths_ > 0 && transfer_encodings_ > 0))
    return refuse(400, "ambiguous body framing: send one Content-Length or Transfer-Encoding: chunked, not both or two");
  return state_ = State::done;
}

bool ChunkedFraming::add(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    switch (state_) {
      case State::size: {
        const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit >= 0 && (left_ >> 60) == 0) {
          left_ = left_ * 16 + static_cast<std::uint64_t>(digit);
          ++digits_;
        } else if (digits_ > 0 && (c == ';' || is_ows(c))) {
          state_ = State::ext;
        } else if (digits_ > 0 && c == '\r') {
          state_ = State::size_lf;
        } else {
          state_ = State::broken;
        }
        break;
      }
      case State::ext:
        if (c == '\r')
          state_ = State::size_lf;
        else if (is_control(c))
          state_ = State::broken;
        break;
      case State::size_lf:
        state_ = c != '\n' ? State::broken : left_ == 0 ? State::end_cr : State::data;
        digits_ = 0;
        break;
      case State::data: {
        const std::uint64_t n = std::min<std::uint64_t>(left_, bytes.size() - i);
        left_ -= n;
        i += n - 1;
        if (left_ == 0) state_ = State::data_cr;
        break;
      }
      case State::data_cr: state_ = c == '\r' ? State::data_lf : State::broken; break;
      case State::data_lf: state_ = c == '\n' ? State::size : State::broken; break;
      case State::end_cr: state_ = c == '\r' ? State::end_lf : State::broken; break;
      case State::end_lf: state_ = c == '\n' ? State::done : State::broken; break;
      case State::done: return true;
      case State::broken: return false;
    }
  }
  return state_ != State::broken;
}

}  // namespace mo::serve
