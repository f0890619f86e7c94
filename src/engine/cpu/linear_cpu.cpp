#include <cstdint>
#include <vector>

#include "mo/engine/ops/linear.h"
#include "mo/io/gguf_dequant.h"

namespace mo::ops {

void matrix_row(const engine::Matrix& w, std::int64_t r, float* out) { gguf::dequantize_row(w.type, w.row(r), out, w.cols); }

void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool) {
  const std::int64_t in = w.cols, out = w.rows;
  // Rows of W split across threads; each thread decodes a row once and dots it with every token.
  pool.parallel_for(0, out, [&](std::int64_t r0, std::int64_t r1, int) {
    thread_local std::vector<float> row;
    if (static_cast<std::int64_t>(row.size()) < in) row.resize(in);
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* wr;
      if (w.type == 0 && reinterpret_cast<std::uintptr_t>(w.row(r)) % alignof(float) == 0) {
        wr = reinterpret_cast<const float*>(w.row(r));  // f32 rows are used in place
      } else {
        gguf::dequantize_row(w.type, w.row(r), row.data(), in);
        wr = row.data();
      }
      for (std::int64_t t = 0; t < n; ++t) y[t * out + r] = dot_f32(x + t * in, wr, in);
    }
  }, 4);
}

}  // namespace mo::ops
