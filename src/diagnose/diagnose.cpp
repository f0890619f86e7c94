#include "mo/diagnose/diagnose.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <fstream>
#include <map>

#include "diag_model.h"
#include "mo/core/error.h"
#include "mo/core/file_read.h"
#include "mo/core/log.h"
#include "mo/core/progress.h"
#include "mo/core/strings.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"
#include "mo/engine/device_model.h"
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
  const std::string text = read_regular_file(opt.data, "data", 4096 * kMiB);
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

// Per-linear inputs of one layer run: x [n, dim] for each of the 7 linears, in the backend's memory.
struct Captured {
  engine::Backend& b;
  std::array<engine::DeviceBuffer, 7> x;
  explicit Captured(engine::Backend& backend) : b(backend) {}
  engine::LinearObserver observer() {
    return [this](int, LinearId id, const float* in, std::int64_t n, std::int64_t dim) {
      const std::size_t bytes = static_cast<std::size_t>(n * dim) * sizeof(float);
      auto& buf = x[static_cast<int>(id)];
      if (buf.bytes() != bytes) buf = engine::DeviceBuffer(b, bytes);
      b.copy(buf.as(), in, bytes);
    };
  }
  const float* of(LinearId id) const { return x[static_cast<int>(id)].as<float>(); }
};

// AWQ folds a per-input-channel scale into the layer before each linear (the norms, v_proj, up_proj),
// so its linears expect x / s, not the original x, and up_proj (v_proj without GQA) output y / s'.
// The scale is read off the two models' inputs on the same hidden state, per channel by least squares:
// exact for q/k/v/gate/up (only a norm lies between), and up to the upstream quantization error for
// o_proj and down_proj. Computed on the host (O(tokens x width), against the linears' O(tokens x width x rows)).
std::vector<float> awq_scales(engine::Backend& b, const float* xo_dev, const float* xq_dev, std::int64_t n, std::int64_t dim,
                              bool reciprocal) {
  const std::vector<float> xo = engine::to_host(b, xo_dev, static_cast<std::size_t>(n * dim)),
                           xq = engine::to_host(b, xq_dev, static_cast<std::size_t>(n * dim));
  std::vector<double> num(static_cast<std::size_t>(dim)), den(static_cast<std::size_t>(dim));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t c = 0; c < dim; ++c) {
      num[c] += static_cast<double>(xo[t * dim + c]) * xq[t * dim + c];
      den[c] += static_cast<double>(xo[t * dim + c]) * xo[t * dim + c];
    }
  std::vector<float> s(static_cast<std::size_t>(dim));
  for (std::int64_t c = 0; c < dim; ++c) {
    const double v = den[c] > 0 && num[c] != 0 ? num[c] / den[c] : 1.0;
    s[c] = static_cast<float>(reciprocal ? 1.0 / v : v);
  }
  return s;
}

struct LayerAccumulators {
  MetricAccumulator layer_local, layer_cum;
  std::array<MetricAccumulator, 7> local, cum;
};

class Runner {
 public:
  // Both models' per-layer ops run over one backend: the host backend (the CPU engine's kernels, weights read
  // in place) or a device (CUDA; or the CPU backend in device layouts, the CUDA path's reference in tests),
  // where both models are uploaded and every hidden state, linear output and sum stays on it.
  Runner(const DiagnoseOptions& opt, DiagModel& o, DiagModel& q, engine::Backend& b, engine::DeviceModel& model_o,
         engine::DeviceModel& model_q)
      : opt_(opt), o_(o), q_(q), b_(b), mo_(model_o), mq_(model_q), hp_(o.engine->hparams()) {
    awq_ = q.files->quantization_config().is_object() && q.files->quantization_config().value("quant_method", "") == "awq";
    const std::vector<float> minus(static_cast<std::size_t>(hp_.hidden_size), -1.0f);
    minus_ones_ = engine::to_device(b_, minus);
  }
  bool awq() const { return awq_; }

  // Embeds every sample into both models' hidden states.
  void start(const std::vector<std::vector<std::int32_t>>& samples) {
    samples_ = &samples;
    for (const auto& s : samples) {
      const std::size_t bytes = s.size() * static_cast<std::size_t>(hp_.hidden_size) * sizeof(float);
      ho_.emplace_back(b_, bytes);
      hq_.emplace_back(b_, bytes);
      mo_.embed(s, ho_.back().as<float>());
      mq_.embed(s, hq_.back().as<float>());
    }
  }

