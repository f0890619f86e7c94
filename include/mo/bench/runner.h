#pragma once
// Drives the load: for each concurrency level, warm-up requests (not counted), then the measured
// requests, closed loop (each of `concurrency` workers sends its next request when the last one
// ends) or open loop (Poisson/constant arrivals at `request_rate`, `concurrency` capping requests in flight).
#include <atomic>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/bench/metrics.h"
#include "mo/bench/request.h"
#include "mo/bench/workload.h"

namespace mo::bench {

struct RunOptions {
  EndpointOptions ep;
  std::vector<int> levels;  // concurrency per level
  double request_rate = 0;  // 0: closed loop
  std::string arrival = "poisson";
  long long warmup = 1;  // requests per level before measuring
  WorkloadSpec workload;
  Slo slo;
  bool progress = true;  // live line on stderr
};

struct LevelResult {
  int concurrency = 0;
  double request_rate = 0;
  std::vector<RequestSample> samples;  // the requests that were sent, in send order
  LevelSummary summary;
  bool interrupted = false;
};

struct RunResult {
  std::vector<LevelResult> levels;
  bool interrupted = false;
  PromptCalibration calibration;
};

// "1,4,16" -> {1, 4, 16}; throws UsageError naming --concurrency on anything else.
std::vector<int> parse_levels(const std::string& text);

// One level. `stop`, set from another thread (Ctrl-C), ends it early: nothing new is sent and
// requests in flight are cancelled (counted as cancelled, not failed).
LevelResult run_level(const RunOptions& o, const PromptCalibration& cal, int concurrency, const std::atomic<bool>& stop);

// Every level in order; after a stop the remaining levels are skipped.
RunResult run_benchmark(const RunOptions& o, const std::atomic<bool>& stop);

}  // namespace mo::bench
