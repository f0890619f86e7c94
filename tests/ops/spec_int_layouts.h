#pragma once
// The AWQ GEMM and GPTQ v1/v2 tensors of ../shared/design/formats.md, packed here from that description
// (AutoAWQ gemm.py / packing_utils.py, AutoGPTQ qlinear_cuda_old.py) and not with mo::formats::pack_*, and
// the weights they stand for computed here rather than with QuantizedLinear::dequantize(): kernels and
// loaders are checked against the formats, not against the library's own reading of them. A
// QuantizedLinear only carries the codes, zeros, f16 scales and g_idx as plain data.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mo/formats/quantized_linear.h"

namespace mo::test::spec {

// IEEE 754 binary16 bits to float.
inline float half_to_float(std::uint16_t h) {
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  float v = exponent == 0    ? std::ldexp(static_cast<float>(mantissa), -24)
            : exponent == 31 ? (mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity())
                             : std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  return (h & 0x8000) ? -v : v;
}

inline std::int64_t groups_of(const formats::QuantizedLinear& q) { return static_cast<std::int64_t>(q.scales.size()) / q.rows; }

// w[r, c] = (code - zero) * scale, zero and scale those of input c's group g_idx[c]: [rows, cols].
inline std::vector<float> weights(const formats::QuantizedLinear& q) {
  const std::int64_t groups = groups_of(q);
  std::vector<float> w(static_cast<std::size_t>(q.rows * q.cols));
  for (std::int64_t r = 0; r < q.rows; ++r)
    for (std::int64_t c = 0; c < q.cols; ++c) {
      const std::int64_t g = r * groups + q.g_idx[static_cast<std::size_t>(c)];
      w[static_cast<std::size_t>(r * q.cols + c)] =
          static_cast<float>(int{q.q[static_cast<std::size_t>(r * q.cols + c)]} - int{q.zeros[static_cast<std::size_t>(g)]}) *
          half_to_float(q.scales[static_cast<std::size_t>(g)]);
    }
  return w;
}

// AWQ GEMM, 4-bit, groups of whole consecutive inputs: qweight int32 [in, out/8], qzeros int32 [in/G, out/8],
// both with nibble k of word j holding output 8j + order[k]; scales f16 [in/G, out]; true zeros.
struct Awq {
  std::vector<std::int32_t> qweight, qzeros;
  std::vector<std::uint16_t> scales;
  std::int64_t group_size = 0, groups = 0;
};

inline Awq pack_awq(const formats::QuantizedLinear& q) {
  static constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const std::int64_t in = q.cols, out = q.rows, words = out / 8;
  Awq a;
  a.groups = groups_of(q);
  a.group_size = in / a.groups;
  a.qweight.assign(static_cast<std::size_t>(in * words), 0);
  a.qzeros.assign(static_cast<std::size_t>(a.groups * words), 0);
  a.scales.resize(static_cast<std::size_t>(a.groups * out));
  for (std::int64_t j = 0; j < words; ++j)
    for (int k = 0; k < 8; ++k) {
      const std::int64_t r = 8 * j + kOrder[k];
      for (std::int64_t i = 0; i < in; ++i)
        a.qweight[static_cast<std::size_t>(i * words + j)] |=
            static_cast<std::int32_t>(std::uint32_t{q.q[static_cast<std::size_t>(r * in + i)]} << (4 * k));
      for (std::int64_t g = 0; g < a.groups; ++g)
        a.qzeros[static_cast<std::size_t>(g * words + j)] |=
            static_cast<std::int32_t>(std::uint32_t{q.zeros[static_cast<std::size_t>(r * a.groups + g)]} << (4 * k));
    }
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t g = 0; g < a.groups; ++g)
      a.scales[static_cast<std::size_t>(g * out + r)] = q.scales[static_cast<std::size_t>(r * a.groups + g)];
  return a;
}

// GPTQ, 4 or 8 bits: qweight int32 [in*bits/32, out], word w of output r holding inputs per*w + j at bits*j
// (per = 32/bits); qzeros int32 [groups, out*bits/32], word k of group g holding output per*k + j, as zero - 1
// in v1 (in `bits` bits, so a zero of 0 wraps) and the zero itself in v2; scales f16 [groups, out]; g_idx [in].
struct Gptq {
  std::vector<std::int32_t> qweight, qzeros, g_idx;
  std::vector<std::uint16_t> scales;
  std::int64_t groups = 0;
};

inline Gptq pack_gptq(const formats::QuantizedLinear& q, bool v1) {
  const int bits = q.scheme.bits, per = 32 / bits;
  const std::uint32_t mask = (1u << bits) - 1;
  const std::int64_t in = q.cols, out = q.rows;
  Gptq t;
  t.groups = groups_of(q);
  t.qweight.assign(static_cast<std::size_t>(in / per * out), 0);
  t.qzeros.assign(static_cast<std::size_t>(t.groups * (out / per)), 0);
  t.scales.resize(static_cast<std::size_t>(t.groups * out));
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t i = 0; i < in; ++i)
      t.qweight[static_cast<std::size_t>((i / per) * out + r)] |=
          static_cast<std::int32_t>(std::uint32_t{q.q[static_cast<std::size_t>(r * in + i)]} << (bits * (i % per)));
  for (std::int64_t g = 0; g < t.groups; ++g)
    for (std::int64_t r = 0; r < out; ++r) {
      const std::uint32_t z = (std::uint32_t{q.zeros[static_cast<std::size_t>(r * t.groups + g)]} - (v1 ? 1u : 0u)) & mask;
      t.qzeros[static_cast<std::size_t>(g * (out / per) + r / per)] |= static_cast<std::int32_t>(z << (bits * (r % per)));
      t.scales[static_cast<std::size_t>(g * out + r)] = q.scales[static_cast<std::size_t>(r * t.groups + g)];
    }
  t.g_idx = q.g_idx;
  return t;
}

}  // namespace mo::test::spec
