#pragma once
// The CPU backend's ops over host buffers in the device layouts of backend.h. They mirror the CUDA
// kernels' contracts, so the same op tests run on both; the ops use `pool` where a loop is large.
#include <cstdint>

#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"

namespace mo::engine::cpu_dev {

// linear_cpu_dev.cpp
void linear(const float* x, std::int64_t n, const DeviceLinear& w, float* y, ThreadPool& pool);

// block_cpu_dev.cpp
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
void attention(const AttentionArgs& a, ThreadPool& pool);
// quant_cpu_dev.cpp: the quantization ops (Backend's contracts).
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before);
bool inverse_cholesky_upper(double* a, std::int64_t n, float* u);
void gptq_block(const GptqBlockArgs& a);
void fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym, ThreadPool& pool);
ErrorSums error_sums(const float* a, const float* b, std::int64_t n);
void quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale, const float* row_clip,
                    std::int64_t group, int bits, bool sym, float* d, ThreadPool& pool);
void row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out);

void f16_row_to_f32(const std::uint16_t* src, float* dst, std::int64_t n);

}  // namespace mo::engine::cpu_dev
