#include "mo/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "mo/core/error.h"

namespace mo::quant {

using engine::LinearId;

namespace {

int index_of(LinearId id) { return static_cast<int>(id); }  // kAllLinears is in enum order

// Rows of x ([n, dim]) at evenly spaced token positions, at most `want` of them.
std::vector<float> sample_tokens(const std::vector<float>& x, std::int64_t n, std::int64_t dim, std::int64_t want) {
  const std::int64_t t = std::min(n, std::max<std::int64_t>(1, want));
  std::vector<float> out(static_cast<std::size_t>(t * dim));
  for (std::int64_t i = 0; i < t; ++i) std::copy_n(x.begin() + (i * n / t) * dim, dim, out.begin() + i * dim);
  return out;
}

// Per-row output error of a weight perturbation D ([rows, k], device memory) on tokens X ([t, k], leading
// dim ldx, device memory): err[r] = mean over tokens of (x . d_r)^2. With k < t the Gram form
// d_r (X^T X / t) d_r^T is cheaper.
class OutputError {
 public:
  OutputError(engine::Backend& b, const float* x, std::int64_t t, std::int64_t k, std::int64_t ldx)
      : b_(b), x_(x), t_(t), k_(k), ldx_(ldx), gram_(k < t) {
    if (gram_) {
      g_ = engine::DeviceBuffer(b, static_cast<std::size_t>(k * k) * sizeof(float));
      b.gemm(true, false, k, k, t, 1.0f / static_cast<float>(t), x, ldx, x, ldx, 0.0f, g_.as<float>(), k);
    }
  }

  void per_row(const float* d, std::int64_t rows, std::vector<double>& err) {
    err.assign(static_cast<std::size_t>(rows), 0.0);
    const std::int64_t width = gram_ ? k_ : t_;
    if (tmp_.bytes() < static_cast<std::size_t>(rows * width) * sizeof(float))
      tmp_ = engine::DeviceBuffer(b_, static_cast<std::size_t>(rows * width) * sizeof(float));
    if (gram_) {
      b_.gemm(false, false, rows, k_, k_, 1.0f, d, k_, g_.as<float>(), k_, 0.0f, tmp_.as<float>(), k_);
      b_.row_dots(tmp_.as<float>(), d, rows, k_, err.data());
    } else {
      b_.gemm(false, true, rows, t_, k_, 1.0f, d, k_, x_, ldx_, 0.0f, tmp_.as<float>(), t_);
      b_.row_dots(tmp_.as<float>(), tmp_.as<float>(), rows, t_, err.data());
      for (double& e : err) e /= static_cast<double>(t_);
    }
  }

  double total(const float* d, std::int64_t rows) {
    per_row(d, rows, row_err_);
    double s = 0;
    for (double e : row_err_) s += e;
    return s;
  }

 private:
  engine::Backend& b_;
  const float* x_;
  std::int64_t t_, k_, ldx_;
  bool gram_;
  engine::DeviceBuffer g_, tmp_;
  std::vector<double> row_err_;
};

struct ScaleGroup {
  std::string name;
  std::vector<float>* norm = nullptr;  // previous op: a norm weight, or else the rows of `prev`
  LinearId prev = LinearId::q;
  std::vector<LinearId> linears;
  bool shapes_ok = true;
};

// Output MSE of the group's non-skipped linears (device copies `w`, in `active` order) when their weights
// are RTN(W * s) / s, s in device memory.
double scaled_rtn_error(engine::Backend& b, const LayerF32& layer, const std::vector<LinearId>& active,
                        const std::vector<engine::DeviceBuffer>& w, const float* s, std::int64_t cols, const formats::QuantScheme& scheme,
                        OutputError& oe, engine::DeviceBuffer& d) {
  const std::int64_t g = scheme.effective_group(cols);
  double err = 0;
  std::int64_t total_rows = 0;
  for (std::size_t i = 0; i < active.size(); ++i) {
    const std::int64_t rows = layer.rows(active[i]);
    b.quantize_delta(w[i].as<float>(), cols, rows, cols, s, nullptr, g, scheme.bits, scheme.sym, d.as<float>());
    err += oe.total(d.as<float>(), rows);
    total_rows += rows;
  }
  return err / static_cast<double>(total_rows);
}

AwqGroupReport search_scales(engine::Backend& b, const LayerF32& layer, const LayerInputs& inputs, const ScaleGroup& group,
                             const bool skip[7], const formats::QuantScheme& scheme, const AwqOptions& opt, std::vector<float>& best) {
  AwqGroupReport rep;
  rep.name = group.name;
  best.clear();
  std::vector<LinearId> active;
  for (LinearId id : group.linears)
    if (!skip[index_of(id)]) active.push_back(id);
  if (!group.shapes_ok || active.empty()) return rep;

  const std::int64_t cols = layer.cols(group.linears.front()), n = inputs.n;
  const std::vector<float>& x = inputs.of(group.linears.front());
  std::vector<double> x_sum(static_cast<std::size_t>(cols), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < cols; ++c) x_sum[c] += std::fabs(x[i * cols + c]);
  std::vector<float> x_mean(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) x_mean[c] = static_cast<float>(x_sum[c] / static_cast<double>(n));

  // Mean over all rows of |w| normalised by its quantization group's max |w|.
  const std::int64_t g = scheme.effective_group(cols);
  std::vector<double> w_sum(static_cast<std::size_t>(cols), 0.0);
  std::int64_t total_rows = 0;
  for (LinearId id : active) {
    const float* w = layer.weight(id).data();
    const std::int64_t rows = layer.rows(id);
    total_rows += rows;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* wr = w + r * cols;
      for (std::int64_t c0 = 0; c0 < cols; c0 += g) {
        const std::int64_t c1 = std::min(cols, c0 + g);
        float amax = 0;
        for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(wr[c]));
        for (std::int64_t c = c0; c < c1; ++c) w_sum[c] += std::fabs(wr[c]) / (amax + 1e-6f);
      }
    }
  }
  std::vector<float> w_mean(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) w_mean[c] = static_cast<float>(w_sum[c] / static_cast<double>(total_rows));

