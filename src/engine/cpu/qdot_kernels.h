#pragma once
// The fused dequantize-and-dot kernels, written once over a vector type V (vec_avx2.h, vec_avx512.h)
// and instantiated by qdot_avx2.cpp / qdot_avx512.cpp inside their target regions (so everything here
// is compiled for that level); all in an unnamed namespace so the per-level copies never merge at link
// time. Each block is decoded to V::kLanes-lane f32 vectors (the exact weights dequantize_row gives)
// and FMA'd into per-token accumulators. A block's vectors go out in pairs, in the order each level has
// always used, so a level's results stay bit-identical.
//
// The including file includes qdot_kernel_deps.h before its target region.

namespace mo::ops::qdot {
namespace {

using namespace mo::formats;

inline float half_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Per-token accumulators: two chains per token so one token's FMAs do not wait on each other.
template <class V, int NT>
struct Acc {
  using F = typename V::F;
  F a[NT][2];
  float tail[NT];
  const float* x;
  std::int64_t xs;
  Acc(const float* x_, std::int64_t xs_) : x(x_), xs(xs_) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) a[t][0] = a[t][1] = V::zero(), tail[t] = 0.0f;
  }
  // Two V::kLanes-weight vectors that meet x at offsets oa and ob.
  inline __attribute__((always_inline)) void add(std::int64_t oa, F wa, std::int64_t ob, F wb) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      a[t][0] = V::fmadd(wa, V::load(x + t * xs + oa), a[t][0]);
      a[t][1] = V::fmadd(wb, V::load(x + t * xs + ob), a[t][1]);
    }
  }
  // An explicit FMA: left to -ffp-contract, the vectorizer may fuse this for some NT and not for
  // others, and a token's result would then depend on how many tokens share its group.
  inline void add_scalar(std::int64_t o, float w) {
    for (int t = 0; t < NT; ++t) tail[t] = __builtin_fmaf(w, x[t * xs + o], tail[t]);
  }
  float sum(int t) const { return V::hsum_hadd(V::add(a[t][0], a[t][1])) + tail[t]; }
};

// F32 / F16 / BF16: V::kLanes weights per load; the last < 2 * kLanes columns one by one.
template <class V, class Load>
struct Float {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<V, NT>& acc) {
    constexpr int W = V::kLanes;
    std::int64_t i = 0;
    for (; i + 2 * W <= cols; i += 2 * W) acc.add(i, Load::vec(row, i), i + W, Load::vec(row, i + W));
    for (; i < cols; ++i) acc.add_scalar(i, Load::one(row, i));
  }
};
template <class V>
struct F32Load {
  static typename V::F vec(const std::uint8_t* row, std::int64_t i) { return V::load(reinterpret_cast<const float*>(row) + i); }
  static float one(const std::uint8_t* row, std::int64_t i) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  }
};
template <class V>
struct F16Load {
  static typename V::F vec(const std::uint8_t* row, std::int64_t i) { return V::load_f16(row + 2 * i); }
  static float one(const std::uint8_t* row, std::int64_t i) { return half_at(row + 2 * i); }
};
template <class V>
struct BF16Load {
  static typename V::F vec(const std::uint8_t* row, std::int64_t i) { return V::load_bf16(row + 2 * i); }
  static float one(const std::uint8_t* row, std::int64_t i) {
    std::uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

// The 2 * NB weights packed in NB nibble bytes at q (low nibbles are weights [0, NB), high nibbles
// [NB, 2 * NB), ggml's order), starting at column o; lo / hi turn the byte lanes into f32 weights.
template <class V, int NB, int NT, class Lo, class Hi>
inline __attribute__((always_inline)) void add_nibbles(Acc<V, NT>& acc, std::int64_t o, const std::uint8_t* q, Lo lo, Hi hi) {
  constexpr int W = V::kLanes;
  if constexpr (NB >= 2 * W) {
    for (int k = 0; k < NB; k += 2 * W) {
      const typename V::I qa = V::load_u8(q + k), qb = V::load_u8(q + k + W);
      acc.add(o + k, lo(qa), o + k + W, lo(qb));
      acc.add(o + NB + k, hi(qa), o + NB + k + W, hi(qb));
    }
  } else {
    static_assert(NB == W);
    const typename V::I qv = V::load_u8(q);
    acc.add(o, lo(qv), o + NB, hi(qv));
  }
}

// Q4_0: (q - 8) · d; Q4_1 (kMin): q · d + m, where q · d is exact (4 x 11 bits), so the FMA rounds
// once, as q * d + m does.
template <class V, class Block, bool kMin>
struct Q4 {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<V, NT>& acc) {
    using I = typename V::I;
    using F = typename V::F;
    const I m4 = V::set1i(0xF), eight = V::set1i(8);
    for (std::int64_t o = 0; o < cols; o += 2 * sizeof(Block::qs), row += sizeof(Block)) {
      const F d = V::set1(half_at(row + offsetof(Block, d)));
      F m = V::zero();
      if constexpr (kMin) m = V::set1(half_at(row + offsetof(Block, m)));
      const auto weight = [&](I q) {
        if constexpr (kMin)
          return V::fmadd(V::to_f32(q), d, m);
        else
          return V::mul(V::to_f32(V::sub(q, eight)), d);
      };
      add_nibbles<V, sizeof(Block::qs)>(
          acc, o, row + offsetof(Block, qs), [&](I q) { return weight(V::and_(q, m4)); },
          [&](I q) { return weight(V::template srli<4>(q)); });
    }
  }
};

template <class V>
struct Q8_0 {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<V, NT>& acc) {
    constexpr int W = V::kLanes;
    for (std::int64_t o = 0; o < cols; o += QK8_0, row += sizeof(BlockQ8_0)) {
      const typename V::F d = V::set1(half_at(row + offsetof(BlockQ8_0, d)));
      const std::uint8_t* qs = row + offsetof(BlockQ8_0, qs);
      for (int k = 0; k < QK8_0; k += 2 * W)
        acc.add(o + k, V::mul(V::to_f32(V::load_i8(qs + k)), d), o + k + W, V::mul(V::to_f32(V::load_i8(qs + k + W)), d));
    }
  }
};

