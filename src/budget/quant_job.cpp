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
  m.on_gpu = r.on_gpu;
  m.layer = layer_params * 4 * 2;
  // On a GPU, with the layer's f32 copy: one sample's activations through the block (normed input, q, attention
  // output, k/v then gate/up, the f32 attention weights [seq, seq]) and its f16 K/V.
  const std::uint64_t L = static_cast<std::uint64_t>(r.seq_len);
  const std::uint64_t block = L * (h + 2 * q_dim + std::max(2 * kv_dim, 2 * ffn) + L) * 4 + L * kv_dim * 4;
  m.layer_gpu = r.on_gpu ? layer_params * 4 + block : 0;
  if (gptq && tokens > 0) {
    const std::uint64_t d = std::max({h, q_dim, ffn});
    const std::uint64_t rows = d == ffn ? h : std::max({q_dim, h, ffn});
    m.hessians_host_part = d * d * 16 + rows * d * 4;
    m.hessians = m.hessians_host_part + d * d * 20 + rows * d * 4;
  }
  // Scoring on the backend: the sensitivity check's x, W, Wq, y and yq per linear; AWQ's sampled tokens, the
  // group's weights, a candidate's delta, the Gram matrix and the product per scaling group.
  const std::uint64_t n = std::min<std::uint64_t>(tokens, static_cast<std::uint64_t>(r.capture_tokens));
  std::uint64_t scoring = 0;
  const std::uint64_t shapes[4][3] = {
      {q_dim + 2 * kv_dim, q_dim, h}, {h, h, q_dim}, {2 * ffn, ffn, h}, {h, h, ffn}};  // group rows, widest, cols
  for (const auto& [group_rows, rows, cols] : shapes) {
    if (r.sensitivity_check) scoring = std::max(scoring, n * cols + 2 * rows * cols + 2 * n * rows);
    if (r.method == "awq") scoring = std::max(scoring, n * cols + group_rows * cols + rows * cols + rows * std::max(cols, n) + cols * cols);
  }
  m.scoring = tokens > 0 ? scoring * 4 : 0;
  return m;
}

std::string QuantJobMemory::terms() const {
  std::string s = fmt::format("hidden states {} + captured inputs {} + one layer {}", format_bytes(static_cast<double>(hidden)),
                              format_bytes(static_cast<double>(captures)), format_bytes(static_cast<double>(layer + layer_gpu)));
  if (hessians > 0) s += fmt::format(" + GPTQ Hessians {}", format_bytes(static_cast<double>(hessians)));
  if (scoring > 0) s += fmt::format(" + error scoring {}", format_bytes(static_cast<double>(scoring)));
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
