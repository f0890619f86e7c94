#include "layer_quantizer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "mo/core/half.h"
#include "mo/quant/rtn.h"

namespace mo::quant {
namespace {

using engine::LinearId;

int index_of(LinearId id) { return static_cast<int>(id); }

void round_f16(std::vector<float>& v) {
  for (float& x : v) x = f16_to_f32(f32_to_f16(x));
}

// Thrown by the observer to end a layer run early (run_layer works on a copy and a private KV cache).
struct StageCaptured {};

// Inputs captured by run_layer's observer: every `stride`-th calibration token (up to a cap), plus for
// GPTQ the Hessian of one stage's input (over all tokens). Without a Hessian the samples are the
// observed_samples() already, taken whole (stride 1) up to the cap.
struct Capture {
  engine::Backend* device = nullptr;  // the memory the observed inputs are in
  LayerInputs in;
  std::int64_t stride = 1, cap = 0;
  std::vector<std::int64_t> rows;               // the current sample's rows to keep
  std::unique_ptr<HessianAccumulator> hessian;  // of hessian_of's input
  LinearId hessian_of = LinearId::q;
  bool stop_at_hessian = false;  // a GPTQ stage needs nothing past its own input

  void begin_sample(std::int64_t first, std::int64_t n) {
    rows.clear();
    for (std::int64_t t = (stride - first % stride) % stride; t < n && in.n + static_cast<std::int64_t>(rows.size()) < cap; t += stride)
      rows.push_back(t);
  }
  void observe(LinearId id, const float* x, std::int64_t n, std::int64_t dim) {
    if (id == LinearId::k || id == LinearId::v || id == LinearId::up) return;  // same input as q / gate
    if (hessian && id == hessian_of) hessian->add(x, n);
    auto& dst = in.of(id);
    if (device->device() == Device::cpu) {
      for (std::int64_t r : rows) dst.insert(dst.end(), x + r * dim, x + (r + 1) * dim);
    } else {
      // From a GPU: one download per run of consecutive rows (a whole sample when every row is kept).
      for (std::size_t i = 0; i < rows.size();) {
        std::size_t e = i + 1;
        while (e < rows.size() && rows[e] == rows[e - 1] + 1) ++e;
        const std::size_t at = dst.size(), count = (e - i) * static_cast<std::size_t>(dim);
        dst.resize(at + count);
        device->download(dst.data() + at, x + rows[i] * dim, count * sizeof(float));
        i = e;
      }
    }
    if (stop_at_hessian && id == hessian_of) throw StageCaptured{};
  }
  void end_sample() { in.n += static_cast<std::int64_t>(rows.size()); }
};

// GPTQ's stages in AutoGPTQ's true-sequential order: a stage's Hessian is taken with the earlier stages
// already quantized, so each linear corrects the error of the ones before it.
constexpr LinearId kStageInput[] = {LinearId::q, LinearId::o, LinearId::gate, LinearId::down};
int stage_of(LinearId id) {
  switch (id) {
    case LinearId::q:
    case LinearId::k:
    case LinearId::v: return 0;
    case LinearId::o: return 1;
    case LinearId::gate:
    case LinearId::up: return 2;
    default: return 3;
  }
}

// Every stride-th of `total` tokens gives about capture_tokens of them.
std::int64_t capture_stride(std::int64_t total, std::int64_t cap) { return cap > 0 ? std::max<std::int64_t>(1, total / cap) : total + 1; }

Capture new_capture(std::int64_t total, const PipelineSettings& s, bool need_inputs) {
  Capture cap;
  cap.device = s.device;
  cap.cap = need_inputs ? std::min(s.capture_tokens, total) : 0;
  cap.stride = s.method == Method::gptq ? capture_stride(total, cap.cap) : 1;
  return cap;
}

// The source's CPU engine, or the device model the layer is streamed to.
void install(SourceModel& src, const PipelineSettings& s, int layer, const LayerF32& w) {
  if (!s.device_model) return src.install_layer(layer, w);
  const engine::LayerWeights& lw = src.weights().layers[layer];
  engine::DeviceModel::LayerF32View v;
  v.attn_norm = &w.attn_norm;
  v.ffn_norm = &w.ffn_norm;
  v.bq = &lw.bq;
  v.bk = &lw.bk;
  v.bv = &lw.bv;
  for (LinearId id : kAllLinears) v.linear[index_of(id)] = w.weight(id).data();
  s.device_model->set_layer(layer, v);
}
void release(SourceModel& src, const PipelineSettings& s, int layer) {
  if (s.device_model) return s.device_model->drop_layer(layer);
  src.release_layer(layer);
}

void run_all(SourceModel& src, const PipelineSettings& s, int layer, float* hidden, std::int64_t total,
             const std::vector<std::int64_t>& starts, Capture* cap, bool keep_output) {
  const std::int64_t h = src.hp().hidden_size;
  engine::DeviceBuffer tmp;
  engine::LinearObserver obs = [&](int, LinearId id, const float* x, std::int64_t n, std::int64_t dim) { cap->observe(id, x, n, dim); };
  auto run = [&](float* rows, std::int64_t n) {
    if (s.device_model) return s.device_model->run_layer(layer, rows, n, 0, cap ? &obs : nullptr);
    src.engine().run_layer(layer, rows, n, 0, cap ? &obs : nullptr);
  };
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t first = starts[i], n = (i + 1 < starts.size() ? starts[i + 1] : total) - first;
    float* rows = hidden + first * h;
    if (cap) cap->begin_sample(first, n);
    if (keep_output) {
      run(rows, n);
    } else {
      const std::size_t bytes = static_cast<std::size_t>(n * h) * sizeof(float);
      if (tmp.bytes() < bytes) tmp = engine::DeviceBuffer(*s.device, bytes);
      s.device->copy(tmp.as(), rows, bytes);
      try {
        run(tmp.as<float>(), n);
      } catch (const StageCaptured&) {}
    }
    if (cap) cap->end_sample();
  }
}

// Quantizes one linear per `plan`; GPTQ uses the Hessian of its input.
void quantize_as(QuantizedModule& m, const std::vector<float>& w, std::int64_t rows, std::int64_t cols, const LinearPlan& plan,
                 const PipelineSettings& s, const HessianAccumulator* h) {
  m.plan = plan;
  m.q = {};
  m.f8 = {};
  m.f16.clear();
  if (plan.kind == LinearPlan::integer) {
    m.q = (s.method == Method::gptq && h) ? gptq_quantize(w.data(), rows, cols, *h, plan.scheme, s.gptq).q
                                          : quantize_rtn(w.data(), rows, cols, plan.scheme);
  } else if (plan.kind == LinearPlan::fp8) {
    m.f8 = formats::quantize_fp8(w.data(), rows, cols, plan.scheme.group_size != 0);
  } else {
    m.f16 = w;
    round_f16(m.f16);
  }
}

std::vector<float> dequantized(const QuantizedModule& m) {
  if (m.plan.kind == LinearPlan::integer) return m.q.dequantize();
  if (m.plan.kind == LinearPlan::fp8) return m.f8.dequantize();
  return m.f16;
}

// How much precision a plan keeps; a fused group (vLLM's qkv_proj, gate_up_proj) takes its members' maximum.
int precision(const LinearPlan& p) {
  if (p.kind == LinearPlan::f16) return 1000;
  if (p.kind == LinearPlan::fp8) return 100;
  return p.scheme.bits * 10 + (p.scheme.group_size > 0 ? 1 : 0);
}

// q/k/v and gate/up: vLLM loads each group as one fused linear with one format.
constexpr LinearId kFused[][3] = {{LinearId::q, LinearId::k, LinearId::v}, {LinearId::gate, LinearId::up, LinearId::up}};
const char* fused_label(int g) { return g == 0 ? "qkv_proj" : "gate_up_proj"; }

// Calls raise(i, top) for each member i of fused group g whose plan keeps less precision than the group's best.
template <typename Fn>
void unify_group(int g, std::vector<LinearPlan>& plans, Fn raise) {
  int top = index_of(kFused[g][0]);
  for (LinearId id : kFused[g]) top = precision(plans[index_of(id)]) > precision(plans[top]) ? index_of(id) : top;
  for (LinearId id : kFused[g]) {
    const int i = index_of(id);
    if (precision(plans[i]) >= precision(plans[top])) continue;
    raise(i, top);
    plans[i] = plans[top];
  }
}

}  // namespace