template <class V>
struct Q4_K {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<V, NT>& acc) {
    using I = typename V::I;
    const I m4 = V::set1i(0xF);
    for (std::int64_t o = 0; o < cols; o += QK_K, row += sizeof(BlockQ4_K)) {
      const float d = half_at(row + offsetof(BlockQ4_K, d));
      const float dmin = half_at(row + offsetof(BlockQ4_K, dmin));
      const std::uint8_t* sc = row + offsetof(BlockQ4_K, scales);
      const std::uint8_t* q = row + offsetof(BlockQ4_K, qs);
      for (int j = 0; j < 4; ++j, q += 32) {
        std::uint8_t s1, m1, s2, m2;
        scale_min_k4(2 * j, sc, s1, m1);
        scale_min_k4(2 * j + 1, sc, s2, m2);
        // d * sc * q is exact (11 + 6 + 4 bits), so fmsub rounds once, as d1 * q - m1 does.
        const typename V::F d1 = V::set1(d * s1), n1 = V::set1(dmin * m1);
        const typename V::F d2 = V::set1(d * s2), n2 = V::set1(dmin * m2);
        add_nibbles<V, 32>(
            acc, o + 64 * j, q, [&](I v) { return V::fmsub(V::to_f32(V::and_(v, m4)), d1, n1); },
            [&](I v) { return V::fmsub(V::to_f32(V::template srli<4>(v)), d2, n2); });
      }
    }
  }
};

