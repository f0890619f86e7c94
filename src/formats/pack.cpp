#include "mo/formats/pack.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "mo/core/error.h"

namespace mo::formats {
namespace {

// AutoAWQ's WQLinear_GEMM.from_linear: nibble i of each int32 holds output column 8c + kAwqOrder[i];
// the order matches the interleaving its CUDA kernel dequantizes with.
constexpr std::array<int, 8> kAwqOrder = {0, 2, 4, 6, 1, 3, 5, 7};

std::int32_t as_i32(std::uint32_t u) { return static_cast<std::int32_t>(u); }

void check_codes(const QuantizedLinear& q, const char* what) {
  const std::size_t n = static_cast<std::size_t>(q.rows * q.cols);
  const int groups = q.n_groups();
  if (q.q.size() != n || q.zeros.size() != q.scales.size() || q.g_idx.size() != static_cast<std::size_t>(q.cols) || groups <= 0 ||
      q.scales.size() != static_cast<std::size_t>(q.rows) * groups)
    throw Error(fmt::format("{}: inconsistent QuantizedLinear ({}x{}, {} codes, {} scales, {} zeros, {} g_idx)", what, q.rows, q.cols,
                            q.q.size(), q.scales.size(), q.zeros.size(), q.g_idx.size()));
  const unsigned limit = 1u << q.scheme.bits;
  for (std::size_t i = 0; i < n; ++i)
    if (q.q[i] >= limit) throw Error(fmt::format("{}: code {} does not fit {} bits", what, q.q[i], q.scheme.bits));
  for (auto z : q.zeros)
    if (z >= limit) throw Error(fmt::format("{}: zero point {} does not fit {} bits", what, z, q.scheme.bits));
  for (auto g : q.g_idx)
    if (g < 0 || g >= groups) throw Error(fmt::format("{}: g_idx entry {} outside [0, {})", what, g, groups));
}

}  // namespace

AwqTensors pack_awq(const QuantizedLinear& q) {
  check_codes(q, "AWQ pack");
  const std::int64_t in = q.cols, out = q.rows, G = q.scheme.effective_group(in);
  if (q.scheme.bits != 4) throw Error(fmt::format("AWQ GEMM stores 4-bit weights only, got {} bits", q.scheme.bits));
  if (out % 8 != 0 || in % G != 0)
    throw Error(
        fmt::format("AWQ GEMM needs out_features % 8 == 0 and in_features % group_size == 0 (got out {}, in {}, group {})", out, in, G));
  if (!q.contiguous_groups()) throw Error("AWQ GEMM has no g_idx: act-order (permuted) groups cannot be stored");
  const std::int64_t groups = in / G, packed = out / 8;
  const int n_groups = q.n_groups();
  if (n_groups != groups) throw Error(fmt::format("AWQ pack: {} groups of scales for {} groups of {} columns", n_groups, groups, G));

  AwqTensors t;
  t.in = in, t.out = out, t.group_size = G;
  t.qweight.resize(static_cast<std::size_t>(in * packed));
  t.qzeros.resize(static_cast<std::size_t>(groups * packed));
  t.scales.resize(static_cast<std::size_t>(groups * out));
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t c = 0; c < packed; ++c) {
      std::uint32_t v = 0;
      for (int k = 0; k < 8; ++k) v |= static_cast<std::uint32_t>(q.q[(8 * c + kAwqOrder[k]) * in + i]) << (4 * k);
      t.qweight[i * packed + c] = as_i32(v);
    }
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t c = 0; c < packed; ++c) {
      std::uint32_t v = 0;
      for (int k = 0; k < 8; ++k) v |= static_cast<std::uint32_t>(q.zeros[(8 * c + kAwqOrder[k]) * n_groups + g]) << (4 * k);
      t.qzeros[g * packed + c] = as_i32(v);
    }
    for (std::int64_t o = 0; o < out; ++o) t.scales[g * out + o] = q.scales[o * n_groups + g];
  }
  return t;
}

