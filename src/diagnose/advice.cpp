// Advice from a diagnosis: which modules to keep out of low-bit quantization, in the exact
// `skip_layers` syntax quantize accepts (mo/quant/layer_select.h), what that costs in size, and where
// the damage sits.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "mo/diagnose/diagnose.h"
#include "mo/quant/layer_select.h"

namespace mo::diagnose {
namespace {

constexpr double kMB = 1e6;

// Bytes per weight of an 8-bit fallback: GGUF Q8_0 (34 bytes per 32), HF int8 g128 (code + f16 scale
// + packed zero per 128 weights).
double int8_bytes_per_weight(bool gguf) { return gguf ? 34.0 / 32.0 : 1.0 + 2.0 / 128 + 1.0 / 128; }

// 1 for q/k/v, 2 for gate/up (fused by vLLM), 0 for the rest.
int fusion_group(const std::string& name) {
  if (name == "q_proj" || name == "k_proj" || name == "v_proj") return 1;
  if (name == "gate_proj" || name == "up_proj") return 2;
  return 0;
}

std::string mb(double x) { return x >= 0.1 || x == 0 ? fmt::format("{:.2f} MB", x) : fmt::format("{:.4f} MB", x); }

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string layer_list(const std::vector<int>& layers) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    parts.push_back(i == j ? std::to_string(layers[i]) : fmt::format("{}–{}", layers[i], layers[j]));
    i = j + 1;
  }
  return join(parts, ", ");
}

std::string summarize(const std::vector<LayerDiag>& layers, const Advice& a, double threshold) {
  const int n = static_cast<int>(layers.size());
  std::vector<int> flagged;
  std::map<std::string, int> by_name;
  int total = 0;
  for (const auto& l : layers) {
    bool any = false;
    for (const auto& x : l.linears)
      if (x.flagged) {
        any = true;
        ++by_name[x.name];
        ++total;
      }
    if (any) flagged.push_back(l.layer);
  }
  std::vector<int> block_only;
  for (const auto& l : layers)
    if (l.block_below && std::find(flagged.begin(), flagged.end(), l.layer) == flagged.end()) block_only.push_back(l.layer);
  const std::string blocks =
      block_only.empty()
          ? ""
          : fmt::format(
                "; in layers {} the whole block's update is under {:.2f} though each linear is above: the damage is spread over their "
                "linears, which skip_layers cannot single out (AWQ/GPTQ, a smaller group_size or 8 bits help there)",
                layer_list(block_only), threshold);
  if (flagged.empty()) {
    const auto worst = std::min_element(layers.begin(), layers.end(),
                                        [](const LayerDiag& x, const LayerDiag& y) { return x.local.cosine < y.local.cosine; });
    return worst == layers.end() ? "no layers"
                                 : fmt::format("no linear under {:.2f}; the weakest layer is {} (local cosine {:.4f}){}", threshold,
                                               worst->layer, worst->local.cosine, blocks);
  }
  std::vector<std::string> s;
  const int quarter = std::max(1, n / 4);
  if (flagged.front() >= n - quarter)
    s.push_back(fmt::format("errors concentrated in the last layers ({}) — keep the last {} layers in 8 bits", layer_list(flagged),
                            n - flagged.front()));
  else if (flagged.back() < quarter)
    s.push_back(fmt::format("errors concentrated in the first layers ({})", layer_list(flagged)));
  else if (static_cast<int>(flagged.size()) * 2 > n)
    s.push_back(
        fmt::format("errors spread over {} of {} layers: the bit width or method is too aggressive for this model (try AWQ/GPTQ, a smaller "
                    "group_size, or 8 bits)",
                    flagged.size(), n));
  else
    s.push_back(fmt::format("flagged layers: {}", layer_list(flagged)));
  for (const auto& [name, count] : by_name)
    if (total >= 3 && count * 3 >= total * 2) s.push_back(fmt::format("mostly {} ({} of {} flagged linears)", name, count, total));
  for (const auto& l : layers)
    if (l.cumulative.cosine < threshold) {
      s.push_back(fmt::format("the hidden state first falls under {:.2f} after layer {} (cumulative cosine {:.4f})", threshold, l.layer,
                              l.cumulative.cosine));
      break;
    }
  (void)a;
  return join(s, "; ") + blocks;
}

}  // namespace

std::vector<std::string> layer_patterns(const std::string& linear, const std::vector<int>& layers) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    std::string module = quant::hf_linear_module(layers[i], linear.c_str());
    if (i != j) {
      const std::string from = fmt::format("layers.{}.", layers[i]);
      module.replace(module.find(from), from.size(), fmt::format("layers.{}-{}.", layers[i], layers[j]));
    }
    out.push_back(module);
    i = j + 1;
  }
  return out;
}