std::vector<std::size_t> observed_samples(const std::vector<std::int64_t>& lengths, const PipelineSettings& s) {
  std::vector<std::size_t> out;
  std::int64_t total = 0;
  for (std::int64_t n : lengths) total += n;
  const std::int64_t cap = std::min(s.capture_tokens, total);
  const std::size_t step = s.method == Method::gptq || cap <= 0 ? 1 : static_cast<std::size_t>(capture_stride(total, cap));
  for (std::size_t i = 0; i < lengths.size(); i += step) out.push_back(i);
  return out;
}

LayerOutcome quantize_layer(SourceModel& src, int layer, float* hidden, std::int64_t total, const std::vector<std::int64_t>& starts,
                            const PipelineSettings& s) {
  LayerOutcome out;
  LayerF32 w = src.decode_layer(layer);
  install(src, s, layer, w);

  const bool gptq = s.method == Method::gptq;
  const bool need_inputs = s.method == Method::awq || s.sensitivity_check;
  // One capture pass per GPTQ stage (only the first for the other methods).
  auto capture = [&](int stage) {
    Capture c = new_capture(total, s, need_inputs);
    if (gptq) {
      c.hessian_of = kStageInput[stage];
      c.hessian = std::make_unique<HessianAccumulator>(*s.device, w.cols(c.hessian_of));
      c.stop_at_hessian = true;
    }
    if (total > 0 && (need_inputs || gptq)) run_all(src, s, layer, hidden, total, starts, &c, false);
    return c;
  };
  Capture cap = capture(0);

  // Plans first (skip_layers, shape fallbacks), so AWQ leaves 16-bit linears out of its error terms.
  std::vector<LinearPlan> plans;
  std::vector<LinearDecision> dec(7);
  const LinearPlan requested_plan = plan_linear(s.layout, 1 << 20, 1 << 20, s.bits, s.group_size, s.sym, s.fp8_per_channel);
  for (LinearId id : kAllLinears) {
    LinearDecision& d = dec[index_of(id)];
    d.module = hf_linear_module(layer, engine::linear_name(id));
    d.layer = layer;
    d.requested = requested_plan.label();
    d.stats = weight_stats(w.weight(id).data(), static_cast<std::int64_t>(w.weight(id).size()));
    LinearPlan p;
    if (auto pattern = s.skip.match(d.module, layer)) {
      p.reason = fmt::format("skip_layers '{}': kept in 16-bit", *pattern);
    } else {
      p = plan_linear(s.layout, w.rows(id), w.cols(id), s.bits, s.group_size, s.sym, s.fp8_per_channel);
    }
    d.reason = p.reason;
    plans.push_back(p);
  }
  for (int g = 0; g < 2; ++g)
    unify_group(g, plans, [&](int i, int top) {
      dec[i].reason =
          fmt::format("vLLM fuses it into {} with {}, which is {}: same format", fused_label(g), dec[top].module, plans[top].label());
    });
  if (s.method == Method::awq) {
    bool skip[7];
    for (int i = 0; i < 7; ++i) skip[i] = plans[i].kind != LinearPlan::integer;
    formats::QuantScheme scheme{4, s.group_size, false};
    const AwqLayerReport r = awq_transform_layer(w, cap.in, scheme, s.awq, skip, *s.device);
    std::string groups;
    for (const auto& g : r.groups)
      groups += g.applied ? fmt::format(" {} r={:.2f} ({:.3g} vs {:.3g} plain);", g.name, g.ratio, g.error_best, g.error_plain)
                          : fmt::format(" {} skipped;", g.name);
    out.awq_summary = fmt::format("layer {} AWQ:{} clip error {:.3g} -> {:.3g}", layer, groups, r.clip_error_before, r.clip_error_after);
  }

  out.modules.resize(7);
  auto measure = [&](LinearId id) {
    const auto& m = out.modules[index_of(id)];
    const auto& x = cap.in.of(id);
    if (cap.in.n == 0) return OutputError{NAN, NAN, NAN};
    if (m.plan.kind == LinearPlan::f16) return OutputError{};
    return output_error(*s.device, x.data(), cap.in.n, w.weight(id).data(), dequantized(m).data(), w.rows(id), w.cols(id));
  };
  auto quantize = [&](LinearId id, const LinearPlan& p) {
    quantize_as(out.modules[index_of(id)], w.weight(id), w.rows(id), w.cols(id), p, s, cap.hessian.get());
    out.modules[index_of(id)].id = id;
    const OutputError e = measure(id);
    dec[index_of(id)].cosine = e.cosine;
    dec[index_of(id)].rel_l2 = e.rel_l2;
  };
  for (int stage = 0; stage < 4; ++stage) {
    if (gptq && stage > 0 && total > 0) {
      // The layer as quantized so far produces this stage's inputs.
      for (LinearId id : kAllLinears)
        if (stage_of(id) == stage - 1) w.weight(id) = dequantized(out.modules[index_of(id)]);
      round_f16(w.attn_norm);
      round_f16(w.ffn_norm);
      install(src, s, layer, w);
      cap = capture(stage);
    }
    for (LinearId id : kAllLinears) {
      const int i = index_of(id);
      if (stage_of(id) != stage) continue;
      LinearDecision& d = dec[i];
      quantize(id, plans[i]);
      if (s.sensitivity_check && d.cosine < s.threshold && plans[i].kind != LinearPlan::f16) {
        const std::int64_t rows = w.rows(id), cols = w.cols(id);
        const LinearPlan fb = s.fallback_bits >= 16 || s.layout != OutputLayout::gptq
                                  ? LinearPlan{}
                                  : plan_linear(s.layout, rows, cols, s.fallback_bits, s.group_size, s.sym, s.fp8_per_channel);
        const std::string why = s.layout == OutputLayout::gptq || s.fallback_bits >= 16
                                    ? ""
                                    : fmt::format(" ({} cannot hold INT{})",
                                                  s.layout == OutputLayout::awq_gemm ? "AWQ GEMM" : "the FP8 format", s.fallback_bits);
        d.cosine_requested = d.cosine;
        d.reason = fmt::format("cos {:.4f} < {} at {}, fell back to {}{}", d.cosine, s.threshold, plans[i].label(), fb.label(), why);
        plans[i] = fb;
        quantize(id, fb);
      }
    }
    // A fallback inside a fused group applies to the whole group.
    if (stage == 0 || stage == 2) {
      const int g = stage == 0 ? 0 : 1;
      unify_group(g, plans, [&](int i, int top) {
        dec[i].cosine_requested = dec[i].cosine;
        dec[i].reason = fmt::format("vLLM fuses it into {} with {}, which fell back to {}: same format (own cos at {} {:.4f})",
                                    fused_label(g), dec[top].module, plans[top].label(), plans[i].label(), dec[i].cosine);
        quantize(kAllLinears[i], plans[top]);
      });
    }
  }
  for (LinearId id : kAllLinears) {
    LinearDecision& d = dec[index_of(id)];
    const LinearPlan& p = out.modules[index_of(id)].plan;
    d.format = p.label();
    d.bits = p.kind == LinearPlan::f16 ? 16 : p.scheme.bits;
    d.group_size = p.scheme.group_size;
    d.sym = p.scheme.sym;
  }
  out.decisions = std::move(dec);

  // The next layer's inputs come from this layer as written: quantized linears, f16 norms.
  LayerF32 written = w;
  round_f16(written.attn_norm);
  round_f16(written.ffn_norm);
  for (const auto& m : out.modules) written.weight(m.id) = dequantized(m);
  w = LayerF32{};
  out.attn_norm = written.attn_norm;
  out.ffn_norm = written.ffn_norm;
  cap = Capture{};
  install(src, s, layer, written);
  if (total > 0) run_all(src, s, layer, hidden, total, starts, nullptr, true);
  release(src, s, layer);
  return out;
}

}  // namespace mo::quant
