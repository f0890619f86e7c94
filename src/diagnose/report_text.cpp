// The diagnosis as a terminal table (one bar per layer) and as diagnose.md.
#include <fmt/format.h>

#include <algorithm>

#include "mo/diagnose/report.h"

namespace mo::diagnose {
namespace {

// The linear of a layer with the lowest local cosine.
const LinearDiag* worst_linear(const LayerDiag& l) {
  const LinearDiag* w = nullptr;
  for (const auto& x : l.linears)
    if (!w || x.local.cosine < w->local.cosine) w = &x;
  return w;
}

double worst_local(const LayerDiag& l) {
  const LinearDiag* w = worst_linear(l);
  return std::min(l.local.cosine, w ? w->local.cosine : 1.0);
}

// A bar of the layer's worst local error (1 - cosine), scaled so the largest error fills `width`.
std::string bar(double err, double max_err, int width) {
  const int n = max_err > 0 ? static_cast<int>(err / max_err * width + 0.5) : 0;
  return std::string(static_cast<std::size_t>(std::clamp(n, 0, width)), '#') +
         std::string(static_cast<std::size_t>(width - std::clamp(n, 0, width)), ' ');
}

std::string header(const DiagnoseResult& r) {
  return fmt::format("original:  {} ({})\nquantized: {} ({})\ndata:      {} — {} samples, {} tokens\n", r.original, r.original_format,
                     r.quantized, r.quantized_format, r.data, r.samples, r.tokens);
}

std::string output_line(const DiagnoseResult& r) {
  return fmt::format("final output: KL divergence mean {:.5f} nats (p99 {:.5f}, max {:.5f}), top-1 agreement {:.2f} % over {} tokens",
                     r.output.kl_mean, r.output.kl_p99, r.output.kl_max, 100 * r.output.top1_agreement, r.output.tokens);
}

int flagged_linears(const DiagnoseResult& r, int* layers) {
  int n = 0;
  *layers = 0;
  for (const auto& l : r.layers) {
    *layers += l.flagged ? 1 : 0;
    for (const auto& x : l.linears) n += x.flagged;
  }
  return n;
}

}  // namespace

std::string render_terminal(const DiagnoseResult& r) {
  std::string s = header(r) + "\n";
  double max_err = 0;
  for (const auto& l : r.layers) max_err = std::max(max_err, 1 - worst_local(l));
  s += fmt::format("{:>5}  {:>9}  {:>9}  {:<20}  {}\n", "layer", "local", "cumul.", "worst linear (local)",
                   fmt::format("local error 1-cos (full bar = {:.2e})", max_err));
  for (const auto& l : r.layers) {
    const LinearDiag* w = worst_linear(l);
    const std::string worst = w ? fmt::format("{} {:.4f}", w->name, w->local.cosine) : "";
    s += fmt::format("{:>5}  {:>9.5f}  {:>9.5f}  {:<20}  |{}| {}\n", l.layer, l.local.cosine, l.cumulative.cosine, worst,
                     bar(1 - worst_local(l), max_err, 24), l.flagged ? "FLAGGED" : (l.block_below ? "block < threshold" : ""));
  }
  int layers = 0;
  const int linears = flagged_linears(r, &layers);
  s += "\n" + output_line(r) + "\n";
  s += fmt::format("flagged (local cosine < {:.2f}): {} linears in {} layers\n", r.threshold, linears, layers);
  for (const auto& line : r.advice.lines) s += "advice: " + line + "\n";
  s += "pattern: " + r.advice.pattern_summary + "\n";
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  return s;
}

std::string render_markdown(const DiagnoseResult& r) {
  std::string s = "# Quantization diagnosis\n\n```\n" + header(r) + "```\n\n";
  int layers = 0;
  const int linears = flagged_linears(r, &layers);
  s += fmt::format("- {}\n- flagged (local cosine < {:.2f}): **{} linears in {} layers**\n- pattern: {}\n\n", output_line(r), r.threshold,
                   linears, layers, r.advice.pattern_summary);
  s += "**Local** = the quantized layer fed the original model's inputs (its own damage); **cumulative** = the quantized model "
       "on its own hidden states (the damage so far). Layer rows compare the layer's residual update (local) and the hidden state "
       "after it (cumulative); linear rows compare x·Wᵀ.\n\n";
  s += "## Advice\n\n";
  if (r.advice.lines.empty()) s += "Nothing to change at this threshold.\n";
  for (const auto& line : r.advice.lines) s += "- " + line + "\n";
  if (!r.advice.skip_layers.empty()) {
    s += "\n```yaml\nskip_layers:\n";
    for (const auto& p : r.advice.skip_layers) s += "  - " + p + "\n";
    s += "```\n";
  }
  s += "\n![cosine similarity by layer](diagnose.svg)\n\n## Layers\n\n| layer | block local cosine | cumulative cosine | cumulative rel. "
       "L2 | worst linear (local) | flagged |\n|---:|---:|---:|---:|---|---|\n";
  for (const auto& l : r.layers) {
    const LinearDiag* w = worst_linear(l);
    s += fmt::format("| {} | {:.5f} | {:.5f} | {:.4f} | {} | {} |\n", l.layer, l.local.cosine, l.cumulative.cosine, l.cumulative.rel_l2,
                     w ? fmt::format("{} {:.4f}", w->name, w->local.cosine) : "",
                     l.flagged ? "**yes**" : (l.block_below ? "block only" : ""));
  }
  s += "\n## Linears\n\n| module | stored as | local cosine | local rel. L2 | local max abs | cumulative cosine | variance | kurtosis | "
       "max/mean | outliers (%) | flagged |\n"
       "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& l : r.layers)
    for (const auto& x : l.linears)
      s += fmt::format("| {} | {} → {} | {:.5f} | {:.4f} | {:.4g} | {:.5f} | {:.3g} | {:.2f} | {:.1f} | {:.4f} | {} |\n", x.module,
                       x.original_type, x.quantized_type, x.local.cosine, x.local.rel_l2, x.local.max_abs, x.cumulative.cosine,
                       x.weights.variance, x.weights.kurtosis, x.weights.max_mean_ratio, 100 * x.weights.outlier_fraction,
                       x.flagged ? "**yes**" : "");
  if (!r.notes.empty()) {
    s += "\n## Notes\n\n";
    for (const auto& n : r.notes) s += "- " + n + "\n";
  }
  return s;
}

}  // namespace mo::diagnose