  // The candidates are scored on the device: the sampled tokens, the group's weights, each grid point's scales.
  const engine::DeviceBuffer xs = engine::to_device(b, sample_tokens(x, n, cols, opt.search_tokens));
  OutputError oe(b, xs.as<float>(), static_cast<std::int64_t>(xs.bytes() / sizeof(float)) / cols, cols, cols);
  std::vector<engine::DeviceBuffer> dw;
  std::int64_t max_rows = 0;
  for (LinearId id : active) {
    dw.push_back(engine::to_device(b, layer.weight(id)));
    max_rows = std::max(max_rows, layer.rows(id));
  }
  engine::DeviceBuffer d(b, static_cast<std::size_t>(max_rows * cols) * sizeof(float)),
      ds(b, static_cast<std::size_t>(cols) * sizeof(float));
  auto error_of = [&](const std::vector<float>& scales) {
    b.upload(ds.as(), scales.data(), ds.bytes());
    return scaled_rtn_error(b, layer, active, dw, ds.as<float>(), cols, scheme, oe, d);
  };
  std::vector<float> s(static_cast<std::size_t>(cols), 1.0f);
  rep.error_plain = error_of(s);
  double best_err = std::numeric_limits<double>::infinity();
  for (int i = 0; i < opt.grid; ++i) {
    const float ratio = static_cast<float>(i) / static_cast<float>(opt.grid);
    float smax = 0, smin = std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < cols; ++c) {
      float v = std::pow(x_mean[c], ratio);
      if (opt.duo_scaling) v /= std::pow(w_mean[c], 1.0f - ratio) + 1e-4f;
      s[c] = std::max(v, 1e-4f);
      smax = std::max(smax, s[c]);
      smin = std::min(smin, s[c]);
    }
    const float norm = std::sqrt(smax * smin);
    for (float& v : s) {
      v /= norm;
      if (!std::isfinite(v)) v = 1.0f;
    }
    const double err = error_of(s);
    if (err < best_err) {
      best_err = err;
      rep.ratio = ratio;
      best = s;
    }
  }
  if (best.empty())
    throw Error(fmt::format("AWQ: no finite output error in the scale search of {} (NaN in weights or inputs?)", group.name));
  rep.applied = true;
  rep.error_best = best_err;
  return rep;
}

void apply_scales(LayerF32& layer, LayerInputs& inputs, const ScaleGroup& group, const std::vector<float>& s) {
  const std::int64_t cols = static_cast<std::int64_t>(s.size());
  if (group.norm) {
    for (std::int64_t c = 0; c < cols; ++c) (*group.norm)[c] /= s[c];
  } else {
    std::vector<float>& p = layer.weight(group.prev);
    const std::int64_t pc = layer.cols(group.prev);
    for (std::int64_t r = 0; r < cols; ++r)
      for (std::int64_t c = 0; c < pc; ++c) p[r * pc + c] /= s[r];
  }
  for (LinearId id : group.linears) {
    std::vector<float>& w = layer.weight(id);
    for (std::int64_t r = 0; r < layer.rows(id); ++r)
      for (std::int64_t c = 0; c < cols; ++c) w[r * cols + c] *= s[c];
  }
  std::vector<float>& x = inputs.of(group.linears.front());
  for (std::int64_t i = 0; i < inputs.n; ++i)
    for (std::int64_t c = 0; c < cols; ++c) x[i * cols + c] /= s[c];
}