  LayerDiag layer(int L) {
    LayerAccumulators acc;
    const std::int64_t h = hp_.hidden_size;
    for (std::size_t s = 0; s < samples_->size(); ++s) {
      const std::int64_t n = static_cast<std::int64_t>((*samples_)[s].size());
      float* ho = ho_[s].as<float>();
      // minus_in = -(the layer's input), so that ho + minus_in and local + minus_in are the residual updates.
      engine::DeviceBuffer minus_in = copy_of(ho, n * h), local = copy_of(ho, n * h);
      b_.scale_columns(minus_in.as<float>(), minus_ones_.as<float>(), n, h);
      Captured co(b_), cq(b_), cl(b_);
      const auto obs_o = co.observer(), obs_q = cq.observer(), obs_l = cl.observer();
      mo_.run_layer(L, ho, n, 0, &obs_o);
      // Local view of the whole layer: the quantized layer on the original's input.
      mq_.run_layer(L, local.as<float>(), n, 0, awq_ ? &obs_l : nullptr);
      b_.add(local.as<float>(), minus_in.as<float>(), n * h);
      b_.add(minus_in.as<float>(), ho, n * h);  // now ho - in
      acc.layer_local.add(b_.error_sums(minus_in.as<float>(), local.as<float>(), n * h), n * h);
      mq_.run_layer(L, hq_[s].as<float>(), n, 0, &obs_q);
      acc.layer_cum.add(b_.error_sums(ho, hq_[s].as<float>(), n * h), n * h);
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
      mo_.logits(ho_[s].as<float>(), n, lo.data());
      mq_.logits(hq_[s].as<float>(), n, lq.data());
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
  engine::DeviceBuffer copy_of(const float* p, std::int64_t count) {
    engine::DeviceBuffer d(b_, static_cast<std::size_t>(count) * sizeof(float));
    b_.copy(d.as(), p, d.bytes());
    return d;
  }

  void compare_linear(int L, LinearId id, std::int64_t n, const Captured& co, const Captured& cq, const Captured& cl,
                      LayerAccumulators& acc) {
    const engine::Matrix& wo = matrix_of(o_.engine->weights().layers[L], id);
    const std::int64_t rows = wo.rows, cols = wo.cols, out = n * rows;
    const std::size_t out_bytes = static_cast<std::size_t>(out) * sizeof(float);
    engine::DeviceBuffer y_o(b_, out_bytes), y_local(b_, out_bytes), y_cum(b_, out_bytes);
    mo_.linear(L, id, co.of(id), n, y_o.as<float>());
    if (awq_) {
      engine::DeviceBuffer x = copy_of(co.of(id), n * cols);
      const engine::DeviceBuffer s = engine::to_device(b_, awq_scales(b_, co.of(id), cl.of(id), n, cols, false));
      b_.scale_columns(x.as<float>(), s.as<float>(), n, cols);
      mq_.linear(L, id, x.as<float>(), n, y_local.as<float>());
    } else {
      mq_.linear(L, id, co.of(id), n, y_local.as<float>());
    }
    mq_.linear(L, id, cq.of(id), n, y_cum.as<float>());
    // AWQ's scale of down_proj (o_proj) lives in up_proj's (v_proj's) rows: undo it on their outputs.
    const LinearId next = id == LinearId::up ? LinearId::down : LinearId::o;
    if (awq_ && (id == LinearId::up || (id == LinearId::v && rows == hp_.num_heads * hp_.head_dim))) {
      const engine::DeviceBuffer inv = engine::to_device(b_, awq_scales(b_, co.of(next), cl.of(next), n, rows, true));
      b_.scale_columns(y_local.as<float>(), inv.as<float>(), n, rows);
      b_.scale_columns(y_cum.as<float>(), inv.as<float>(), n, rows);
    }
    const auto from = q_.engine->weights().rope_style, to = o_.engine->weights().rope_style;
    if ((id == LinearId::q || id == LinearId::k) && from != to) {
      // GGUF against HF: a row permutation, done on the host (only when the two files differ in it).
      for (engine::DeviceBuffer* y : {&y_local, &y_cum}) {
        std::vector<float> host = engine::to_host(b_, y->as<float>(), static_cast<std::size_t>(out));
        align_qk_output(host.data(), n, rows, hp_.head_dim, from, to);
        b_.upload(y->as(), host.data(), out_bytes);
      }
    }
    acc.local[static_cast<int>(id)].add(b_.error_sums(y_o.as<float>(), y_local.as<float>(), out), out);
    acc.cum[static_cast<int>(id)].add(b_.error_sums(y_o.as<float>(), y_cum.as<float>(), out), out);
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
  engine::Backend& b_;
  engine::DeviceModel &mo_, &mq_;
  const model::Hparams& hp_;
  const std::vector<std::vector<std::int32_t>>* samples_ = nullptr;
  bool awq_ = false;
  engine::DeviceBuffer minus_ones_;
  std::vector<engine::DeviceBuffer> ho_, hq_;  // per sample [n, hidden]: each model's hidden state so far
};

// The backend both models run on, per the options.
std::unique_ptr<engine::Backend> make_diag_backend(const DiagnoseOptions& opt) {
  if (opt.device == Device::cuda) return engine::make_cuda_backend(0);
  if (opt.device_path_on_cpu) return engine::make_cpu_backend(*default_pool());
  return engine::make_host_backend(*default_pool(), ops::Batching::invariant);
}

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

  const std::unique_ptr<engine::Backend> backend = make_diag_backend(opt);
  // Device layouts upload both models (the original's floats in f16); the host backend reads them in place.
  engine::DeviceModel model_o(o.engine->weights(), *backend), model_q(q.engine->weights(), *backend);
  if (!backend->host_formats())
    log::info("diagnose: both models on {} ({} + {} of weights)", backend->describe(), format_bytes(model_o.weight_bytes()),
              format_bytes(model_q.weight_bytes()));
  Runner run(opt, o, q, *backend, model_o, model_q);
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
