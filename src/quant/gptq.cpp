#include "mo/quant/gptq.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/quant/rtn.h"

namespace mo::quant {

HessianAccumulator::HessianAccumulator(std::int64_t dim) : dim_(dim), h_(static_cast<std::size_t>(dim * dim), 0.0) {}

void HessianAccumulator::add(const float* x, std::int64_t n) {
  if (n <= 0) return;
  const std::int64_t d = dim_;
  // The batch's X^T X in f32 (BLAS speed), then folded into the f64 running mean.
  std::unique_ptr<float[]> g(new float[static_cast<std::size_t>(d * d)]);
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(n), 1.0f, x, static_cast<int>(d), 0.0f, g.get(),
              static_cast<int>(d));
  const double keep = static_cast<double>(tokens_) / static_cast<double>(tokens_ + n);
  tokens_ += n;
  const double a = 2.0 / static_cast<double>(tokens_);
  for (std::int64_t i = 0; i < d; ++i) {
    for (std::int64_t j = i; j < d; ++j) {
      const double v = h_[i * d + j] * keep + a * static_cast<double>(g[i * d + j]);
      h_[i * d + j] = v;
      h_[j * d + i] = v;
    }
  }
}

namespace {

// Upper Cholesky factor U of H^-1 (H^-1 = U^T U), row-major; false when H is not positive definite.
bool inverse_cholesky_upper(std::vector<double>& a, std::int64_t n) {
  const int ni = static_cast<int>(n);
  if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', ni, a.data(), ni) != 0) return false;
  if (LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', ni, a.data(), ni) != 0) return false;
  if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', ni, a.data(), ni) != 0) return false;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < i; ++j) a[i * n + j] = 0.0;
  return true;
}

}  // namespace

GptqResult gptq_quantize(const float* w, std::int64_t rows, std::int64_t cols, const HessianAccumulator& hessian,
                         const formats::QuantScheme& scheme, const GptqOptions& options) {
  if (hessian.dim() != cols) throw Error(fmt::format("GPTQ: Hessian is {0}x{0} but the weight has {1} input columns", hessian.dim(), cols));
  if (hessian.tokens() == 0) throw Error("GPTQ: the Hessian saw no calibration tokens");
  const std::int64_t gsize = scheme.effective_group(cols);
  const bool grouped = scheme.group_size > 0;
  const bool static_groups = grouped && options.static_groups;
  const int bits = scheme.bits;
  const std::size_t R = static_cast<std::size_t>(rows);

  // Columns are rows of wt ([cols, rows]) so that every per-column step walks contiguous memory.
  std::vector<float> wt(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) wt[c * rows + r] = w[r * cols + c];

  // Per-channel parameters come from the weight before dead columns are zeroed, as in AutoGPTQ.
  std::vector<GroupParams> per_channel;
  if (!grouped) {
    per_channel.resize(R);
    for (std::int64_t r = 0; r < rows; ++r) per_channel[r] = find_group_params(w + r * cols, cols, 1, scheme);
  }

  std::vector<double> h = hessian.h();
  GptqResult res;
  for (std::int64_t c = 0; c < cols; ++c) {
    if (h[c * cols + c] != 0.0) continue;
    h[c * cols + c] = 1.0;
    std::fill_n(wt.begin() + c * rows, rows, 0.0f);
    ++res.dead_columns;
  }

  auto column_group_params = [&](std::int64_t c0, std::vector<GroupParams>& out) {
    const std::int64_t n = std::min(cols, c0 + gsize) - c0;
    out.resize(R);
    for (std::int64_t r = 0; r < rows; ++r) out[r] = find_group_params(wt.data() + c0 * rows + r, n, rows, scheme);
  };
  std::vector<std::vector<GroupParams>> groups(static_cast<std::size_t>(scheme.groups(cols)));
  if (static_groups)
    for (std::size_t g = 0; g < groups.size(); ++g) column_group_params(static_cast<std::int64_t>(g) * gsize, groups[g]);

  std::vector<std::int64_t> perm(static_cast<std::size_t>(cols));
  std::iota(perm.begin(), perm.end(), 0);
  if (options.desc_act) {
    std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t a, std::int64_t b) { return h[a * cols + a] > h[b * cols + b]; });
    std::vector<float> wp(wt.size());
    std::vector<double> hp(h.size());
    for (std::int64_t i = 0; i < cols; ++i) {
      std::copy_n(wt.begin() + perm[i] * rows, rows, wp.begin() + i * rows);
      for (std::int64_t j = 0; j < cols; ++j) hp[i * cols + j] = h[perm[i] * cols + perm[j]];
    }
    wt.swap(wp);
    h.swap(hp);
  }

  double mean_diag = 0;
  for (std::int64_t c = 0; c < cols; ++c) mean_diag += h[c * cols + c];
  mean_diag /= static_cast<double>(cols);
  double damp = options.damp_percent * mean_diag;
  std::vector<double> u;
  bool ok = false;
  for (int attempt = 0; attempt < 6 && !ok; ++attempt) {
    if (attempt > 0) damp = damp > 0 ? damp * 10 : 0.01 * mean_diag;
    u = h;
    for (std::int64_t c = 0; c < cols; ++c) u[c * cols + c] += damp;
    ok = inverse_cholesky_upper(u, cols);
  }
  if (!ok)
    throw Error(
        fmt::format("GPTQ: the Hessian ({0}x{0}) is not positive definite even with dampening {1:g} "
                    "(NaN or inf in the calibration inputs?)",
                    cols, damp));
  res.damp_used = damp;
  std::vector<float> uf(u.begin(), u.end());
  u.clear();
  u.shrink_to_fit();

  std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * cols));  // [cols (permuted), rows]
  const std::int64_t block = std::max(1, options.block_size);
  std::vector<float> w1(static_cast<std::size_t>(block * rows)), err1(w1.size());
  const std::vector<GroupParams>* params = grouped ? nullptr : &per_channel;
  double loss = 0;
  for (std::int64_t i1 = 0; i1 < cols; i1 += block) {
    const std::int64_t i2 = std::min(cols, i1 + block), count = i2 - i1;
    std::copy_n(wt.begin() + i1 * rows, count * rows, w1.begin());
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t c = i1 + i;
      if (static_groups) {
        params = &groups[perm[c] / gsize];
      } else if (grouped) {
        // From wt, which has not yet received this block's in-block updates: AutoGPTQ reads W, not W1.
        if (c % gsize == 0) column_group_params(c, groups[c / gsize]);
        params = &groups[c / gsize];
      }
      const float d = uf[c * cols + c];
      float* wc = w1.data() + i * rows;
      float* ec = err1.data() + i * rows;
      std::uint8_t* qc = codes.data() + c * rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        const GroupParams& p = (*params)[r];
        const int q = quantize_value(wc[r], p, bits);
        qc[r] = static_cast<std::uint8_t>(q);
        const float deq = static_cast<float>(q - p.zero) * f16_to_f32(p.scale_f16);
        const float e = (wc[r] - deq) / d;
        ec[r] = e;
        loss += static_cast<double>(e) * e;
      }
      if (i + 1 < count)
        cblas_sger(CblasRowMajor, static_cast<int>(count - i - 1), static_cast<int>(rows), -1.0f, uf.data() + c * cols + c + 1, 1, ec, 1,
                   wc + rows, static_cast<int>(rows));
    }
    // Lazy batch update: the block's errors reach all later columns in one GEMM.
    if (i2 < cols)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(cols - i2), static_cast<int>(rows), static_cast<int>(count),
                  -1.0f, uf.data() + i1 * cols + i2, static_cast<int>(cols), err1.data(), static_cast<int>(rows), 1.0f,
                  wt.data() + i2 * rows, static_cast<int>(rows));
  }
  res.loss = loss / 2;  // AutoGPTQ halves Losses before summing

  formats::QuantizedLinear& out = res.q;
  out.rows = rows;
  out.cols = cols;
  out.scheme = scheme;
  const std::size_t n_groups = grouped ? groups.size() : 1;
  out.q.resize(static_cast<std::size_t>(rows * cols));
  out.g_idx.resize(static_cast<std::size_t>(cols));
  for (std::int64_t i = 0; i < cols; ++i) {
    const std::int64_t c = perm[i];
    for (std::int64_t r = 0; r < rows; ++r) out.q[r * cols + c] = codes[i * rows + r];
    // Static groups are indexed by the original column; dynamic ones by sweep position.
    out.g_idx[c] = static_cast<std::int32_t>(!grouped ? 0 : static_groups ? c / gsize : i / gsize);
  }
  out.scales.resize(R * n_groups);
  out.zeros.resize(R * n_groups);
  for (std::size_t g = 0; g < n_groups; ++g) {
    const std::vector<GroupParams>& ps = grouped ? groups[g] : per_channel;
    for (std::size_t r = 0; r < R; ++r) {
      out.scales[r * n_groups + g] = ps[r].scale_f16;
      out.zeros[r * n_groups + g] = static_cast<std::uint8_t>(ps[r].zero);
    }
  }
  return res;
}

}  // namespace mo::quant
