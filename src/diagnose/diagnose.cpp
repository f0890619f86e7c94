#include "mo/diagnose/diagnose.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <fstream>
#include <map>

#include "diag_model.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/progress.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/ops/linear.h"
#include "mo/eval/text_metrics.h"
#include "mo/quant/calibration.h"
#include "mo/quant/layer_f32.h"
#include "mo/quant/layer_select.h"

namespace mo::diagnose {
namespace {

using engine::LinearId;

const engine::Matrix& matrix_of(const engine::LayerWeights& l, LinearId id) {
  switch (id) {
    case LinearId::q: return l.wq;
    case LinearId::k: return l.wk;
    case LinearId::v: return l.wv;
    case LinearId::o: return l.wo;
    case LinearId::gate: return l.w_gate;
    case LinearId::up: return l.w_up;
    case LinearId::down: return l.w_down;
  }
  return l.wq;
}

void check_same_shape(const DiagModel& o, const DiagModel& q) {
  const auto& a = o.engine->hparams();
  const auto& b = q.engine->hparams();
  const auto differ = [&](const char* what, std::int64_t x, std::int64_t y) {
    if (x != y)
      throw UsageError(fmt::format("{}: {} is {}, but the original {} has {}; diagnose compares a model with its own quantization", q.path,
                                   what, y, o.path, x));
  };
  differ("num_layers", a.num_layers, b.num_layers);
  differ("hidden_size", a.hidden_size, b.hidden_size);
  differ("intermediate_size", a.intermediate_size, b.intermediate_size);
  differ("num_heads", a.num_heads, b.num_heads);
  differ("num_kv_heads", a.num_kv_heads, b.num_kv_heads);
  differ("vocab_size", a.vocab_size, b.vocab_size);
}

// A plain text file: tokenized once and cut into windows of max_seq_len tokens (BOS first when the
// tokenizer adds one), the first num_samples of them.
quant::CalibrationSet text_samples(const DiagnoseOptions& opt, const tok::Tokenizer& tok) {
  std::ifstream f(opt.data, std::ios::binary);
  if (!f) throw UsageError(fmt::format("data: cannot read {}", opt.data));
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  const std::vector<std::int32_t> bos_probe = tok.encode("", true, false);
  const std::vector<std::int32_t> ids = tok.encode(text, false, false);
  if (ids.empty()) throw UsageError(fmt::format("data: {} has no text", opt.data));
  const std::size_t body = static_cast<std::size_t>(opt.max_seq_len) - bos_probe.size();
  quant::CalibrationSet set;
  for (std::size_t at = 0; at < ids.size() && static_cast<std::int64_t>(set.samples.size()) < opt.num_samples; at += body) {
    std::vector<std::int32_t> s = bos_probe;
    s.insert(s.end(), ids.begin() + static_cast<std::ptrdiff_t>(at),
             ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + body)));
    if (s.size() < 2) break;
    set.tokens += static_cast<std::int64_t>(s.size());
    set.samples.push_back(std::move(s));
  }
  set.source = opt.data;
  set.description = fmt::format("{} (text, {} windows of up to {} tokens)", opt.data, set.samples.size(), opt.max_seq_len);
  return set;
}

quant::CalibrationSet load_samples(const DiagnoseOptions& opt, const DiagModel& o, const DiagModel& q) {
  const DiagModel& src = o.tok ? o : q;
  if (!src.tok) throw UsageError(fmt::format("{}: neither model has a tokenizer, so --data cannot be tokenized", o.path));
  if (opt.data.size() > 4 && opt.data.compare(opt.data.size() - 4, 4, ".txt") == 0) return text_samples(opt, *src.tok);
  quant::CalibrationOptions co;
  co.source = opt.data;
  co.text_field = opt.data_field;
  co.num_samples = opt.num_samples;
  co.seq_len = opt.max_seq_len;
  co.pack = true;
  co.seed = opt.seed;
  return quant::load_calibration(co, *src.tok, src.files->chat_template());
}

