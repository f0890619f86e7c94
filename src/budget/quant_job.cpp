#include "mo/budget/quant_job.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/core/strings.h"

namespace mo::budget {

QuantJobMemory quant_job_memory(const QuantJobRequest& r) {
  const auto& hp = r.hp;
  const std::uint64_t h = static_cast<std::uint64_t>(hp.hidden_size), ffn = static_cast<std::uint64_t>(hp.intermediate_size);
  const std::uint64_t q_dim = static_cast<std::uint64_t>(hp.num_heads * hp.head_dim),
                      kv_dim = static_cast<std::uint64_t>(hp.num_kv_heads * hp.head_dim);
  const bool gptq = r.method == "gptq";
  const bool calibrated = gptq || r.method == "awq" || r.sensitivity_check;
  const std::uint64_t tokens = calibrated ? static_cast<std::uint64_t>(r.samples * r.seq_len) : 0;
  // GPTQ keeps every token's hidden state; the others run only the samples their captures read.
  const std::uint64_t kept = gptq ? tokens : std::min<std::uint64_t>(tokens, static_cast<std::uint64_t>(r.capture_tokens + r.seq_len));
  QuantJobMemory m;
  m.hidden = kept * h * 4;
  m.captures = std::min<std::uint64_t>(tokens, static_cast<std::uint64_t>(r.capture_tokens)) * (h + q_dim + h + ffn) * 4;
  const std::uint64_t layer_params = q_dim * h + 2 * kv_dim * h + h * q_dim + 3 * h * ffn;
  m.layer = layer_params * 4 * 2;
  if (gptq && tokens > 0) {
    const std::uint64_t d = std::max({h, q_dim, ffn});
    const std::uint64_t rows = d == ffn ? h : std::max({q_dim, h, ffn});
    m.hessians = d * d * (8 * 3 + 4) + rows * d * 4;
  }
  m.hessians_on_gpu = r.hessians_on_gpu;
  return m;
}

std::string QuantJobMemory::terms() const {
  std::string s = fmt::format("hidden states {} + captured inputs {} + one layer {}", format_bytes(static_cast<double>(hidden)),
                              format_bytes(static_cast<double>(captures)), format_bytes(static_cast<double>(layer)));
  if (hessians > 0) s += fmt::format(" + GPTQ Hessians {}{}", format_bytes(static_cast<double>(hessians)), hessians_on_gpu ? " (GPU)" : "");
  return s;
}

std::int64_t max_samples_that_fit(QuantJobRequest r, std::uint64_t host_bytes, std::uint64_t gpu_bytes) {
  auto fits = [&](std::int64_t n) {
    r.samples = n;
    const QuantJobMemory m = quant_job_memory(r);
    return m.host() <= host_bytes && m.gpu() <= gpu_bytes;
  };
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = std::max<std::int64_t>(2, r.samples);
  while (fits(hi) && hi < (std::int64_t{1} << 40)) lo = hi, hi *= 2;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace mo::budget
