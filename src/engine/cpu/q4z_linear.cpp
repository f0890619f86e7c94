// ops::linear for Q4Z matrices: activations gathered by the matrix's input permutation (act-order
// GPTQ), quantized once per call to BlockQ8, then the tile kernel over rows split across threads.
#include <algorithm>
#include <vector>

#include "q4z.h"

namespace mo::ops::q4z {

void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool) {
  const std::int64_t cols = w.cols, nb = cols / q8::kBlock;
  thread_local std::vector<float> gathered;
  thread_local std::vector<q8::BlockQ8> xq;
  xq.resize(static_cast<std::size_t>(n * nb));
  const float* src = x;
  if (w.in_perm) {
    gathered.resize(static_cast<std::size_t>(n * cols));
    const std::int32_t* p = w.in_perm->data();
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t i = 0; i < cols; ++i) gathered[t * cols + i] = x[t * cols + p[i]];
    src = gathered.data();
  }
  q8::quantize_rows(src, n, cols, cols, xq.data());
  const q8::Kernel k = q8::kernel_q4z(engine::kQ4zType, simd_level());
  const q8::BlockQ8* xb = xq.data();
  // Tokens in groups whose blocks stay in L2, rows in chunks whose blocks stay in L1 meanwhile.
  constexpr std::int64_t kRows = 16, kTokens = 64;
  pool.parallel_for(
      0, w.rows,
      [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t t0 = 0; t0 < n; t0 += kTokens) {
          const int nt = static_cast<int>(std::min(kTokens, n - t0));
          for (std::int64_t r = r0; r < r1; r += kRows) {
            const int nr = static_cast<int>(std::min(kRows, r1 - r));
            k(w.row(r), w.row_bytes, nr, xb + t0 * nb, nt, cols, y + t0 * w.rows + r, w.rows);
          }
        }
      },
      4);
}

}  // namespace mo::ops::q4z