// Per-linear inputs of one layer run: x [n, dim] for each of the 7 linears.
struct Captured {
  std::array<std::vector<float>, 7> x;
  engine::LinearObserver observer() {
    return
        [this](int, LinearId id, const float* in, std::int64_t n, std::int64_t dim) { x[static_cast<int>(id)].assign(in, in + n * dim); };
  }
};

// AWQ folds a per-input-channel scale into the layer before each linear (the norms, v_proj, up_proj),
// so its linears expect x / s, not the original x, and up_proj (v_proj without GQA) output y / s'.
// The scale is read off the two models' inputs on the same hidden state, per channel by least squares:
// exact for q/k/v/gate/up (only a norm lies between), and up to the upstream quantization error for
// o_proj and down_proj.
std::vector<double> awq_scales(const std::vector<float>& xo, const std::vector<float>& xq, std::int64_t n, std::int64_t dim) {
  std::vector<double> num(static_cast<std::size_t>(dim)), den(static_cast<std::size_t>(dim));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t c = 0; c < dim; ++c) {
      num[c] += static_cast<double>(xo[t * dim + c]) * xq[t * dim + c];
      den[c] += static_cast<double>(xo[t * dim + c]) * xo[t * dim + c];
    }
  for (std::int64_t c = 0; c < dim; ++c) num[c] = den[c] > 0 && num[c] != 0 ? num[c] / den[c] : 1.0;
  return num;
}

// y[:, c] *= factor(scale[c]) for y [n, dim].
void scale_columns(float* y, std::int64_t n, std::int64_t dim, const std::vector<double>& scale, bool divide) {
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t c = 0; c < dim; ++c)
      y[t * dim + c] = static_cast<float>(divide ? y[t * dim + c] / scale[c] : y[t * dim + c] * scale[c]);
}

struct LayerAccumulators {
  MetricAccumulator layer_local, layer_cum;
  std::array<MetricAccumulator, 7> local, cum;
};

class Runner {
 public:
  Runner(const DiagnoseOptions& opt, DiagModel& o, DiagModel& q) : opt_(opt), o_(o), q_(q), hp_(o.engine->hparams()) {
    awq_ = q.files->quantization_config().is_object() && q.files->quantization_config().value("quant_method", "") == "awq";
  }
  bool awq() const { return awq_; }

  // Embeds every sample into both models' hidden states.
  void start(const std::vector<std::vector<std::int32_t>>& samples) {
    samples_ = &samples;
    for (const auto& s : samples) {
      ho_.emplace_back(s.size() * hp_.hidden_size);
      hq_.emplace_back(s.size() * hp_.hidden_size);
      o_.engine->embed(s, ho_.back().data());
      q_.engine->embed(s, hq_.back().data());
    }
  }

  LayerDiag layer(int L) {
    LayerAccumulators acc;
    const std::int64_t h = hp_.hidden_size;
    for (std::size_t s = 0; s < samples_->size(); ++s) {
      const std::int64_t n = static_cast<std::int64_t>((*samples_)[s].size());
      std::vector<float> in = ho_[s];
      Captured co, cq, cl;
      const auto obs_o = co.observer(), obs_q = cq.observer(), obs_l = cl.observer();
      o_.engine->run_layer(L, ho_[s].data(), n, 0, &obs_o);
      // Local view of the whole layer: the quantized layer on the original's input.
      std::vector<float> local = in;
      q_.engine->run_layer(L, local.data(), n, 0, awq_ ? &obs_l : nullptr);
      std::vector<float> d_o(in.size()), d_q(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) {
        d_o[i] = ho_[s][i] - in[i];
        d_q[i] = local[i] - in[i];
      }
      acc.layer_local.add(d_o.data(), d_q.data(), n * h);
      q_.engine->run_layer(L, hq_[s].data(), n, 0, &obs_q);
      acc.layer_cum.add(ho_[s].data(), hq_[s].data(), n * h);
      for (LinearId id : quant::kAllLinears) compare_linear(L, id, n, co, cq, cl, acc);
    }
    return finish_layer(L, acc);
  }