template <class V>
struct Q6_K {
  template <int NT>
  static void run(const std::uint8_t* row, std::int64_t cols, Acc<V, NT>& acc) {
    using I = typename V::I;
    const I m4 = V::set1i(0xF), three = V::set1i(3), k32 = V::set1i(32);
    // 6-bit weight: the low nibble lanes, with the 2 lowest bits of `high2` above them, minus 32.
    const auto q6 = [&](I low, I high2) { return V::sub(V::or_(low, V::template slli<4>(V::and_(high2, three))), k32); };
    for (std::int64_t o = 0; o < cols; o += QK_K, row += sizeof(BlockQ6_K)) {
      const float d = half_at(row + offsetof(BlockQ6_K, d));
      for (int h = 0; h < 2; ++h) {
        const std::uint8_t* ql = row + offsetof(BlockQ6_K, ql) + 64 * h;
        const std::uint8_t* qh = row + offsetof(BlockQ6_K, qh) + 32 * h;
        const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(row + offsetof(BlockQ6_K, scales)) + 8 * h;
        for (int l0 = 0; l0 < 32; l0 += V::kLanes) {
          const int is = l0 / 16;
          const I a = V::load_u8(ql + l0), b = V::load_u8(ql + 32 + l0), hq = V::load_u8(qh + l0);
          const I q1 = q6(V::and_(a, m4), hq);
          const I q2 = q6(V::and_(b, m4), V::template srli<2>(hq));
          const I q3 = q6(V::template srli<4>(a), V::template srli<4>(hq));
          const I q4 = V::sub(V::or_(V::template srli<4>(b), V::template slli<4>(V::template srli<6>(hq))), k32);  // no mask: 2 bits left
          // (d * sc) is exact; the one rounding is of its product with q, as in dequantize_row.
          const std::int64_t base = o + 128 * h + l0;
          acc.add(base, V::mul(V::to_f32(q1), V::set1(d * sc[is])), base + 32, V::mul(V::to_f32(q2), V::set1(d * sc[is + 2])));
          acc.add(base + 64, V::mul(V::to_f32(q3), V::set1(d * sc[is + 4])), base + 96, V::mul(V::to_f32(q4), V::set1(d * sc[is + 6])));
        }
      }
    }
  }
};

template <class V, class Dec, int NT>
void go(const std::uint8_t* row, std::int64_t cols, const float* x, std::int64_t xs, float* y, std::int64_t ys) {
  Acc<V, NT> acc(x, xs);
  Dec::template run<NT>(row, cols, acc);
  for (int t = 0; t < NT; ++t) y[t * ys] = acc.sum(t);
}

// kPass: tokens whose accumulators stay in registers at once; a larger group takes several passes over
// the (then L1-resident) row.
template <class V, class Dec, int kPass>
void row_dot_impl(const std::uint8_t* row, std::int64_t cols, const float* x, std::int64_t xs, int nt, float* y, std::int64_t ys) {
  static_assert(kPass >= 4 && kPass <= kMaxTokens);
  for (; nt > kPass; nt -= kPass, x += kPass * xs, y += kPass * ys) go<V, Dec, kPass>(row, cols, x, xs, y, ys);
  switch (nt) {  // cases past kPass cannot occur here; min() keeps them instantiable
    case 1: return go<V, Dec, 1>(row, cols, x, xs, y, ys);
    case 2: return go<V, Dec, 2>(row, cols, x, xs, y, ys);
    case 3: return go<V, Dec, 3>(row, cols, x, xs, y, ys);
    case 4: return go<V, Dec, 4>(row, cols, x, xs, y, ys);
    case 5: return go<V, Dec, std::min(5, kPass)>(row, cols, x, xs, y, ys);
    case 6: return go<V, Dec, std::min(6, kPass)>(row, cols, x, xs, y, ys);
    case 7: return go<V, Dec, std::min(7, kPass)>(row, cols, x, xs, y, ys);
    default: return go<V, Dec, kPass>(row, cols, x, xs, y, ys);
  }
}

template <class V, int kPass>
RowDot row_dot_for(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return row_dot_impl<V, Float<V, F32Load<V>>, kPass>;
    case GgmlType::F16: return row_dot_impl<V, Float<V, F16Load<V>>, kPass>;
    case GgmlType::BF16: return row_dot_impl<V, Float<V, BF16Load<V>>, kPass>;
    case GgmlType::Q4_0: return row_dot_impl<V, Q4<V, BlockQ4_0, false>, kPass>;
    case GgmlType::Q4_1: return row_dot_impl<V, Q4<V, BlockQ4_1, true>, kPass>;
    case GgmlType::Q8_0: return row_dot_impl<V, Q8_0<V>, kPass>;
    case GgmlType::Q4_K: return row_dot_impl<V, Q4_K<V>, kPass>;
    case GgmlType::Q6_K: return row_dot_impl<V, Q6_K<V>, kPass>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace mo::ops::qdot
