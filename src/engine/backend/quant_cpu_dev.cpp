// The quantization ops on the CPU: BLAS and LAPACK, in the order of operations the host quantizers
// have always used (so a quantize run on the CPU backend writes the same codes as before).
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "cpu_ops.h"
#include "mo/formats/group_params.h"

namespace mo::engine::cpu_dev {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before) {
  if (n <= 0) return;
  // The batch's xᵀx in f32 (BLAS speed), then folded into the f64 running mean.
  std::unique_ptr<float[]> g(new float[static_cast<std::size_t>(d * d)]);
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(n), 1.0f, x, static_cast<int>(d), 0.0f, g.get(),
              static_cast<int>(d));
  const double keep = static_cast<double>(tokens_before) / static_cast<double>(tokens_before + n);
  const double a = 2.0 / static_cast<double>(tokens_before + n);
  for (std::int64_t i = 0; i < d; ++i) {
    for (std::int64_t j = i; j < d; ++j) {
      const double v = h[i * d + j] * keep + a * static_cast<double>(g[i * d + j]);
      h[i * d + j] = v;
      h[j * d + i] = v;
    }
  }
}

bool inverse_cholesky_upper(double* a, std::int64_t n, float* u) {
  const int ni = static_cast<int>(n);
  if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', ni, a, ni) != 0) return false;
  if (LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', ni, a, ni) != 0) return false;
  if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', ni, a, ni) != 0) return false;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) u[i * n + j] = j < i ? 0.0f : static_cast<float>(a[i * n + j]);
  return true;
}

void gptq_block(const GptqBlockArgs& a) {
  const std::int64_t rows = a.rows;
  for (std::int64_t i = 0; i < a.count; ++i) {
    std::uint16_t* sc = a.scales + static_cast<std::int64_t>(a.param_set[i]) * rows;
    std::int32_t* ze = a.zeros + static_cast<std::int64_t>(a.param_set[i]) * rows;
    if (const std::int64_t len = a.group_start[i]; len > 0) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const formats::GroupParams p = formats::group_params(a.w_start + i * rows + r, len, rows, a.bits, a.sym);
        sc[r] = p.scale_f16;
        ze[r] = p.zero;
      }
    }
    const float d = a.u[i * a.ldu + i];
    float* wc = a.w + i * rows;
    float* ec = a.err + i * rows;
    std::uint8_t* qc = a.codes + i * rows;
    for (std::int64_t r = 0; r < rows; ++r) {
      const formats::GroupParams p{sc[r], ze[r]};
      const int q = formats::quantize_code(wc[r], p, a.bits);
      qc[r] = static_cast<std::uint8_t>(q);
      const float e = (wc[r] - formats::dequantize_code(q, p)) / d;
      ec[r] = e;
      a.loss[r] += static_cast<double>(e) * e;
    }
    if (i + 1 < a.count)
      cblas_sger(CblasRowMajor, static_cast<int>(a.count - i - 1), static_cast<int>(rows), -1.0f, a.u + i * a.ldu + i + 1, 1, ec, 1,
                 wc + rows, static_cast<int>(rows));
  }
}

void fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym, ThreadPool& pool) {
  pool.parallel_for(0, rows, [&](std::int64_t b, std::int64_t e, int) {
    for (std::int64_t r = b; r < e; ++r) {
      for (std::int64_t c0 = 0; c0 < cols; c0 += group) {
        float* g = w + r * cols + c0;
        const std::int64_t n = std::min(group, cols - c0);
        formats::fake_quantize_group(g, n, formats::group_params(g, n, 1, bits, sym), bits);
      }
    }
  });
}

void quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale, const float* row_clip,
                    std::int64_t group, int bits, bool sym, float* d, ThreadPool& pool) {
  pool.parallel_for(
      0, rows,
      [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t r = b; r < e; ++r) {
          const float* wr = w + r * ldw;
          float* dr = d + r * cols;
          for (std::int64_t c = 0; c < cols; ++c) dr[c] = col_scale ? wr[c] * col_scale[c] : wr[c];
          if (row_clip)
            for (std::int64_t c = 0; c < cols; ++c) dr[c] = std::clamp(dr[c], -row_clip[r], row_clip[r]);
          for (std::int64_t c0 = 0; c0 < cols; c0 += group) {
            float* g = dr + c0;
            const std::int64_t n = std::min(group, cols - c0);
            formats::fake_quantize_group(g, n, formats::group_params(g, n, 1, bits, sym), bits);
          }
          for (std::int64_t c = 0; c < cols; ++c) dr[c] = (col_scale ? dr[c] / col_scale[c] : dr[c]) - wr[c];
        }
      },
      16);
}

void row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += static_cast<double>(a[r * cols + c]) * b[r * cols + c];
    out[r] = s;
  }
}

ErrorSums error_sums(const float* a, const float* b, std::int64_t n) {
  ErrorSums s;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i], d = x - y;
    s.ab += x * y;
    s.aa += x * x;
    s.bb += y * y;
    s.dd += d * d;
    s.max_abs = std::max(s.max_abs, std::fabs(d));
  }
  return s;
}

}  // namespace mo::engine::cpu_dev
