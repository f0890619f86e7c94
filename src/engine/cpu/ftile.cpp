// Dispatch of the float-tile kernels (ftile.h): level choice, the on/off switch, the thread split, and
// the activations' rounding for 16-bit weights.
#include "ftile.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mo/core/half.h"

namespace mo::ops::ftile {
namespace {

bool env_enabled() {
  const char* v = std::getenv("MO_FTILE");
  return v == nullptr || std::strcmp(v, "0") != 0;
}
std::atomic<bool> g_enabled{env_enabled()};

// Activations rounded by the calling thread alone up to this many values (a few microseconds).
constexpr std::int64_t kRoundAlone = 16384;

}  // namespace

bool supports(std::uint32_t type) { return type == 0 || type == 1 || type == 30; }

RowRange16 kernel16(std::uint32_t type, SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512: return kernel16_avx512(type);
    case SimdLevel::avx2: return kernel16_avx2(type);
    default: return kernel16_scalar(type);
  }
}

void round_to_type(std::uint32_t type, const float* x, std::int64_t n, std::uint16_t* out) {
  if (simd_level() != SimdLevel::scalar) return round_to_type_avx2(type, x, n, out);  // every vector level has AVX2 + F16C
  for (std::int64_t k = 0; k < n; ++k) out[k] = type == 30 ? f32_to_bf16(x[k]) : f32_to_f16(x[k]);
}

RowRange kernel(std::uint32_t type, SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512: return kernel_avx512(type);
    case SimdLevel::avx2: return kernel_avx2(type);
    default: return kernel_scalar(type);
  }
}

void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool) {
  const SimdLevel level = simd_level();
  const Weights ww{w.type, w.bytes.data(), w.row_bytes, w.cols};
  if (w.type == 0) {
    const RowRange run = kernel(w.type, level);
    // Static row split: each thread's rows, whatever their range, give the same per-row results.
    pool.parallel_for(
        0, w.rows, [&](std::int64_t r0, std::int64_t r1, int) { run(ww, r0, r1, x, w.cols, n, y, w.rows); }, 16);
    return;
  }
  // 16-bit weights: x rounded to their type once, by all threads; then rows in chunks taken by whichever
  // thread is free (a row's result does not depend on who computes it, and a thread that the machine
  // slows down takes fewer chunks instead of holding up the call).
  thread_local std::vector<std::uint16_t> rounded;
  rounded.resize(static_cast<std::size_t>(n * w.cols));
  std::uint16_t* const xr = rounded.data();  // the caller's buffer: inside the lambdas `rounded` would be each worker's own
  if (n * w.cols <= kRoundAlone) {           // decode: not worth waking the pool for
    round_to_type(w.type, x, n * w.cols, xr);
  } else {
    pool.parallel_for(
        0, n, [&](std::int64_t t0, std::int64_t t1, int) { round_to_type(w.type, x + t0 * w.cols, (t1 - t0) * w.cols, xr + t0 * w.cols); });
  }
  const RowRange16 run = kernel16(w.type, level);
  const std::int64_t chunk = std::max<std::int64_t>(16, (w.rows / (8 * pool.size()) + 15) / 16 * 16);
  std::atomic<std::int64_t> next{0};
  pool.parallel_for(0, pool.size(), [&](std::int64_t, std::int64_t, int) {
    for (std::int64_t r0; (r0 = next.fetch_add(chunk)) < w.rows;) run(ww, r0, std::min(r0 + chunk, w.rows), xr, w.cols, n, y, w.rows);
  });
}

void set_enabled(bool on) { g_enabled = on; }
bool enabled() { return g_enabled; }

}  // namespace mo::ops::ftile
