// The CPU backend's linear op: the reference for the CUDA kernels. It reads every LinearKind's packed
// device layout (backend.h) directly, decodes a tile of output rows to f32 and takes its dot products
// with the n activation rows. Rows are split over the pool's threads.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "cpu_ops.h"
#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"

namespace mo::engine::cpu_dev {
namespace {

constexpr std::int64_t kTile = 8;  // output rows decoded together (one AWQ word holds 8 of them)

// Nibble of an AWQ word that holds output 8c + j: the inverse of the pack order 0,2,4,6,1,3,5,7.
constexpr std::array<int, 8> kAwqNibble = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr std::array<int, 8> kAwqOut = {0, 2, 4, 6, 1, 3, 5, 7};  // output 8c + kAwqOut[k] of nibble k

[[noreturn]] void bad(const DeviceLinear& w, const std::string& why) {
  throw Error(fmt::format("linear {} ({} x {}): {}", linear_kind_name(w.kind), w.rows, w.cols, why));
}

std::uint32_t ggml_type_of(LinearKind k) {
  switch (k) {
    case LinearKind::q8_0: return static_cast<std::uint32_t>(GgmlType::Q8_0);
    case LinearKind::q4_k: return static_cast<std::uint32_t>(GgmlType::Q4_K);
    default: return static_cast<std::uint32_t>(GgmlType::Q6_K);
  }
}

// The same shape rules as the CUDA runner (validate in kernels/linear/linear_runner.cu).
void validate(const DeviceLinear& w, std::int64_t n) {
  if (n < 0) bad(w, fmt::format("negative token count {}", n));
  if (w.rows <= 0 || w.cols <= 0) bad(w, "rows and cols must be positive");
  if (!w.weight) bad(w, "no weight buffer");
  switch (w.kind) {
    case LinearKind::f16:
    case LinearKind::f32: return;
    case LinearKind::q8_0:
    case LinearKind::q4_k:
    case LinearKind::q6_k: {
      const auto* info = ggml_type_info(ggml_type_of(w.kind));
      if (w.cols % info->block_size != 0) bad(w, fmt::format("cols must be a multiple of {}", info->block_size));
      const std::size_t want = static_cast<std::size_t>(w.cols / info->block_size) * info->type_size;
      if (w.row_bytes != want) bad(w, fmt::format("row_bytes {} != {} for {} columns", w.row_bytes, want, w.cols));
      return;
    }
    case LinearKind::awq:
      if (w.bits != 4) bad(w, fmt::format("AWQ stores 4-bit weights, got {} bits", w.bits));
      if (w.rows % 8 != 0) bad(w, "rows must be a multiple of 8");
      if (w.group_size <= 0 || w.cols % w.group_size != 0) bad(w, fmt::format("group size {} must divide cols", w.group_size));
      if (w.groups != w.cols / w.group_size) bad(w, fmt::format("{} groups for group size {}", w.groups, w.group_size));
      if (w.g_idx) bad(w, "AWQ has no g_idx");
      if (!w.qzeros || !w.scales) bad(w, "qzeros and scales are required");
      return;
    case LinearKind::gptq: {
      if (w.bits != 4 && w.bits != 8) bad(w, fmt::format("{} bits (4 or 8)", w.bits));
      const int pf = 32 / w.bits;
      if (w.rows % pf != 0 || w.cols % pf != 0) bad(w, fmt::format("rows and cols must be multiples of {}", pf));
      if (w.groups <= 0 || !w.qzeros || !w.scales) bad(w, "groups, qzeros and scales are required");
      if (!w.g_idx && (w.group_size <= 0 || (w.cols + w.group_size - 1) / w.group_size > w.groups))
        bad(w, fmt::format("group size {} needs more than {} groups", w.group_size, w.groups));
      return;
    }
    case LinearKind::host: break;  // the host backend's own matrices, never handed to these kernels
  }
  bad(w, "not a device layout");
}

// AWQ/GPTQ: for every group g, the scales of rows [r0, r1) then their zero points (from zero(g, r)),
// as floats: sz[(g * 2 + 0) * nr + i] and sz[(g * 2 + 1) * nr + i]. q - z is exact in f32, so
// (q - z) * s equals formats::QuantizedLinear::weight.
template <class Zero>
void tile_scales_zeros(const DeviceLinear& w, std::int64_t r0, std::int64_t r1, std::vector<float>& sz, Zero zero) {
  const std::int64_t nr = r1 - r0;
  sz.resize(static_cast<std::size_t>(w.groups * 2 * nr));
  for (std::int64_t g = 0; g < w.groups; ++g)
    for (std::int64_t r = r0; r < r1; ++r) {
      sz[(g * 2) * nr + r - r0] = f16_to_f32(w.scales[g * w.rows + r]);
      sz[(g * 2 + 1) * nr + r - r0] = static_cast<float>(zero(g, r));
    }
}

// Rows [r0, r1) of W as f32 into out[(r - r0) * cols + c].
void decode_rows(const DeviceLinear& w, std::int64_t r0, std::int64_t r1, float* out) {
  const std::int64_t cols = w.cols;
  switch (w.kind) {
    case LinearKind::f16: {
      const auto* src = static_cast<const std::uint16_t*>(w.weight);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = 0; c < cols; ++c) out[(r - r0) * cols + c] = f16_to_f32(src[r * cols + c]);
      return;
    }
    case LinearKind::q8_0:
    case LinearKind::q4_k:
    case LinearKind::q6_k: {
      const auto* src = static_cast<const std::uint8_t*>(w.weight);
      for (std::int64_t r = r0; r < r1; ++r) gguf::dequantize_row(ggml_type_of(w.kind), src + r * w.row_bytes, out + (r - r0) * cols, cols);
      return;
    }
    case LinearKind::awq: {
      const auto* qw = static_cast<const std::uint32_t*>(w.weight);
      const auto* qz = reinterpret_cast<const std::uint32_t*>(w.qzeros);
      const std::int64_t packed = w.rows / 8;
      std::vector<float> sz;  // per group: the tile's scales, then its zeros, as floats
      tile_scales_zeros(w, r0, r1, sz, [&](std::int64_t g, std::int64_t r) {
        return static_cast<int>((qz[g * packed + r / 8] >> (4 * kAwqNibble[r % 8])) & 0xF);
      });
      // The tile is one packed column (rows % 8 == 0, tiles of 8): one word per input gives all 8 rows.
      for (std::int64_t c = 0; c < cols; ++c) {
        const float* s = sz.data() + (c / w.group_size) * 2 * kTile;
        const std::uint32_t word = qw[c * packed + r0 / 8];
        for (int k = 0; k < 8; ++k) {
          const int j = kAwqOut[k];
          out[j * cols + c] = (static_cast<float>((word >> (4 * k)) & 0xF) - s[kTile + j]) * s[j];
        }
      }
      return;
    }
    case LinearKind::gptq: {
      const auto* qw = static_cast<const std::uint32_t*>(w.weight);
      const auto* qz = reinterpret_cast<const std::uint32_t*>(w.qzeros);
      const int bits = w.bits, pf = 32 / bits;
      const std::uint32_t mask = (1u << bits) - 1;
      std::vector<float> sz;
      tile_scales_zeros(w, r0, r1, sz, [&](std::int64_t g, std::int64_t r) {
        return static_cast<int>((qz[g * (w.rows / pf) + r / pf] >> (bits * (r % pf))) & mask) + (w.zero_minus_one ? 1 : 0);
      });
      const std::int64_t nr = r1 - r0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t g = w.g_idx ? w.g_idx[c] : c / w.group_size;
        if (g < 0 || g >= w.groups) bad(w, fmt::format("g_idx[{}] = {} outside [0, {})", c, g, w.groups));
        const float* s = sz.data() + g * 2 * nr;
        for (std::int64_t r = r0; r < r1; ++r) {
          const int q = static_cast<int>((qw[(c / pf) * w.rows + r] >> (bits * (c % pf))) & mask);
          out[(r - r0) * cols + c] = (static_cast<float>(q) - s[nr + r - r0]) * s[r - r0];
        }
      }
      return;
    }
    case LinearKind::f32:                                  // linear() takes it as one GEMM before decoding anything
    case LinearKind::host: bad(w, "not a device layout");  // validate() refuses it first
  }
}

// Eight partial sums so the compiler can vectorise the reduction without reassociating on its own.
float dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void linear(const float* x, std::int64_t n, const DeviceLinear& w, float* y, ThreadPool& pool) {
  validate(w, n);
  if (n == 0) return;
  if (w.kind == LinearKind::f32)
    return gemm(false, true, n, w.rows, w.cols, 1.0f, x, w.cols, static_cast<const float*>(w.weight), w.cols, 0.0f, y, w.rows);
  const std::int64_t tiles = (w.rows + kTile - 1) / kTile;
  pool.parallel_for(0, tiles, [&](std::int64_t t0, std::int64_t t1, int) {
    std::vector<float> buf(static_cast<std::size_t>(kTile * w.cols));
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t r0 = t * kTile, r1 = std::min(w.rows, r0 + kTile);
      decode_rows(w, r0, r1, buf.data());
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t i = 0; i < n; ++i) y[i * w.rows + r] = dot(buf.data() + (r - r0) * w.cols, x + i * w.cols, w.cols);
    }
  });
}

}  // namespace mo::engine::cpu_dev
