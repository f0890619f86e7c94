#pragma once
// Host-side entry points of the CUDA kernels, in plain C++ (no CUDA headers), for the CUDA backend
// (kernels/cuda_backend.cu). All pointers are device memory; every launch is on the default stream and
// checked (MO_CUDA_CHECK): a failure throws mo::Error naming the op and CUDA's message.
#include <cstdint>
#include <memory>

#include "mo/engine/backend.h"

namespace mo::engine::cuda_dev {

// linear_*.cu: owns the cuBLAS handle and the scratch buffers (f16 activations, weights dequantized to
// f16 for batched calls), which grow to the largest call and are reused.
class LinearRunner {
 public:
  LinearRunner();
  ~LinearRunner();
  LinearRunner(const LinearRunner&) = delete;
  LinearRunner& operator=(const LinearRunner&) = delete;
  // y[n, w.rows] = x[n, w.cols] · Wᵀ (f32 in, f32 out).
  void run(const float* x, std::int64_t n, const DeviceLinear& w, float* y);
  std::size_t scratch_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// quant/quant_ops.cu: the quantization ops (Backend's contracts). Owns its cuBLAS and cuSOLVER handles
// (made on first use, so inference never loads cuSOLVER) and the Hessian scratch.
class QuantRunner {
 public:
  QuantRunner();
  ~QuantRunner();
  QuantRunner(const QuantRunner&) = delete;
  QuantRunner& operator=(const QuantRunner&) = delete;
  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
            const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
  void hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before);
  bool inverse_cholesky_upper(double* a, std::int64_t n, float* u);
  void gptq_block(const GptqBlockArgs& a);
  void fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym);
  ErrorSums error_sums(const float* a, const float* b, std::int64_t n);
  void quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale, const float* row_clip,
                      std::int64_t group, int bits, bool sym, float* d);
  void row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out);  // out: host memory
  std::size_t scratch_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// block_ops.cu, attention.cu: the contracts of Backend's ops of the same names.
void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out);
void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps);
void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta, float freq_scale,
          const float* factors, RopeStyle style);
void silu_mul(float* gate, const float* up, std::int64_t n);
void add(float* x, const float* y, std::int64_t n);
void add_bias(float* y, const float* bias, std::int64_t n, std::int64_t d);
void scale_columns(float* y, const float* s, std::int64_t n, std::int64_t d);
void causal_softmax(float* s, std::int64_t n, std::int64_t ld);
void kv_write(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots, std::int64_t n,
              std::int64_t row);
void attention(const AttentionArgs& a);
// attention_prefill.cu: the same contract, for batches with a sequence of many query rows (prefill):
// tiles of one sequence's consecutive rows share each K/V tile they load. Needs a.seq_first_row.
void attention_prefill(const AttentionArgs& a);
inline constexpr int kPrefillTileMinRows = 16;  // the backend takes the tiled kernel from this many rows of one sequence

}  // namespace mo::engine::cuda_dev