QuantizedLinear unpack_awq(const AwqTensors& t) {
  const std::int64_t in = t.in, out = t.out, G = t.group_size;
  if (in <= 0 || out <= 0 || out % 8 != 0 || G <= 0 || in % G != 0)
    throw Error(fmt::format("AWQ GEMM: bad shape (in {}, out {}, group {}); needs out % 8 == 0 and in % group == 0", in, out, G));
  const std::int64_t groups = in / G, packed = out / 8;
  if (t.qweight.size() != static_cast<std::size_t>(in * packed) || t.qzeros.size() != static_cast<std::size_t>(groups * packed) ||
      t.scales.size() != static_cast<std::size_t>(groups * out))
    throw Error(fmt::format("AWQ GEMM: expected qweight [{}, {}], qzeros [{}, {}], scales [{}, {}]; got {}, {}, {} elements", in, packed,
                            groups, packed, groups, out, t.qweight.size(), t.qzeros.size(), t.scales.size()));
  QuantizedLinear q;
  q.rows = out, q.cols = in;
  q.scheme = {4, static_cast<int>(G == in ? -1 : G), false};
  q.q.resize(static_cast<std::size_t>(out * in));
  q.scales.resize(static_cast<std::size_t>(out * groups));
  q.zeros.resize(q.scales.size());
  q.g_idx.resize(static_cast<std::size_t>(in));
  for (std::int64_t i = 0; i < in; ++i) {
    q.g_idx[i] = static_cast<std::int32_t>(i / G);
    for (std::int64_t c = 0; c < packed; ++c) {
      const auto v = static_cast<std::uint32_t>(t.qweight[i * packed + c]);
      for (int k = 0; k < 8; ++k) q.q[(8 * c + kAwqOrder[k]) * in + i] = static_cast<std::uint8_t>((v >> (4 * k)) & 0xF);
    }
  }
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t c = 0; c < packed; ++c) {
      const auto v = static_cast<std::uint32_t>(t.qzeros[g * packed + c]);
      for (int k = 0; k < 8; ++k) q.zeros[(8 * c + kAwqOrder[k]) * groups + g] = static_cast<std::uint8_t>((v >> (4 * k)) & 0xF);
    }
    for (std::int64_t o = 0; o < out; ++o) q.scales[o * groups + g] = t.scales[g * out + o];
  }
  return q;
}

GptqTensors pack_gptq(const QuantizedLinear& q, bool v1) {
  check_codes(q, "GPTQ pack");
  const int bits = q.scheme.bits;
  if (bits != 4 && bits != 8) throw Error(fmt::format("GPTQ pack: {} bits not supported (4 or 8)", bits));
  const int pf = 32 / bits;  // codes per int32
  const std::int64_t in = q.cols, out = q.rows;
  if (in % pf != 0 || out % pf != 0)
    throw Error(fmt::format("GPTQ {}-bit needs in_features and out_features divisible by {} (got in {}, out {})", bits, pf, in, out));
  const int groups = q.n_groups();
  const std::uint32_t mask = (1u << bits) - 1;

  GptqTensors t;
  t.in = in, t.out = out, t.groups = groups, t.bits = bits;
  t.qweight.resize(static_cast<std::size_t>(in / pf * out));
  t.qzeros.resize(static_cast<std::size_t>(groups * (out / pf)));
  t.scales.resize(static_cast<std::size_t>(groups * out));
  t.g_idx = q.g_idx;
  for (std::int64_t r = 0; r < in / pf; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      std::uint32_t v = 0;
      for (int j = 0; j < pf; ++j) v |= static_cast<std::uint32_t>(q.q[o * in + r * pf + j]) << (bits * j);
      t.qweight[r * out + o] = as_i32(v);
    }
  for (int g = 0; g < groups; ++g) {
    for (std::int64_t c = 0; c < out / pf; ++c) {
      std::uint32_t v = 0;
      for (int j = 0; j < pf; ++j) {
        const std::int64_t o = c * pf + j;
        const int z = q.zeros[o * groups + g];
        // Readers of v1 add 1 to each field (vLLM's gptq kernels, AutoGPTQ); a zero of 0 would come back as 2^bits.
        if (v1 && z == 0)
          throw Error(
              fmt::format("GPTQ v1 stores zero-1, so zero point 0 (output {}, group {}) cannot be written; "
                          "write checkpoint_format gptq_v2 instead",
                          o, g));
        v |= (static_cast<std::uint32_t>(z - (v1 ? 1 : 0)) & mask) << (bits * j);
      }
      t.qzeros[g * (out / pf) + c] = as_i32(v);
    }
    for (std::int64_t o = 0; o < out; ++o) t.scales[g * out + o] = q.scales[o * groups + g];
  }
  return t;
}

