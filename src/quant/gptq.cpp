#include "mo/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/quant/rtn.h"

namespace mo::quant {

HessianAccumulator::HessianAccumulator(engine::Backend& backend, std::int64_t dim)
    : b_(&backend), dim_(dim), h_(backend, static_cast<std::size_t>(dim * dim) * sizeof(double)) {}

void HessianAccumulator::add(const float* x, std::int64_t n) {
  if (n <= 0) return;
  b_->hessian_update(h_.as<double>(), x, n, dim_, tokens_);
  tokens_ += n;
}

void HessianAccumulator::add_host(const float* x, std::int64_t n) {
  if (b_->device() == Device::cpu) return add(x, n);  // the CPU backends' memory is host memory
  const std::size_t bytes = static_cast<std::size_t>(n * dim_) * sizeof(float);
  if (staging_.bytes() < bytes) staging_ = engine::DeviceBuffer(*b_, bytes);
  b_->upload(staging_.as(), x, bytes);
  add(staging_.as<float>(), n);
}

std::vector<double> HessianAccumulator::h() const { return engine::to_host(*b_, h_.as<double>(), static_cast<std::size_t>(dim_ * dim_)); }

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

  engine::Backend& dev = hessian.backend();
  double mean_diag = 0;
  for (std::int64_t c = 0; c < cols; ++c) mean_diag += h[c * cols + c];
  mean_diag /= static_cast<double>(cols);
  double damp = options.damp_percent * mean_diag;
  engine::DeviceBuffer a_dev(dev, h.size() * sizeof(double)), u_dev(dev, h.size() * sizeof(float));
  bool ok = false;
  for (int attempt = 0; attempt < 6 && !ok; ++attempt) {
    if (attempt > 0) damp = damp > 0 ? damp * 10 : 0.01 * mean_diag;
    std::vector<double> a = h;
    for (std::int64_t c = 0; c < cols; ++c) a[c * cols + c] += damp;
    dev.upload(a_dev.as(), a.data(), a.size() * sizeof(double));
    ok = dev.inverse_cholesky_upper(a_dev.as<double>(), cols, u_dev.as<float>());
  }
  if (!ok)
    throw Error(
        fmt::format("GPTQ: the Hessian ({0}x{0}) is not positive definite even with dampening {1:g} "
                    "(NaN or inf in the calibration inputs?)",
                    cols, damp));
  res.damp_used = damp;
  a_dev.reset();
  h.clear();
  h.shrink_to_fit();

  // Parameter sets: per channel one, else one per group; fixed ones (per channel, static groups) up front,
  // dynamic ones computed by the sweep where their group starts.
  const std::int64_t n_sets = grouped ? static_cast<std::int64_t>(groups.size()) : 1;
  std::vector<std::uint16_t> set_scales(static_cast<std::size_t>(n_sets) * R);
  std::vector<std::int32_t> set_zeros(set_scales.size()), param_set(static_cast<std::size_t>(cols)), group_start(param_set.size(), 0);
  for (std::int64_t g = 0; g < n_sets; ++g) {
    const std::vector<GroupParams>* ps = !grouped ? &per_channel : static_groups ? &groups[g] : nullptr;
    if (ps)
      for (std::size_t r = 0; r < R; ++r) set_scales[g * R + r] = (*ps)[r].scale_f16, set_zeros[g * R + r] = (*ps)[r].zero;
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    param_set[c] = static_cast<std::int32_t>(!grouped ? 0 : static_groups ? perm[c] / gsize : c / gsize);
    // From wt, which has not yet received this block's in-block updates: AutoGPTQ reads W, not W1.
    if (grouped && !static_groups && c % gsize == 0) group_start[c] = static_cast<std::int32_t>(std::min(cols, c + gsize) - c);
  }
  engine::DeviceBuffer wt_dev = engine::to_device(dev, wt), sc_dev = engine::to_device(dev, set_scales),
                       ze_dev = engine::to_device(dev, set_zeros), set_dev = engine::to_device(dev, param_set),
                       start_dev = engine::to_device(dev, group_start);
  wt.clear();
  wt.shrink_to_fit();
  const std::int64_t block = std::max(1, options.block_size);
  engine::DeviceBuffer codes_dev(dev, static_cast<std::size_t>(rows * cols)), loss_dev(dev, R * sizeof(double)),
      w1_dev(dev, static_cast<std::size_t>(block * rows) * sizeof(float)), err_dev(dev, w1_dev.bytes());
  float* wt_d = wt_dev.as<float>();
  const float* u_d = u_dev.as<float>();
  for (std::int64_t i1 = 0; i1 < cols; i1 += block) {
    const std::int64_t i2 = std::min(cols, i1 + block), count = i2 - i1;
    dev.copy(w1_dev.as(), wt_d + i1 * rows, static_cast<std::size_t>(count * rows) * sizeof(float));
    engine::GptqBlockArgs a;
    a.w = w1_dev.as<float>();
    a.w_start = wt_d + i1 * rows;
    a.u = u_d + i1 * cols + i1;
    a.ldu = cols;
    a.err = err_dev.as<float>();
    a.codes = codes_dev.as<std::uint8_t>() + i1 * rows;
    a.scales = sc_dev.as<std::uint16_t>();
    a.zeros = ze_dev.as<std::int32_t>();
    a.param_set = set_dev.as<std::int32_t>() + i1;
    a.group_start = start_dev.as<std::int32_t>() + i1;
    a.loss = loss_dev.as<double>();
    a.rows = rows;
    a.count = count;
    a.bits = bits;
    a.sym = scheme.sym;
    dev.gptq_block(a);
    // Lazy batch update: the block's errors reach all later columns in one GEMM.
    if (i2 < cols)
      dev.gemm(true, false, cols - i2, rows, count, -1.0f, u_d + i1 * cols + i2, cols, a.err, rows, 1.0f, wt_d + i2 * rows, rows);
  }
  const std::vector<std::uint8_t> codes =
      engine::to_host(dev, codes_dev.as<std::uint8_t>(), static_cast<std::size_t>(rows * cols));  // [cols (permuted), rows]
  set_scales = engine::to_host(dev, sc_dev.as<std::uint16_t>(), set_scales.size());
  set_zeros = engine::to_host(dev, ze_dev.as<std::int32_t>(), set_zeros.size());
  double loss = 0;
  for (double l : engine::to_host(dev, loss_dev.as<double>(), R)) loss += l;
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
    for (std::size_t r = 0; r < R; ++r) {
      out.scales[r * n_groups + g] = set_scales[g * R + r];
      out.zeros[r * n_groups + g] = static_cast<std::uint8_t>(set_zeros[g * R + r]);
    }
  }
  return res;
}

}  // namespace mo::quant
