// Portable float-tile reference: per (row, token) eight lane sums over k = 0, 8, 16, ... with
// explicit fmaf, then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the AVX2 kernel's exact operation
// sequence, so on FMA hardware the two agree bit for bit. Rows are decoded exactly to a buffer first;
// for F16/BF16 weights the activations are rounded to that type first (ftile.h).
#include <cmath>
#include <cstdint>
#include <vector>

#include "ftile.h"
#include "mo/core/half.h"
#include "mo/io/gguf_dequant.h"

namespace mo::ops::ftile {
namespace {

float dot8(const float* w, const float* x, std::int64_t cols) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::int64_t k = 0; k < cols; k += 8)
    for (int j = 0; j < 8 && k + j < cols; ++j) l[j] = std::fma(w[k + j], x[k + j], l[j]);  // the padded lanes' fma(0,0,l) = l
  const float a0 = l[0] + l[4], a1 = l[1] + l[5], a2 = l[2] + l[6], a3 = l[3] + l[7];
  return (a0 + a2) + (a1 + a3);
}

void run_rows16(const Weights& w, std::int64_t r0, std::int64_t r1, const std::uint16_t* x, std::int64_t xs, std::int64_t n, float* y,
                std::int64_t ys) {
  thread_local std::vector<float> widened;  // exact: every 16-bit value is an f32
  widened.resize(static_cast<std::size_t>(n * w.cols));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t k = 0; k < w.cols; ++k) {
      const std::uint16_t h = x[t * xs + k];
      widened[t * w.cols + k] = w.type == 1 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  thread_local std::vector<float> row;
  if (static_cast<std::int64_t>(row.size()) < w.cols) row.resize(w.cols);
  for (std::int64_t r = r0; r < r1; ++r) {
    gguf::dequantize_row(w.type, w.data + r * w.row_bytes, row.data(), w.cols);
    for (std::int64_t t = 0; t < n; ++t) y[t * ys + r] = dot8(row.data(), widened.data() + t * w.cols, w.cols);
  }
}

void run_rows(const Weights& w, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t xs, std::int64_t n, float* y,
              std::int64_t ys) {
  if (w.type != 0) {  // x as the weights' 16-bit type holds it
    thread_local std::vector<std::uint16_t> rounded;
    rounded.resize(static_cast<std::size_t>(n * w.cols));
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t k = 0; k < w.cols; ++k)
        rounded[t * w.cols + k] = w.type == 1 ? f32_to_f16(x[t * xs + k]) : f32_to_bf16(x[t * xs + k]);
    return run_rows16(w, r0, r1, rounded.data(), w.cols, n, y, ys);
  }
  thread_local std::vector<float> row;
  if (static_cast<std::int64_t>(row.size()) < w.cols) row.resize(w.cols);
  for (std::int64_t r = r0; r < r1; ++r) {
    gguf::dequantize_row(w.type, w.data + r * w.row_bytes, row.data(), w.cols);
    for (std::int64_t t = 0; t < n; ++t) y[t * ys + r] = dot8(row.data(), x + t * xs, w.cols);
  }
}

}  // namespace

RowRange kernel_scalar(std::uint32_t type) { return supports(type) ? run_rows : nullptr; }
RowRange16 kernel16_scalar(std::uint32_t type) { return type == 1 || type == 30 ? run_rows16 : nullptr; }

}  // namespace mo::ops::ftile
