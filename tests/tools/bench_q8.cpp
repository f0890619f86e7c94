// Speed of ops::linear on quantized GGUF weights: the integer-dot kernels (src/engine/cpu/q8.h) against
// the older f32 row kernels (qdot.h), on SmolLM2-135M's shapes.
//   mo_tool_bench_q8 [--types q4_0,q8_0,...] [--nt 1,512] [--shapes 8192x2048,2048x8192] [--min-time 0.3]
// Prints GFLOP/s and weight GB/s (bytes of W read once per call) for nt = 1 and 512 tokens (--nt), 1 and 2
// threads. Each figure is the fastest call seen within --min-time seconds (robust on a shared machine).
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../src/engine/cpu/q8_linear.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"
#include "mo/formats/ggml_types.h"
#include "mo/quant/gguf_quantize.h"

namespace {

using namespace mo;

double best_seconds(double min_time, const std::function<void()>& f) {
  using Clock = std::chrono::steady_clock;
  f();  // warm-up: caches, thread-local buffers
  double best = 1e30;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  } while (std::chrono::duration<double>(Clock::now() - start).count() < min_time);
  return best;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p <= s.size()) {
    const std::size_t q = s.find(',', p);
    out.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"q4_0", "q8_0", "q4_1", "q5_0", "q6_K", "q4_K", "q5_1", "q5_K", "q3_K", "q2_K"};
  double min_time = 0.3;
  std::vector<std::int64_t> token_counts = {1, 512};
  struct Shape {
    std::int64_t rows, cols;
  };
  std::vector<Shape> shapes = {{1536, 576}, {576, 1536}, {49152, 576}};  // SmolLM2-135M's (rows x cols)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--types") == 0)
      types = split(argv[i + 1]);
    else if (std::strcmp(argv[i], "--nt") == 0) {
      token_counts.clear();
      for (const std::string& v : split(argv[i + 1])) token_counts.push_back(std::stoll(v));
    } else if (std::strcmp(argv[i], "--shapes") == 0) {
      shapes.clear();
      for (const std::string& v : split(argv[i + 1])) shapes.push_back({std::stoll(v), std::stoll(v.substr(v.find('x') + 1))});
    } else if (std::strcmp(argv[i], "--min-time") == 0)
      min_time = std::stod(argv[i + 1]);
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  fmt::print("simd {}\n{:<5} {:>12} {:>4} {:>2} | {:>9} {:>9} | {:>9} {:>9} | {:>6}\n", ops::simd_level_name(ops::simd_level()), "type",
             "shape", "nt", "th", "old GF/s", "old GB/s", "new GF/s", "new GB/s", "speedup");
  for (const std::string& name : types) {
    std::uint32_t type = 0;
    for (std::uint32_t t = 0; t < 40; ++t)
      if (const GgmlTypeInfo* info = ggml_type_info(t); info != nullptr && name == info->name) type = t;
    const GgmlTypeInfo* info = ggml_type_info(type);
    if (type == 0 || info == nullptr) {
      fmt::print("unknown type {}\n", name);
      continue;
    }
    for (const Shape& s : shapes) {
      if (s.cols % info->block_size != 0) continue;  // k-quants need 256 | cols
      const std::size_t rb = static_cast<std::size_t>(s.cols / info->block_size) * info->type_size;
      std::vector<std::uint8_t> bytes(rb * s.rows);
      std::vector<float> src(static_cast<std::size_t>(s.cols));
      for (std::int64_t r = 0; r < s.rows; ++r) {
        for (float& v : src) v = nd(rng);
        quant::gguf_quantize_row(type, src.data(), bytes.data() + r * rb, s.cols);
      }
      const engine::Matrix w{"w", type, s.rows, s.cols, rb, bytes, nullptr, nullptr};
      for (std::int64_t nt : token_counts) {
        std::vector<float> x(static_cast<std::size_t>(nt * s.cols)), y(static_cast<std::size_t>(nt * s.rows));
        for (float& v : x) v = nd(rng);
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          double sec[2];
          for (int path = 0; path < 2; ++path) {
            ops::q8::set_int_dot(path == 1);
            sec[path] = best_seconds(min_time, [&] { ops::linear(x.data(), nt, w, y.data(), pool); });
          }
          ops::q8::set_int_dot(true);
          const double flop = 2.0 * static_cast<double>(s.rows * s.cols * nt), wbytes = static_cast<double>(bytes.size());
          fmt::print("{:<5} {:>5}x{:<6} {:>4} {:>2} | {:>9.1f} {:>9.2f} | {:>9.1f} {:>9.2f} | {:>5.2f}x\n", name, s.rows, s.cols, nt,
                     threads, flop / sec[0] * 1e-9, wbytes / sec[0] * 1e-9, flop / sec[1] * 1e-9, wbytes / sec[1] * 1e-9, sec[0] / sec[1]);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
