// Dispatch of the float-tile kernels (ftile.h): level choice, the on/off switch, the thread split.
#include "ftile.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace mo::ops::ftile {
namespace {

bool env_enabled() {
  const char* v = std::getenv("MO_FTILE");
  return v == nullptr || std::strcmp(v, "0") != 0;
}
std::atomic<bool> g_enabled{env_enabled()};

}  // namespace

bool supports(std::uint32_t type) { return type == 0 || type == 1 || type == 30; }

RowRange kernel(std::uint32_t type, SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512: return kernel_avx512(type);
    case SimdLevel::avx2: return kernel_avx2(type);
    default: return kernel_scalar(type);
  }
}

void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool) {
  const RowRange run = kernel(w.type, simd_level());
  const Weights ww{w.type, w.bytes.data(), w.row_bytes, w.cols};
  // Static row split: each thread's rows, whatever their range, give the same per-row results.
  pool.parallel_for(
      0, w.rows, [&](std::int64_t r0, std::int64_t r1, int) { run(ww, r0, r1, x, w.cols, n, y, w.rows); }, 16);
}

void set_enabled(bool on) { g_enabled = on; }
bool enabled() { return g_enabled; }

}  // namespace mo::ops::ftile
