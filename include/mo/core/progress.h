#pragma once
// Progress of a long step on the terminal: "quantize: layer 7/30 [####......] 0:42 elapsed, ETA 2:18".
// Rewrites one line on a terminal (stderr); elsewhere (CI logs, 2>file) prints a dozen lines or so per
// bar: the first update, every tenth of the total, the last, and one at least every 30 s.
#include <chrono>
#include <cstdint>
#include <string>

namespace mo {

class Progress {
 public:
  Progress(std::string what, std::int64_t total, std::string unit);
  // `done` items finished; `detail` is appended (e.g. the current layer's decision summary).
  void update(std::int64_t done, const std::string& detail = "");
  void clear();  // erases the progress line so a log line can be printed in its place
  void finish();
  double elapsed_seconds() const;

 private:
  std::string what_, unit_;
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_;
  bool tty_;
  bool open_line_ = false;
  // Non-terminal throttling: the tenth of the total and the time of the last line printed.
  std::int64_t last_tenth_ = 0, printed_lines_ = 0;
  double last_print_s_ = 0;
  bool worth_a_log_line(std::int64_t done, double elapsed);
};

std::string format_duration(double seconds);  // "0:42", "12:05", "1:02:03"

}  // namespace mo
