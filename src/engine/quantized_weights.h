#pragma once
// Binding the linears of quantized HF checkpoints (AWQ GEMM, GPTQ v1/v2, compressed-tensors FP8) to
// engine matrices, for bind_weights. Decoded matrices live in ModelWeights::owned:
//   - Q4Z blocks (kQ4zType, src/engine/cpu/q4z.h) for 4-bit linears with cols % 32 == 0 and groups of
//     a multiple of 32 (or one per row): the stored scale and zero per block of 32, exact. Act-order
//     g_idx whose groups are whole blocks: columns permuted at load, Matrix::in_perm records it.
//   - else GGUF Q8_0 blocks (d = the stored f16 scale, qs = q - zero) when that is exact (8-bit): groups contiguous
//     (g_idx[c] == c / G), cols % 32 == 0, G a multiple of 32 or one group per row, every q - zero in
//     int8. 34 bytes per 32 weights, and the engine's fast Q8_0 kernels apply.
//   - F32 otherwise (act-order g_idx, asymmetric 8-bit codes outside int8, odd widths, FP8): the exact
//     f32 dequantization, (q - zero) * scale or fp8 value * scale.
// Rows stay in the checkpoint's order (HF rotate-half Q/K), as for float HF directories.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mo/engine/weights.h"
#include "mo/formats/hf_quant_config.h"

namespace mo::engine::detail {

class QuantizedLinears {
 public:
  // Parses the checkpoint's quantization_config (in file order, re-read from config.json so GPTQ
  // `dynamic` rules keep their order). Throws UsageError for configurations we cannot load.
  explicit QuantizedLinears(const model::ModelFiles& files);

  // The linear whose GGUF-style base name is `base` ("blk.3.attn_q", "output"), [rows, cols], decoded
  // into a new buffer of `owned`; nullopt when the checkpoint keeps it as a plain float `weight`.
  // Throws Error naming the tensor when a quantized tensor is missing or mis-shaped.
  std::optional<Matrix> load(const std::string& base, std::int64_t rows, std::int64_t cols, std::vector<std::vector<std::uint8_t>>& owned);

  // One info line: the scheme and how many linears became Q4Z / Q8_0 / F32 / stayed float, with the reasons.
  void log_summary() const;

  const formats::HfQuantConfig& config() const { return config_; }
  const std::map<std::string, int>& counts() const { return counts_; }  // "q4z (...)" / "q8_0 (...)" / "f32 (...)" -> linears

 private:
  const model::ModelFiles& files_;
  formats::HfQuantConfig config_;
  std::map<std::string, int> counts_;
  int g_idx_without_desc_act_ = 0;
};

}  // namespace mo::engine::detail
