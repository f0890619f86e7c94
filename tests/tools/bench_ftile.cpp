// Speed of ops::linear on float weights: the float-tile kernels (src/engine/cpu/ftile.h) against the
// qdot row kernels they replaced, on SmolLM2-135M's shapes at decode and prefill token counts.
//   mo_tool_bench_ftile [--types f32,f16,bf16] [--n 1,8,512] [--threads 1,2] [--min-time 0.3]
//                       [--shapes 1536x576,576x1536,49152x576] (rows x cols; e.g. 8192x2048 for a 1B model's FFN)
// Prints GFLOP/s (2·rows·cols·n per call) by wall clock and by CPU time (flops / (process CPU seconds /
// threads): what the threads would do on cores of their own; the wall figure suffers when the machine
// is shared), weight GB/s for n = 1, and the load average beside every row.
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../../src/engine/cpu/ftile.h"
#include "mo/core/half.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Speed {
  double wall_gflops, cpu_gflops, gbs;
};

// Repeats ops::linear until min_time seconds of wall clock have passed (at least twice: one warm-up).
Speed time_linear(const mo::engine::Matrix& m, const std::vector<float>& x, std::int64_t n, std::vector<float>& y, mo::ThreadPool& pool,
                  double min_time) {
  mo::ops::linear(x.data(), n, m, y.data(), pool);
  int reps = 0;
  const double c0 = cpu_seconds();
  const auto w0 = std::chrono::steady_clock::now();
  double wall = 0;
  do {
    mo::ops::linear(x.data(), n, m, y.data(), pool);
    ++reps;
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  } while (wall < min_time);
  const double cpu = (cpu_seconds() - c0) / pool.size();
  const double flops = 2.0 * static_cast<double>(m.rows * m.cols * n) * reps;
  return {flops / wall / 1e9, flops / cpu / 1e9, static_cast<double>(m.bytes.size()) * reps / wall / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"f32", "f16", "bf16"};
  std::vector<std::int64_t> ns = {1, 8, 512};
  std::vector<int> threads = {1, 2};
  double min_time = 0.3;
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{1536, 576}, {576, 1536}, {49152, 576}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--types")
      types = split(v);
    else if (a == "--n") {
      ns.clear();
      for (auto& s : split(v)) ns.push_back(std::stoll(s));
    } else if (a == "--threads") {
      threads.clear();
      for (auto& s : split(v)) threads.push_back(std::stoi(s));
    } else if (a == "--min-time") {
      min_time = std::stod(v);
    } else if (a == "--shapes") {
      shapes.clear();
      for (auto& s : split(v)) shapes.emplace_back(std::stoll(s), std::stoll(s.substr(s.find('x') + 1)));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> val(-0.05f, 0.05f);
  fmt::print("simd {}; GFLOP/s wall (cpu-time normalized); load average before: {}\n", mo::ops::simd_level_name(mo::ops::simd_level()),
             load_average());
  fmt::print("{:<5} {:>12} {:>4} {:>3} | {:>16} | {:>16} | {:>6} | {:>14} | {}\n", "type", "shape", "n", "thr", "old", "new", "speedup",
             "new GB/s (n=1)", "load avg");
  for (const std::string& tname : types) {
    const std::uint32_t type = tname == "f32" ? 0 : tname == "f16" ? 1 : 30;
    const std::size_t es = type == 0 ? 4 : 2;
    for (auto [rows, cols] : shapes) {
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * cols) * es);
      for (std::int64_t i = 0; i < rows * cols; ++i) {
        const float v = val(rng);
        if (type == 0)
          std::memcpy(bytes.data() + 4 * i, &v, 4);
        else {
          const std::uint16_t h = type == 1 ? mo::f32_to_f16(v) : mo::f32_to_bf16(v);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      }
      mo::engine::Matrix m;
      m.name = "w", m.type = type, m.rows = rows, m.cols = cols, m.row_bytes = static_cast<std::size_t>(cols) * es, m.bytes = bytes;
      for (std::int64_t n : ns) {
        std::vector<float> x(static_cast<std::size_t>(n * cols)), y(static_cast<std::size_t>(n * rows));
        for (auto& f : x) f = val(rng) * 20;
        for (int t : threads) {
          mo::ThreadPool pool(t);
          mo::ops::ftile::set_enabled(false);
          const Speed old = time_linear(m, x, n, y, pool, min_time);
          mo::ops::ftile::set_enabled(true);
          const Speed neu = time_linear(m, x, n, y, pool, min_time);
          fmt::print("{:<5} {:>12} {:>4} {:>3} | {:>6.1f} ({:>6.1f}) | {:>6.1f} ({:>6.1f}) | {:>5.2f}x | {:>14} | {}\n", tname,
                     fmt::format("{}x{}", rows, cols), n, t, old.wall_gflops, old.cpu_gflops, neu.wall_gflops, neu.cpu_gflops,
                     neu.cpu_gflops / old.cpu_gflops, n == 1 ? fmt::format("{:.1f}", neu.gbs) : "", load_average());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
