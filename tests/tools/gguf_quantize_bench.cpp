// Single-thread speed of mo::quant::gguf_quantize_row, in MB/s of f32 input (1 MB = 1e6 bytes).
//   mo_tool_gguf_quantize_bench [SECONDS_PER_CASE] [TYPE...]
// Each type is timed without and with an importance matrix on gaussian rows of 4096 weights (a
// typical hidden size); the default types are q4_K and q6_K.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"
#include "mo/quant/gguf_quantize.h"

namespace {

constexpr std::int64_t kRow = 4096;
constexpr std::int64_t kRows = 64;  // 1 MiB of f32 per pass

double mb_per_s(std::uint32_t type, const std::vector<float>& x, const float* importance, double seconds, std::vector<char>& out) {
  const std::uint64_t row_bytes = mo::ggml_row_bytes(type, kRow);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::int64_t rows_done = 0;
  double elapsed = 0;
  do {
    for (std::int64_t r = 0; r < kRows; ++r) {
      mo::quant::gguf_quantize_row(type, x.data() + r * kRow, out.data() + r * row_bytes, kRow, importance);
    }
    rows_done += kRows;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < seconds);
  return static_cast<double>(rows_done * kRow * static_cast<std::int64_t>(sizeof(float))) / elapsed / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const double seconds = argc > 1 ? std::stod(argv[1]) : 2.0;
    std::vector<std::string> names(argv + std::min(argc, 2), argv + argc);
    if (names.empty()) names = {"q4_K", "q6_K"};
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> x(kRow * kRows), importance(kRow);
    for (float& v : x) v = normal(rng);
    for (float& v : importance) v = u(rng) * u(rng);
    std::vector<char> out(kRow * kRows * sizeof(float));
    std::cout << "| type | MB/s f32 in, no importance | MB/s f32 in, with importance |\n|---|---|---|\n";
    for (const std::string& name : names) {
      const auto type = mo::ggml_type_from_name(name);
      if (!type || !mo::quant::gguf_can_quantize(*type)) throw mo::UsageError("cannot quantize to '" + name + "'");
      const double plain = mb_per_s(*type, x, nullptr, seconds, out);
      const double weighted = mb_per_s(*type, x, importance.data(), seconds, out);
      std::cout << fmt::format("| {} | {:.1f} | {:.1f} |\n", name, plain, weighted);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitUsage;
  }
}
