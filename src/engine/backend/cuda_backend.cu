// The CUDA backend: device memory through cudaMalloc (tracked for the peak-memory figure), the ops
// forwarded to the kernels of cuda_ops.h. Every CUDA call is checked.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdint>
#include <unordered_map>

#include "check.cuh"
#include "cuda_ops.h"
#include "mo/core/error.h"
#include "mo/core/device_cuda.h"
#include "mo/engine/backend.h"

namespace mo::engine {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int ordinal) : ordinal_(ordinal) {
    MO_CUDA_CHECK("cudaSetDevice", cudaSetDevice(ordinal));
    cudaDeviceProp p{};
    MO_CUDA_CHECK("cudaGetDeviceProperties", cudaGetDeviceProperties(&p, ordinal));
    desc_ = fmt::format("cuda:{} {}, {:.1f} GiB, sm_{}{}", ordinal, p.name, p.totalGlobalMem / double(1ull << 30), p.major, p.minor);
    linear_ = std::make_unique<cuda_dev::LinearRunner>();  // its cuBLAS handle belongs to the device just set
    quant_ = std::make_unique<cuda_dev::QuantRunner>();
    // Stream-ordered scratch (split attention) stays in the pool between steps instead of going back at each sync.
    cudaMemPool_t pool = nullptr;
    MO_CUDA_CHECK("cudaDeviceGetDefaultMemPool", cudaDeviceGetDefaultMemPool(&pool, ordinal));
    std::uint64_t keep = UINT64_MAX;
    MO_CUDA_CHECK("cudaMemPoolSetAttribute", cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  ~CudaBackend() override = default;

  Device device() const override { return Device::cuda; }
  std::string describe() const override { return desc_; }

  void* alloc(std::size_t bytes) override {
    void* p = nullptr;
    if (bytes == 0) return nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw Error(fmt::format("cudaMalloc of {:.1f} MiB failed ({}); {:.1f} of {:.1f} GiB free on {}", bytes / double(1 << 20),
                              cudaGetErrorString(e), free / double(1ull << 30), total / double(1ull << 30), desc_));
    }
    MO_CUDA_CHECK("cudaMemset", cudaMemset(p, 0, bytes));
    sizes_.emplace(p, bytes);
    count_alloc(static_cast<std::ptrdiff_t>(bytes));
    return p;
  }
  void free(void* p) override {
    if (!p) return;
    auto it = sizes_.find(p);
    if (it != sizes_.end()) {
      count_alloc(-static_cast<std::ptrdiff_t>(it->second));
      sizes_.erase(it);
    }
    MO_CUDA_CHECK("cudaFree", cudaFree(p));
  }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) MO_CUDA_CHECK("cudaMemcpy host to device", cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) MO_CUDA_CHECK("cudaMemcpy device to host", cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) MO_CUDA_CHECK("cudaMemcpy device to device", cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  }
  void synchronize() override { MO_CUDA_CHECK("cudaDeviceSynchronize", cudaDeviceSynchronize()); }
  DeviceMemory memory() const override {
    DeviceMemory m;
    MO_CUDA_CHECK("cudaMemGetInfo", cudaMemGetInfo(&m.free, &m.total));
    return m;
  }

  void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out) override {
    cuda_dev::embedding(table, dim, tokens, n, out);
  }
  void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) override {
    cuda_dev::rms_norm(x, w, out, n, d, eps);
  }
  void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta, float freq_scale,
            const float* factors, RopeStyle style) override {
    cuda_dev::rope(x, pos, n, heads, head_dim, theta, freq_scale, factors, style);
  }
  void silu_mul(float* gate, const float* up, std::int64_t n) override { cuda_dev::silu_mul(gate, up, n); }
  void add(float* x, const float* y, std::int64_t n) override { cuda_dev::add(x, y, n); }
  void add_bias(float* y, const float* bias, std::int64_t n, std::int64_t d) override { cuda_dev::add_bias(y, bias, n, d); }
  void scale_columns(float* y, const float* s, std::int64_t n, std::int64_t d) override { cuda_dev::scale_columns(y, s, n, d); }
  void causal_softmax(float* s, std::int64_t n, std::int64_t ld) override { cuda_dev::causal_softmax(s, n, ld); }
  void kv_write(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots, std::int64_t n,
                std::int64_t row) override {
    cuda_dev::kv_write(k_cache, v_cache, k, v, slots, n, row);
  }
  void attention(const AttentionArgs& a) override {
    if (a.seq_first_row && a.max_rows_per_seq >= cuda_dev::kPrefillTileMinRows) return cuda_dev::attention_prefill(a);
    cuda_dev::attention(a);
  }
  void linear(const float* x, std::int64_t n, const DeviceLinear& w, float* y) override {
    if (w.kind == LinearKind::f32) {  // the quantizers' unrounded weights: one f32 GEMM
      if (n > 0)
        quant_->gemm(false, true, n, w.rows, w.cols, 1.0f, x, w.cols, static_cast<const float*>(w.weight), w.cols, 0.0f, y, w.rows);
      return;
    }
    const std::size_t before = linear_->scratch_bytes();
    linear_->run(x, n, w, y);
    // The kernels' scratch (f16 activations, dequantized weights) is device memory too: count it.
    if (const std::size_t after = linear_->scratch_bytes(); after != before)
      count_alloc(static_cast<std::ptrdiff_t>(after) - static_cast<std::ptrdiff_t>(before));
  }

  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
            const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    quant_->gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before) override {
    counted([&] { quant_->hessian_update(h, x, n, d, tokens_before); });
  }
  bool inverse_cholesky_upper(double* a, std::int64_t n, float* u) override { return quant_->inverse_cholesky_upper(a, n, u); }
  void gptq_block(const GptqBlockArgs& a) override { quant_->gptq_block(a); }
  void fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym) override {
    quant_->fake_quantize(w, rows, cols, group, bits, sym);
  }
  ErrorSums error_sums(const float* a, const float* b, std::int64_t n) override {
    ErrorSums out;
    counted([&] { out = quant_->error_sums(a, b, n); });
    return out;
  }
  void quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale, const float* row_clip,
                      std::int64_t group, int bits, bool sym, float* d) override {
    quant_->quantize_delta(w, ldw, rows, cols, col_scale, row_clip, group, bits, sym, d);
  }
  void row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out) override {
    counted([&] { quant_->row_dots(a, b, rows, cols, out); });
  }

 private:
  // The quantization scratch is device memory too: count it.
  template <class Fn>
  void counted(Fn fn) {
    const std::size_t before = quant_->scratch_bytes();
    fn();
    if (const std::size_t after = quant_->scratch_bytes(); after != before)
      count_alloc(static_cast<std::ptrdiff_t>(after) - static_cast<std::ptrdiff_t>(before));
  }
  int ordinal_;
  std::string desc_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::unique_ptr<cuda_dev::LinearRunner> linear_;
  std::unique_ptr<cuda_dev::QuantRunner> quant_;
};

}  // namespace

std::unique_ptr<Backend> cuda_plugin_backend(int ordinal) {
  const int n = cuda::device_count();
  if (n == 0) throw UsageError("device: cuda was asked for, but no CUDA GPU is visible (driver missing or no device); use --device cpu");
  if (ordinal < 0 || ordinal >= n)
    throw UsageError(fmt::format("device: cuda:{} does not exist ({} GPU{} visible)", ordinal, n, n == 1 ? "" : "s"));
  return std::make_unique<CudaBackend>(ordinal);
}

}  // namespace mo::engine