  OutputDiag output() {
    OutputDiag out;
    const std::int64_t V = hp_.vocab_size;
    std::vector<double> kls;
    std::int64_t same = 0;
    for (std::size_t s = 0; s < samples_->size(); ++s) {
      const std::int64_t n = static_cast<std::int64_t>((*samples_)[s].size());
      std::vector<float> lo(n * V), lq(n * V);
      o_.engine->logits(ho_[s].data(), n, lo.data());
      q_.engine->logits(hq_[s].data(), n, lq.data());
      for (std::int64_t t = 0; t < n; ++t) {
        bool top1 = false;
        kls.push_back(eval::kl_divergence_row(lo.data() + t * V, lq.data() + t * V, V, &top1));
        same += top1;
      }
    }
    out.tokens = static_cast<std::int64_t>(kls.size());
    double sum = 0;
    for (double k : kls) {
      sum += k;
      out.kl_max = std::max(out.kl_max, k);
    }
    out.kl_mean = kls.empty() ? 0 : sum / static_cast<double>(kls.size());
    out.kl_p99 = eval::quantile(kls, 0.99);
    out.top1_agreement = kls.empty() ? 1 : static_cast<double>(same) / static_cast<double>(kls.size());
    return out;
  }

 private:
  void compare_linear(int L, LinearId id, std::int64_t n, const Captured& co, const Captured& cq, const Captured& cl,
                      LayerAccumulators& acc) {
    const engine::Matrix& wo = matrix_of(o_.engine->weights().layers[L], id);
    const engine::Matrix& wq = matrix_of(q_.engine->weights().layers[L], id);
    const auto& xo = co.x[static_cast<int>(id)];
    const auto& xq = cq.x[static_cast<int>(id)];
    std::vector<float> y_o(n * wo.rows), y_local(n * wo.rows), y_cum(n * wo.rows);
    const std::shared_ptr<ThreadPool> pool = default_pool();
    ops::linear(xo.data(), n, wo, y_o.data(), *pool);
    if (awq_) {
      std::vector<float> x = xo;
      scale_columns(x.data(), n, wo.cols, awq_scales(xo, cl.x[static_cast<int>(id)], n, wo.cols), false);
      ops::linear(x.data(), n, wq, y_local.data(), *pool);
    } else {
      ops::linear(xo.data(), n, wq, y_local.data(), *pool);
    }
    ops::linear(xq.data(), n, wq, y_cum.data(), *pool);
    // AWQ's scale of down_proj (o_proj) lives in up_proj's (v_proj's) rows: undo it on their outputs.
    const LinearId next = id == LinearId::up ? LinearId::down : LinearId::o;
    if (awq_ && (id == LinearId::up || (id == LinearId::v && wo.rows == hp_.num_heads * hp_.head_dim))) {
      const auto s = awq_scales(co.x[static_cast<int>(next)], cl.x[static_cast<int>(next)], n, wo.rows);
      scale_columns(y_local.data(), n, wo.rows, s, true);
      scale_columns(y_cum.data(), n, wo.rows, s, true);
    }
    if (id == LinearId::q || id == LinearId::k) {
      const auto from = q_.engine->weights().rope_style, to = o_.engine->weights().rope_style;
      align_qk_output(y_local.data(), n, wo.rows, hp_.head_dim, from, to);
      align_qk_output(y_cum.data(), n, wo.rows, hp_.head_dim, from, to);
    }
    acc.local[static_cast<int>(id)].add(y_o.data(), y_local.data(), n * wo.rows);
    acc.cum[static_cast<int>(id)].add(y_o.data(), y_cum.data(), n * wo.rows);
  }

