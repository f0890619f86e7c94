#include "mo/quant/layer_plan.h"

#include <fmt/format.h>

namespace mo::quant {
namespace {

// Group sizes tried, largest first, when the requested one does not divide the input width.
constexpr int kGroups[] = {128, 64, 32};

bool packs(OutputLayout layout, std::int64_t rows, std::int64_t cols, int bits) {
  if (layout == OutputLayout::awq_gemm) return bits == 4 && rows % 8 == 0;
  return (cols * bits) % 32 == 0 && (rows * bits) % 32 == 0;  // qweight along in, qzeros along out
}

std::string why_not_packed(OutputLayout layout, std::int64_t rows, std::int64_t cols, int bits) {
  if (layout == OutputLayout::awq_gemm)
    return bits != 4 ? "AWQ GEMM holds only 4-bit weights"
                     : fmt::format("out_features {} is not a multiple of 8 (AWQ packs 8 outputs per int32)", rows);
  return fmt::format("GPTQ packs {} {}-bit values per int32 and in_features {} / out_features {} are not multiples of {}", 32 / bits, bits,
                     cols, rows, 32 / bits);
}

}  // namespace

std::string LinearPlan::label() const {
  if (kind == f16) return "f16";
  if (kind == fp8) return scheme.group_size == 0 ? "fp8 per-tensor" : "fp8 per-channel";
  return fmt::format("int{} {}{}", scheme.bits, scheme.per_channel() ? std::string("per-channel") : fmt::format("g{}", scheme.group_size),
                     scheme.sym ? "" : " asym");
}

LinearPlan plan_linear(OutputLayout layout, std::int64_t rows, std::int64_t cols, int bits, int group_size, bool sym,
                       bool fp8_per_channel) {
  LinearPlan p;
  if (bits >= 16) return p;
  if (layout == OutputLayout::fp8) {
    p.kind = LinearPlan::fp8;
    p.scheme.bits = 8;
    p.scheme.group_size = fp8_per_channel ? -1 : 0;
    return p;
  }
  std::string reason;
  for (int b : {bits, 8}) {
    if (b != bits && layout == OutputLayout::awq_gemm) break;
    if (!packs(layout, rows, cols, b)) {
      reason += (reason.empty() ? "" : "; ") + why_not_packed(layout, rows, cols, b);
      if (b == 8) break;
      continue;
    }
    int g = group_size;
    if (g > 0 && cols % g != 0) {
      std::string r = fmt::format("in_features {} is not divisible by group {}", cols, g);
      int next = -1;
      if (layout != OutputLayout::awq_gemm)
        for (int c : kGroups)
          if (c < g && cols % c == 0) {
            next = c;
            break;
          }
      if (layout == OutputLayout::awq_gemm) {
        reason += (reason.empty() ? "" : "; ") + r + " (AWQ GEMM keeps one group size for the whole model)";
        break;
      }
      reason += (reason.empty() ? "" : "; ") + r + (next > 0 ? fmt::format(": group {}", next) : std::string(": per-channel scales"));
      g = next;
    }
    p.kind = LinearPlan::integer;
    p.scheme = formats::QuantScheme{b, g, layout == OutputLayout::awq_gemm ? false : sym};
    if (b != bits) reason += fmt::format(": INT{}", b);
    p.reason = reason;
    return p;
  }
  p.kind = LinearPlan::f16;
  p.reason = reason + ": kept in 16-bit";
  return p;
}

}  // namespace mo::quant
