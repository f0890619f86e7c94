// Q4Z reference: row decoding, the scalar tile kernel and the per-level kernel choice.
#include <cstring>

#include "mo/core/half.h"
#include "q4z.h"
#include "q8_kernels.h"

namespace mo::ops::q4z {
namespace {

void tile_scalar(const std::uint8_t* w, std::size_t row_bytes, int nr, const q8::BlockQ8* xq, int nt, std::int64_t cols, float* y,
                 std::int64_t y_stride) {
  const std::int64_t nb = cols / q8::kBlock;
  for (int r = 0; r < nr; ++r) {
    const auto* wb = reinterpret_cast<const BlockQ4Z*>(w + static_cast<std::size_t>(r) * row_bytes);
    for (int t = 0; t < nt; ++t) {
      const q8::BlockQ8* xb = xq + t * nb;
      float acc = 0.0f;
      for (std::int64_t b = 0; b < nb; ++b) {
        const int z = wb[b].z;
        int isum = 0;
        for (int j = 0; j < 16; ++j) isum += ((wb[b].qs[j] & 15) - z) * xb[b].qs[j] + ((wb[b].qs[j] >> 4) - z) * xb[b].qs[j + 16];
        acc = __builtin_fmaf(static_cast<float>(isum), f16_to_f32(wb[b].d) * xb[b].d, acc);  // one rounding per block
      }
      y[t * y_stride + r] = acc;
    }
  }
}

}  // namespace

void dequantize_row(const std::uint8_t* row, float* out, std::int64_t cols) {
  const auto* wb = reinterpret_cast<const BlockQ4Z*>(row);
  for (std::int64_t b = 0; b < cols / q8::kBlock; ++b) {
    const float s = f16_to_f32(wb[b].d);
    const int z = wb[b].z;
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = static_cast<float>((wb[b].qs[j] & 15) - z) * s;
      out[b * 32 + j + 16] = static_cast<float>((wb[b].qs[j] >> 4) - z) * s;
    }
  }
}

void matrix_row(const engine::Matrix& w, std::int64_t r, float* out) {
  if (!w.in_perm) return dequantize_row(w.row(r), out, w.cols);
  thread_local std::vector<float> tmp;
  tmp.resize(static_cast<std::size_t>(w.cols));
  dequantize_row(w.row(r), tmp.data(), w.cols);
  const std::vector<std::int32_t>& p = *w.in_perm;
  for (std::int64_t i = 0; i < w.cols; ++i) out[p[i]] = tmp[i];
}

q8::Kernel kernel_scalar() { return tile_scalar; }

}  // namespace mo::ops::q4z

namespace mo::ops::q8 {

Kernel kernel_q4z(std::uint32_t type, SimdLevel level) {
  if (type != engine::kQ4zType) return nullptr;
  if (panel_kernels() && level == SimdLevel::avx512 && cpu_has_vnni()) return q4z_panel_vnni();
  if (panel_kernels() && level >= SimdLevel::avx2) return q4z_panel_avx2();
  Kernel k = nullptr;
  if (level == SimdLevel::avx512) k = q4z::kernel_avx512();
  if (!k && level != SimdLevel::scalar) k = q4z::kernel_avx2();
  return k ? k : q4z::kernel_scalar();
}

}  // namespace mo::ops::q8
