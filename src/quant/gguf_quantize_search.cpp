// ggml-quants.c's scale searches. The expressions keep ggml's shape on purpose: `w * x[i] * l` is
// (w * x[i]) * l with l converted to float, and L arrays keep ggml's element types (a negative code
// stored into a uint8_t L wraps there too), so every comparison sees the floats ggml's sees.
#include <cmath>
#include <cstring>

#include "gguf_quantize_search.h"

namespace mo::quant::detail {

float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L, const float* qw) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = gmax(-nmax, gmin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = qw ? qw[i] : x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = gmax(-nmax, gmin(nmax - 1, nearest_int(iscale * x[i])));
      const float w = qw ? qw[i] : x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<std::int8_t>(nmax + gmax(-nmax, gmin(nmax - 1, nearest_int(iscale * x[i]))));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = gmax(-nmax, gmin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  // Move one weight at a time to the level that best fits the current scale, keeping a move only when
  // it raises sumlx^2 / suml2 (i.e. lowers the weighted squared error).
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = gmax(-nmax, gmin(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {

// The error of one candidate (scale, min) over levels L, as the search loops of qkx2/qkx3 sum it.
float weighted_error(int n, const float* x, const float* weights, const std::uint8_t* L, float scale, float min, bool use_mad) {
  float err = 0;
  for (int i = 0; i < n; ++i) {
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    err += weights[i] * diff;
  }
  return err;
}

// qkx2 and qkx3 differ only in their degenerate-range test and in how a candidate level is rounded;
// kQkx3 selects ggml's make_qkx3_quants behaviour.
template <bool kQkx3>
float make_qkx_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min, std::uint8_t* Laux,
                      float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (kQkx3 ? max <= min : max == min) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<std::uint8_t>(gmax(0, gmin(nmax, l)));
  }
  float best_error = weighted_error(n, x, weights, L, scale, min, use_mad);
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l;
      if constexpr (kQkx3) {
        // min is the best fit so far and may sit at or near max, so v can be inf, NaN or past
        // nearest_int's range; ggml clamps before rounding.
        const float v = iscale * (x[i] - min);
        l = v > 0 ? nearest_int(gmin(v, static_cast<float>(nmax))) : 0;
      } else {
        l = gmax(0, gmin(nmax, nearest_int(iscale * (x[i] - min))));
      }
      Laux[i] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float cur_error = weighted_error(n, x, weights, Laux, this_scale, this_min, use_mad);
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<std::size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

}  // namespace

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min, std::uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  return make_qkx_quants<false>(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad);
}

float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min, std::uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  return make_qkx_quants<true>(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad);
}

float make_qp_quants(int n, int nmax, const float* x, std::uint8_t* L, const float* quant_weights) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = gmax(max, x[i]);
  if (max < kGroupMaxEps) {
    std::memset(L, 0, static_cast<std::size_t>(n));
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_mse += quant_weights[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = gmin(nmax, nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * static_cast<float>(l);
      mse += quant_weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = gmin(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<std::uint8_t>(l);
    const float w = quant_weights[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = quant_weights[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      float sl2 = suml2 - w * li * li;
      if (slx > 0 && sl2 > 0) {
        const int new_l = gmin(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace mo::quant::detail