  LayerDiag finish_layer(int L, const LayerAccumulators& acc) {
    LayerDiag d;
    d.layer = L;
    d.local = acc.layer_local.result();
    d.cumulative = acc.layer_cum.result();
    // The block compounds the errors of its seven linears (and the softmax / SiLU between them), so it
    // can fall under the threshold while every linear is above it: reported, but only linears are
    // flagged, as only they can be kept out of quantization.
    d.block_below = d.local.cosine < opt_.threshold;
    for (LinearId id : quant::kAllLinears) {
      const engine::Matrix& wo = matrix_of(o_.engine->weights().layers[L], id);
      LinearDiag l;
      l.layer = L;
      l.name = engine::linear_name(id);
      l.module = quant::hf_linear_module(L, l.name.c_str());
      l.params = wo.rows * wo.cols;
      l.original_type = o_.linear_type(L, id);
      l.quantized_type = q_.linear_type(L, id);
      l.original_bytes = o_.linear_bytes(L, id);
      l.quantized_bytes = q_.linear_bytes(L, id);
      l.local = acc.local[static_cast<int>(id)].result();
      l.cumulative = acc.cum[static_cast<int>(id)].result();
      std::vector<float> w(static_cast<std::size_t>(l.params));
      for (std::int64_t r = 0; r < wo.rows; ++r) ops::matrix_row(wo, r, w.data() + r * wo.cols);
      l.weights = quant::weight_stats(w.data(), l.params);
      l.flagged = l.local.cosine < opt_.threshold;
      d.flagged = d.flagged || l.flagged;
      d.linears.push_back(std::move(l));
    }
    return d;
  }

  const DiagnoseOptions& opt_;
  DiagModel& o_;
  DiagModel& q_;
  const model::Hparams& hp_;
  const std::vector<std::vector<std::int32_t>>* samples_ = nullptr;
  bool awq_ = false;
  std::vector<std::vector<float>> ho_, hq_;  // per sample [n, hidden]: each model's hidden state so far
};

}  // namespace

DiagnoseResult run_diagnose(const DiagnoseOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.original.empty()) throw UsageError("original: no original model given (--original PATH)");
  if (opt.quantized.empty()) throw UsageError("quantized: no quantized model given (--quantized PATH)");
  DiagModel o = load_diag_model(opt.original);
  DiagModel q = load_diag_model(opt.quantized);
  check_same_shape(o, q);
  const quant::CalibrationSet set = load_samples(opt, o, q);
  for (const auto& w : set.warnings)
    if (w.find("usual range") == std::string::npos) log::warn("data: {}", w);

  DiagnoseResult r;
  r.original = opt.original;
  r.quantized = opt.quantized;
  r.original_format = o.format();
  r.quantized_format = q.format();
  r.data = set.description;
  r.samples = static_cast<std::int64_t>(set.samples.size());
  for (const auto& s : set.samples) r.tokens += static_cast<std::int64_t>(s.size());
  r.threshold = opt.threshold;

  Runner run(opt, o, q);
  run.start(set.samples);
  const int layers = static_cast<int>(o.engine->hparams().num_layers);
  Progress progress("diagnose", layers, "layers");
  for (int L = 0; L < layers; ++L) {
    r.layers.push_back(run.layer(L));
    progress.update(L + 1, fmt::format("layer {} local cosine {:.4f}", L, r.layers.back().local.cosine));
  }
  progress.finish();
  r.output = run.output();
  if (run.awq())
    r.notes.push_back(
        "AWQ: each linear's local inputs are the original inputs divided by AWQ's per-channel scales, and up_proj's outputs "
        "are multiplied back by down_proj's (read off the two models' inputs on the same hidden state), as the quantized weights expect.");
  r.advice = make_advice(r.layers, opt.threshold, q.files->gguf() != nullptr);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log::info("diagnose: {} layers, {} samples ({} tokens) in {}", layers, r.samples, r.tokens, format_duration(r.seconds));
  return r;
}

}  // namespace mo::diagnose
