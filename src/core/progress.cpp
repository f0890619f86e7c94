#include "mo/core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace mo {

std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(std::string what, std::int64_t total, std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), start_(std::chrono::steady_clock::now()), tty_(isatty(2) != 0) {}

double Progress::elapsed_seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

// Off a terminal (a CI log, `2>file`) a line per item would flood the log: print the first update, each
// tenth of the total, the last, and otherwise at most one line per kLogInterval.
bool Progress::worth_a_log_line(std::int64_t done, double elapsed) {
  constexpr double kLogInterval = 30;  // seconds
  const std::int64_t tenth = total_ > 0 ? 10 * done / total_ : 10;
  const bool due = printed_lines_ == 0 || done >= total_ || tenth > last_tenth_ || elapsed - last_print_s_ >= kLogInterval;
  if (!due) return false;
  last_tenth_ = tenth;
  last_print_s_ = elapsed;
  ++printed_lines_;
  return true;
}

void Progress::update(std::int64_t done, const std::string& detail) {
  const double el = elapsed_seconds();
  if (!tty_ && !worth_a_log_line(done, el)) return;
  std::string eta = done > 0 && done < total_ ? fmt::format(", ETA {}", format_duration(el / done * (total_ - done))) : "";
  constexpr int kBar = 20;
  const int filled = total_ > 0 ? static_cast<int>(kBar * done / total_) : kBar;
  const std::string line = fmt::format("{}: {} {}/{} [{}{}] {} elapsed{}{}", what_, unit_, done, total_, std::string(filled, '#'),
                                       std::string(kBar - filled, '.'), format_duration(el), eta, detail.empty() ? "" : "  " + detail);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    open_line_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void Progress::clear() {
  if (open_line_) std::fprintf(stderr, "\r\033[K");
  open_line_ = false;
}

void Progress::finish() {
  if (open_line_) std::fprintf(stderr, "\n");
  open_line_ = false;
}

}  // namespace mo
