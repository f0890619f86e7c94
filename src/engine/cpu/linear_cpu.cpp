#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "../backend/cpu_ops.h"
#include "mo/engine/device_model.h"
#include "mo/engine/ops/linear.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "ftile.h"
#include "q4z.h"
#include "q8_linear.h"
#include "qdot.h"

namespace mo::ops {

void matrix_row(const engine::Matrix& w, std::int64_t r, float* out) {
  if (w.type == engine::kQ4zType) return q4z::matrix_row(w, r, out);  // engine-internal INT4 blocks, maybe column-permuted
  gguf::dequantize_row(w.type, w.row(r), out, w.cols);
}

namespace {

// Types without a fused kernel: each row is decoded once into a thread-local buffer and dotted
// with every token.
void linear_by_rows(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool) {
  const std::int64_t in = w.cols, out = w.rows;
  pool.parallel_for(
      0, out,
      [&](std::int64_t r0, std::int64_t r1, int) {
        thread_local std::vector<float> row;
        if (static_cast<std::int64_t>(row.size()) < in) row.resize(in);
        for (std::int64_t r = r0; r < r1; ++r) {
          matrix_row(w, r, row.data());
          for (std::int64_t t = 0; t < n; ++t) y[t * out + r] = dot_f32(x + t * in, row.data(), in);
        }
      },
      4);
}

}  // namespace

void set_int_dot(bool on) { q8::set_int_dot(on); }
bool int_dot() { return q8::int_dot(); }

void linear(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool, Batching batching) {
  // Packed-only (dummy AWQ) weights: the reference kernel of the device layout.
  if (w.type == engine::kPackedOnlyType) return engine::cpu_dev::linear(x, n, engine::packed_host_view(w), y, pool);
  if (w.type == engine::kQ4zType) {  // AWQ / GPTQ INT4: integer dot with 8-bit activations
    if (q8::int_dot()) return q4z::linear(x, n, w, y, pool);
    return linear_by_rows(x, n, w, y, pool);
  }
  if (q8::linear_int(x, n, w, y, pool)) return;  // GGUF quant types: integer dot with 8-bit activations (q8.h)
  if (batching == Batching::blas && n >= 16 && w.type == 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(w.rows), static_cast<int>(w.cols), 1.0f, x,
                static_cast<int>(w.cols), reinterpret_cast<const float*>(w.bytes.data()), static_cast<int>(w.cols), 0.0f, y,
                static_cast<int>(w.rows));
    return;
  }
  // F32 / F16 / BF16: register-blocked tiles, batch-invariant (src/engine/cpu/ftile.h).
  if (ftile::supports(w.type) && ftile::enabled()) return ftile::linear(x, n, w, y, pool);
  const qdot::RowDot dot = qdot::row_dot(w.type, simd_level());
  const GgmlTypeInfo* info = ggml_type_info(w.type);
  // A row that is not whole blocks goes the row-by-row way, whose dequantize_row names the error.
  if (dot == nullptr || info == nullptr || w.cols % info->block_size != 0) return linear_by_rows(x, n, w, y, pool);
  const std::int64_t in = w.cols, out = w.rows;
  // Rows of W split across threads. Each thread walks its rows in tiles small enough to stay in L1
  // and, per tile, takes the tokens kMaxTokens at a time, so each row is decoded once per token
  // group while that group's activations stay cached.
  constexpr std::int64_t kRowTile = 16;
  pool.parallel_for(
      0, out,
      [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::int64_t rt = r0; rt < r1; rt += kRowTile) {
          const std::int64_t re = std::min(rt + kRowTile, r1);
          for (std::int64_t t0 = 0; t0 < n; t0 += qdot::kMaxTokens) {
            const int nt = static_cast<int>(std::min<std::int64_t>(qdot::kMaxTokens, n - t0));
            for (std::int64_t r = rt; r < re; ++r) dot(w.row(r), in, x + t0 * in, in, nt, y + t0 * out + r, out);
          }
        }
      },
      4);
}

}  // namespace mo::ops