Advice make_advice(const std::vector<LayerDiag>& layers, double threshold, bool quantized_is_gguf) {
  Advice a;
  std::map<std::string, AdviceItem> items;
  std::vector<std::string> order;
  for (const auto& l : layers)
    for (const auto& x : l.linears) {
      if (!x.flagged) continue;
      if (!items.count(x.name)) order.push_back(x.name);
      AdviceItem& it = items[x.name];
      if (it.layers.empty()) it.min_cosine = it.max_cosine = x.local.cosine;
      it.linear = x.name;
      it.layers.push_back(x.layer);
      it.min_cosine = std::min(it.min_cosine, x.local.cosine);
      it.max_cosine = std::max(it.max_cosine, x.local.cosine);
    }
  // The size cost, per layer: HF outputs must give q/k/v (and gate/up) one format, because vLLM fuses
  // them into qkv_proj (gate_up_proj) — keeping one in 16 bits keeps its partners too.
  for (const auto& l : layers) {
    std::vector<const LinearDiag*> kept;
    for (const auto& x : l.linears) {
      bool keep = x.flagged;
      if (!quantized_is_gguf)
        for (const auto& y : l.linears)
          keep = keep || (y.flagged && fusion_group(y.name) != 0 && fusion_group(y.name) == fusion_group(x.name));
      if (keep) kept.push_back(&x);
    }
    for (const LinearDiag* x : kept) {
      // Charged to the first flagged linear of its fusion group (itself when it is flagged).
      const LinearDiag* owner = x;
      for (const auto& y : l.linears)
        if (!x->flagged && y.flagged && fusion_group(y.name) == fusion_group(x->name)) {
          owner = &y;
          break;
        }
      AdviceItem& it = items[owner->name];
      const double q = static_cast<double>(x->quantized_bytes), n = static_cast<double>(x->params);
      it.skip_cost_mb += std::max(0.0, 2.0 * n - q) / kMB;
      it.int8_cost_mb += std::max(0.0, int8_bytes_per_weight(quantized_is_gguf) * n - q) / kMB;
      if (x != owner && std::find(it.fused.begin(), it.fused.end(), x->name) == it.fused.end()) it.fused.push_back(x->name);
    }
  }
  // Keep the linears in the model's order (q, k, v, o, gate, up, down).
  static const char* kOrder[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  for (const char* name : kOrder) {
    auto f = items.find(name);
    if (f == items.end()) continue;
    AdviceItem it = f->second;
    it.patterns = layer_patterns(it.linear, it.layers);
    it.pattern = join(it.patterns, ", ");
    a.skip_layers.insert(a.skip_layers.end(), it.patterns.begin(), it.patterns.end());
    a.skip_cost_mb += it.skip_cost_mb;
    a.int8_cost_mb += it.int8_cost_mb;
    const std::string range =
        it.min_cosine == it.max_cosine ? fmt::format("{:.4f}", it.min_cosine) : fmt::format("{:.4f}–{:.4f}", it.min_cosine, it.max_cosine);
    const std::string fused = it.fused.empty() ? ""
                                               : fmt::format(", {} included: vLLM fuses {} with it", join(it.fused, " and "),
                                                             it.fused.size() > 1 ? "them" : "it");
    a.lines.push_back(fmt::format("layer{} {} {} below {:.2f} (local cosine {}): keep {} in 16 bits with `skip_layers: [{}]` (+{}{}){}",
                                  it.layers.size() > 1 ? "s" : "", layer_list(it.layers), it.linear, threshold, range,
                                  it.layers.size() > 1 ? "them" : "it", it.pattern, mb(it.skip_cost_mb), fused,
                                  quantized_is_gguf ? "" : fmt::format(", or in 8 bits (+{})", mb(it.int8_cost_mb))));
    a.items.push_back(std::move(it));
  }
  if (!a.items.empty()) {
    std::vector<std::string> quoted;
    for (const auto& p : a.skip_layers) quoted.push_back(p);
    a.lines.push_back(fmt::format("all together: `skip_layers: [{}]` (+{})", join(quoted, ", "), mb(a.skip_cost_mb)));
    if (!quantized_is_gguf)
      a.lines.push_back(
          fmt::format("or 8 bits for the linears quantize's own check finds under the threshold: `sensitivity_threshold: {:.2f}` with "
                      "`fallback_bits: 8` (about +{} for these; it measures on its calibration samples, so borderline ones may differ)",
                      threshold, mb(a.int8_cost_mb)));
  }
  a.pattern_summary = summarize(layers, a, threshold);
  return a;
}

}  // namespace mo::diagnose