// AutoAWQ's _compute_best_clip for one linear: per (row, group) the max|w| shrink with the lowest
// output MSE of that group's partial dot products; weights are then clamped to it. The candidates are
// scored on the device.
void clip_linear(engine::Backend& b, std::vector<float>& w, std::int64_t rows, std::int64_t cols, const std::vector<float>& x,
                 std::int64_t n, const formats::QuantScheme& scheme, const AwqOptions& opt, AwqLayerReport& rep) {
  const engine::DeviceBuffer xs = engine::to_device(b, sample_tokens(x, n, cols, opt.clip_tokens)), dw = engine::to_device(b, w);
  const std::int64_t t = static_cast<std::int64_t>(xs.bytes() / sizeof(float)) / cols, g = scheme.effective_group(cols);
  const int steps = static_cast<int>(opt.max_shrink * opt.grid);
  std::vector<float> amax(static_cast<std::size_t>(rows)), best_max(amax.size()), clip(amax.size());
  std::vector<double> err, best_err(amax.size());
  engine::DeviceBuffer d(b, static_cast<std::size_t>(rows * std::min(g, cols)) * sizeof(float)), dclip(b, clip.size() * sizeof(float));
  for (std::int64_t c0 = 0; c0 < cols; c0 += g) {
    const std::int64_t k = std::min(g, cols - c0);
    OutputError oe(b, xs.as<float>() + c0, t, k, cols);
    for (std::int64_t r = 0; r < rows; ++r) {
      float m = 0;
      for (std::int64_t j = 0; j < k; ++j) m = std::max(m, std::fabs(w[r * cols + c0 + j]));
      amax[r] = best_max[r] = m;
    }
    for (int i = 0; i < steps; ++i) {
      const float shrink = 1.0f - static_cast<float>(i) / static_cast<float>(opt.grid);
      for (std::int64_t r = 0; r < rows; ++r) clip[r] = amax[r] * shrink;
      b.upload(dclip.as(), clip.data(), dclip.bytes());
      b.quantize_delta(dw.as<float>() + c0, cols, rows, k, nullptr, dclip.as<float>(), k, scheme.bits, scheme.sym, d.as<float>());
      oe.per_row(d.as<float>(), rows, err);
      for (std::int64_t r = 0; r < rows; ++r) {
        if (i == 0) {
          rep.clip_error_before += err[r];
          best_err[r] = err[r];
        } else if (err[r] < best_err[r]) {
          best_err[r] = err[r];
          best_max[r] = clip[r];
        }
      }
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      if (steps > 0) rep.clip_error_after += best_err[r];
      for (std::int64_t j = 0; j < k; ++j) {
        float& v = w[r * cols + c0 + j];
        v = std::clamp(v, -best_max[r], best_max[r]);
      }
    }
  }
}

}  // namespace

AwqLayerReport awq_transform_layer(LayerF32& layer, LayerInputs& inputs, const formats::QuantScheme& scheme, const AwqOptions& options,
                                   const bool skip[7], engine::Backend& device) {
  if (inputs.n <= 0) throw Error("AWQ: no captured calibration tokens for the layer");
  for (LinearId id : kAllLinears) {
    if (static_cast<std::int64_t>(layer.weight(id).size()) != layer.rows(id) * layer.cols(id))
      throw Error(fmt::format("AWQ: {} has {} weights, expected {}x{}", engine::linear_name(id), layer.weight(id).size(), layer.rows(id),
                              layer.cols(id)));
    if (static_cast<std::int64_t>(inputs.of(id).size()) != inputs.n * layer.cols(id))
      throw Error(fmt::format("AWQ: the captured input of {} has {} values, expected {}x{}", engine::linear_name(id), inputs.of(id).size(),
                              inputs.n, layer.cols(id)));
  }

  std::vector<ScaleGroup> groups(4);
  groups[0] = {"input_layernorm->q,k,v", &layer.attn_norm, LinearId::q, {LinearId::q, LinearId::k, LinearId::v}, true};
  // v's output channels feed o's input channels one to one only without grouped-query sharing.
  groups[1] = {"v->o", nullptr, LinearId::v, {LinearId::o}, layer.kv_dim == layer.q_dim};
  groups[2] = {"post_attention_layernorm->gate,up", &layer.ffn_norm, LinearId::q, {LinearId::gate, LinearId::up}, true};
  groups[3] = {"up->down", nullptr, LinearId::up, {LinearId::down}, true};

  // Every group is searched on the original weights and inputs before any scale is folded in.
  AwqLayerReport rep;
  std::vector<std::vector<float>> scales(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i)
    rep.groups.push_back(search_scales(device, layer, inputs, groups[i], skip, scheme, options, scales[i]));
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (rep.groups[i].applied) apply_scales(layer, inputs, groups[i], scales[i]);

  if (options.clip) {
    // q and k are left alone: their outputs meet in the q.k product, which a per-linear error ignores.
    for (LinearId id : {LinearId::v, LinearId::o, LinearId::gate, LinearId::up, LinearId::down})
      if (!skip[index_of(id)])
        clip_linear(device, layer.weight(id), layer.rows(id), layer.cols(id), inputs.of(id), inputs.n, scheme, options, rep);
  }
  return rep;
}

}  // namespace mo::quant
