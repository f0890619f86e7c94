#include "mo/bench/runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <latch>
#include <mutex>
#include <thread>

#include "mo/core/error.h"
#include "mo/core/progress.h"
#include "mo/core/strings.h"

namespace mo::bench {
namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs `prompts` with `workers` threads; request i is not sent before arrival[i] seconds.
struct Dispatch {
  Dispatch(const EndpointOptions& e, const std::vector<PromptSpec>& p, const std::vector<double>& a, const std::atomic<bool>& s)
      : ep(e), prompts(p), arrival(a), stop(s) {}
  const EndpointOptions& ep;
  const std::vector<PromptSpec>& prompts;
  const std::vector<double>& arrival;
  const std::atomic<bool>& stop;
  Clock::time_point start = Clock::now();
  std::vector<RequestSample> samples = std::vector<RequestSample>(prompts.size());
  std::vector<char> sent = std::vector<char>(prompts.size(), 0);
  std::atomic<long long> next{0}, done{0}, failed{0}, out_tokens{0};
  std::atomic<int> in_flight{0}, peak{0}, live_workers{0};
  std::mutex end_mu;
  Clock::time_point last_end = start;

  void worker() {
    for (;;) {
      const long long i = next.fetch_add(1);
      if (i >= static_cast<long long>(prompts.size())) return;
      const auto at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival[i]));
      while (!stop.load() && Clock::now() < at)
        std::this_thread::sleep_for(std::min<Clock::duration>(at - Clock::now(), std::chrono::milliseconds(20)));
      if (stop.load()) return;
      const int now = ++in_flight;
      for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {}
      sent[i] = 1;
      samples[i] = run_request(ep, prompts[i], start, &stop);
      --in_flight;
      {
        std::lock_guard<std::mutex> lock(end_mu);
        last_end = std::max(last_end, Clock::now());
      }
      if (!samples[i].ok && samples[i].error != "cancelled") ++failed;
      out_tokens += samples[i].output_tokens;
      ++done;
    }
  }

  void run(int workers, Progress* progress) {
    // All workers exist before the clock starts, so thread start-up is not measured as load.
    std::latch ready(workers);
    std::promise<void> go;
    std::shared_future<void> go_signal = go.get_future().share();
    std::vector<std::thread> pool;
    live_workers = workers;
    for (int w = 0; w < workers; ++w)
      pool.emplace_back([this, &ready, go_signal] {
        ready.count_down();
        go_signal.wait();
        worker();
        --live_workers;
      });
    ready.wait();
    start = Clock::now();
    last_end = start;
    go.set_value();
    if (progress) {
      const auto every = std::chrono::milliseconds(isatty(2) ? 500 : 5000);
      auto next_print = Clock::now();
      while (live_workers.load() > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (Clock::now() < next_print) continue;
        next_print = Clock::now() + every;
        const double el = std::max(1e-9, seconds_since(start));
        progress->update(done.load(), fmt::format("{:.2f} req/s, {:.1f} out tok/s, {} in flight, {} errors", done.load() / el,
                                                  out_tokens.load() / el, in_flight.load(), failed.load()));
      }
    }
    for (auto& t : pool) t.join();
  }
};

}  // namespace

std::vector<int> parse_levels(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_trimmed(text)) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 100000)
      throw UsageError(fmt::format("--concurrency '{}': expected integers from 1 to 100000 separated by commas, e.g. 1,4,16", text));
    out.push_back(static_cast<int>(v));
  }
  return out;
}

LevelResult run_level(const RunOptions& o, const PromptCalibration& cal, int concurrency, const std::atomic<bool>& stop) {
  LevelResult lr;
  lr.concurrency = concurrency;
  lr.request_rate = o.request_rate;
  const std::string label = o.request_rate > 0 ? fmt::format("bench rate {:g}/s cap {}", o.request_rate, concurrency)
                                               : fmt::format("bench concurrency {}", concurrency);
  if (o.warmup > 0 && !stop.load()) {
    WorkloadSpec ws = o.workload;
    ws.num_prompts = o.warmup;
    const auto prompts = make_prompts(ws, cal, 1000 + static_cast<std::uint64_t>(concurrency));
    const std::vector<double> now(prompts.size(), 0.0);
    Dispatch warm{o.ep, prompts, now, stop};
    warm.run(std::min<int>(concurrency, static_cast<int>(prompts.size())), nullptr);
  }
  if (stop.load()) {
    lr.interrupted = true;
    return lr;
  }
  const auto prompts = make_prompts(o.workload, cal, static_cast<std::uint64_t>(concurrency));
  const auto arrival = arrival_times(static_cast<long long>(prompts.size()), o.request_rate, o.arrival,
                                     o.workload.seed + static_cast<std::uint64_t>(concurrency));
  Dispatch d{o.ep, prompts, arrival, stop};
  Progress progress(label, static_cast<std::int64_t>(prompts.size()), "requests");
  d.run(std::min<int>(concurrency, static_cast<int>(prompts.size())), o.progress ? &progress : nullptr);
  if (o.progress) progress.clear();
  for (std::size_t i = 0; i < prompts.size(); ++i)
    if (d.sent[i]) lr.samples.push_back(std::move(d.samples[i]));
  lr.interrupted = stop.load();
  const double duration = std::chrono::duration<double>(d.last_end - d.start).count();
  lr.summary = summarize(lr.samples, duration, d.peak.load(), o.slo);
  return lr;
}

RunResult run_benchmark(const RunOptions& o, const std::atomic<bool>& stop) {
  RunResult r;
  r.calibration = calibrate_prompts(o.ep);  // dataset runs use it to estimate lengths when usage is absent
  for (int c : o.levels) {
    if (stop.load()) {
      r.interrupted = true;
      break;
    }
    r.levels.push_back(run_level(o, r.calibration, c, stop));
    if (r.levels.back().interrupted) {
      r.interrupted = true;
      break;
    }
  }
  return r;
}

}  // namespace mo::bench