QuantizedLinear unpack_gptq(const GptqTensors& t, int group_size, bool sym, bool v1) {
  const int bits = t.bits;
  if (bits != 4 && bits != 8) throw Error(fmt::format("GPTQ: {} bits not supported (4 or 8)", bits));
  const int pf = 32 / bits;
  const std::int64_t in = t.in, out = t.out, groups = t.groups;
  if (in <= 0 || out <= 0 || in % pf != 0 || out % pf != 0 || groups <= 0)
    throw Error(fmt::format("GPTQ {}-bit: bad shape (in {}, out {}, {} groups)", bits, in, out, groups));
  if (t.qweight.size() != static_cast<std::size_t>(in / pf * out) || t.qzeros.size() != static_cast<std::size_t>(groups * (out / pf)) ||
      t.scales.size() != static_cast<std::size_t>(groups * out))
    throw Error(fmt::format("GPTQ: expected qweight [{}, {}], qzeros [{}, {}], scales [{}, {}]; got {}, {}, {} elements", in / pf, out,
                            groups, out / pf, groups, out, t.qweight.size(), t.qzeros.size(), t.scales.size()));
  const std::int64_t G = group_size == kGroupPerChannel ? in : group_size;
  if (!t.g_idx.empty() && t.g_idx.size() != static_cast<std::size_t>(in))
    throw Error(fmt::format("GPTQ: g_idx has {} entries for {} input features", t.g_idx.size(), in));
  const std::uint32_t mask = (1u << bits) - 1;

  QuantizedLinear q;
  q.rows = out, q.cols = in;
  q.scheme = {bits, group_size, sym};
  q.q.resize(static_cast<std::size_t>(out * in));
  q.scales.resize(static_cast<std::size_t>(out * groups));
  q.zeros.resize(q.scales.size());
  q.g_idx.resize(static_cast<std::size_t>(in));
  for (std::int64_t i = 0; i < in; ++i) {
    const std::int64_t g = t.g_idx.empty() ? i / G : t.g_idx[i];
    if (g < 0 || g >= groups) throw Error(fmt::format("GPTQ: g_idx[{}] = {} outside [0, {})", i, g, groups));
    q.g_idx[i] = static_cast<std::int32_t>(g);
  }
  for (std::int64_t r = 0; r < in / pf; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      const auto v = static_cast<std::uint32_t>(t.qweight[r * out + o]);
      for (int j = 0; j < pf; ++j) q.q[o * in + r * pf + j] = static_cast<std::uint8_t>((v >> (bits * j)) & mask);
    }
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t c = 0; c < out / pf; ++c) {
      const auto v = static_cast<std::uint32_t>(t.qzeros[g * (out / pf) + c]);
      for (int j = 0; j < pf; ++j) {
        const unsigned z = ((v >> (bits * j)) & mask) + (v1 ? 1 : 0);
        if (z > 255)
          throw Error(
              fmt::format("GPTQ v1 {}-bit: stored zero field {} means zero point {}, which this loader cannot hold", bits, z - 1, z));
        q.zeros[(c * pf + j) * groups + g] = static_cast<std::uint8_t>(z);
      }
    }
    for (std::int64_t o = 0; o < out; ++o) q.scales[o * groups + g] = t.scales[g * out + o];
  }
  return q;
}

QuantizedLinear unpack_ct(const CtPackedTensors& t, int group_size, bool sym) {
  const int bits = t.bits;
  if (bits != 4 && bits != 8) throw Error(fmt::format("pack-quantized: {} bits not supported (4 or 8)", bits));
  const std::int64_t pf = 32 / bits, in = t.in, out = t.out, groups = t.groups;
  const std::int64_t G = group_size <= 0 ? in : group_size;  // kGroupPerChannel
  const std::int64_t words = (in + pf - 1) / pf, zp_rows = (out + pf - 1) / pf;
  if (in <= 0 || out <= 0 || groups != (in + G - 1) / G)
    throw Error(fmt::format("pack-quantized: bad shape (in {}, out {}, {} groups of {})", in, out, groups, G));
  if (t.weight_packed.size() != static_cast<std::size_t>(out * words) || t.weight_scale.size() != static_cast<std::size_t>(out * groups) ||
      (!sym && t.weight_zero_point.size() != static_cast<std::size_t>(zp_rows * groups)))
    throw Error(fmt::format("pack-quantized: expected weight_packed [{}, {}], weight_scale [{}, {}]{}; got {}, {}, {} elements", out, words,
                            out, groups, sym ? "" : fmt::format(", weight_zero_point [{}, {}]", zp_rows, groups), t.weight_packed.size(),
                            t.weight_scale.size(), t.weight_zero_point.size()));
  const std::uint32_t mask = (1u << bits) - 1;
  QuantizedLinear q;
  q.rows = out, q.cols = in;
  q.scheme = {bits, group_size <= 0 ? kGroupPerChannel : group_size, sym};
  q.q.resize(static_cast<std::size_t>(out * in));
  q.scales = t.weight_scale;  // [out, groups], our order already
  q.zeros.assign(q.scales.size(), static_cast<std::uint8_t>(1u << (bits - 1)));
  q.g_idx.resize(static_cast<std::size_t>(in));
  for (std::int64_t i = 0; i < in; ++i) q.g_idx[i] = static_cast<std::int32_t>(i / G);
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t i = 0; i < in; ++i) {
      const auto v = static_cast<std::uint32_t>(t.weight_packed[o * words + i / pf]);
      q.q[o * in + i] = static_cast<std::uint8_t>((v >> (bits * (i % pf))) & mask);
    }
  if (!sym)
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t g = 0; g < groups; ++g) {
        const auto v = static_cast<std::uint32_t>(t.weight_zero_point[(o / pf) * groups + g]);
        q.zeros[o * groups + g] = static_cast<std::uint8_t>((v >> (bits * (o % pf))) & mask);
      }
  return q;
}

std::vector<std::uint8_t> transpose_elements(const std::uint8_t* data, std::int64_t rows, std::int64_t cols, std::size_t elem) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * cols) * elem);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) std::memcpy(&out[(c * rows + r) * elem], &data[(r * cols + c) * elem], elem);
  return out;
}

}  // namespace mo::formats
