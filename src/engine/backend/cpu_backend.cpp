#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_ops.h"
#include "mo/core/cuda_plugin.h"
#include "mo/core/error.h"
#include "mo/core/memory.h"
#include "mo/engine/backend.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"

namespace mo::engine {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(ThreadPool& pool, bool host_formats, ops::Batching batching) : pool_(pool), host_formats_(host_formats), batching_(batching) {}
  Device device() const override { return Device::cpu; }
  std::string describe() const override { return fmt::format("cpu ({} threads)", pool_.size()); }
  bool host_formats() const override { return host_formats_; }

  void* alloc(std::size_t bytes) override {
    // The size is stored in front of the block so free() can keep the allocation count.
    void* p = std::calloc(bytes + kHeader, 1);
    if (!p) throw Error(fmt::format("cpu backend: cannot allocate {} bytes", bytes));
    std::memcpy(p, &bytes, sizeof bytes);
    count_alloc(static_cast<std::ptrdiff_t>(bytes));
    return static_cast<char*>(p) + kHeader;
  }
  void free(void* p) override {
    if (!p) return;
    char* base = static_cast<char*>(p) - kHeader;
    std::size_t bytes = 0;
    std::memcpy(&bytes, base, sizeof bytes);
    count_alloc(-static_cast<std::ptrdiff_t>(bytes));
    std::free(base);
  }
  void upload(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) override { std::memmove(dst, src, bytes); }
  void synchronize() override {}
  DeviceMemory memory() const override { return {available_memory_bytes(), physical_memory_bytes()}; }  // host RAM

  void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out) override {
    cpu_dev::embedding(table, dim, tokens, n, out);
  }
  // Element- and row-wise ops split across the pool when large (prefill): each element's math is the
  // same whatever the split.
  void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) override {
    if (n * d < kSplit) return cpu_dev::rms_norm(x, w, out, n, d, eps);
    pool_.parallel_for(0, n, [&](std::int64_t b, std::int64_t e, int) { cpu_dev::rms_norm(x + b * d, w, out + b * d, e - b, d, eps); });
  }
  void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta, float freq_scale,
            const float* factors, RopeStyle style) override {
    cpu_dev::rope(x, pos, n, heads, head_dim, theta, freq_scale, factors, style);
  }
  void silu_mul(float* gate, const float* up, std::int64_t n) override {
    if (n < kSplit) return cpu_dev::silu_mul(gate, up, n);
    pool_.parallel_for(
        0, n, [&](std::int64_t b, std::int64_t e, int) { cpu_dev::silu_mul(gate + b, up + b, e - b); }, kSplit / 2);
  }
  void add(float* x, const float* y, std::int64_t n) override { cpu_dev::add(x, y, n); }
  void add_bias(float* y, const float* bias, std::int64_t n, std::int64_t d) override { cpu_dev::add_bias(y, bias, n, d); }
  void scale_columns(float* y, const float* s, std::int64_t n, std::int64_t d) override { cpu_dev::scale_columns(y, s, n, d); }
  void causal_softmax(float* s, std::int64_t n, std::int64_t ld) override { cpu_dev::causal_softmax(s, n, ld); }
  void kv_write(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots, std::int64_t n,
                std::int64_t row) override {
    cpu_dev::kv_write(k_cache, v_cache, k, v, slots, n, row);
  }
  void attention(const AttentionArgs& a) override { cpu_dev::attention(a, pool_); }
  void linear(const float* x, std::int64_t n, const DeviceLinear& w, float* y) override {
    if (w.kind == LinearKind::host) return ops::linear(x, n, *w.host, y, pool_, batching_);
    cpu_dev::linear(x, n, w, y, pool_);
  }
  void linear_multi(const float* x, std::int64_t n, const DeviceLinear* const* ws, float* const* ys, int count) override {
    std::vector<const Matrix*> ms;
    for (int i = 0; i < count; ++i)
      if (ws[i]->kind == LinearKind::host) ms.push_back(ws[i]->host);
    if (static_cast<int>(ms.size()) != count) return Backend::linear_multi(x, n, ws, ys, count);
    ops::linear_multi(x, n, ms, std::span<float* const>(ys, static_cast<std::size_t>(count)), pool_, batching_);
  }

  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
            const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    cpu_dev::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before) override {
    cpu_dev::hessian_update(h, x, n, d, tokens_before);
  }
  bool inverse_cholesky_upper(double* a, std::int64_t n, float* u) override { return cpu_dev::inverse_cholesky_upper(a, n, u); }
  void gptq_block(const GptqBlockArgs& a) override { cpu_dev::gptq_block(a); }
  void fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym) override {
    cpu_dev::fake_quantize(w, rows, cols, group, bits, sym, pool_);
  }
  ErrorSums error_sums(const float* a, const float* b, std::int64_t n) override { return cpu_dev::error_sums(a, b, n); }
  void quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale, const float* row_clip,
                      std::int64_t group, int bits, bool sym, float* d) override {
    cpu_dev::quantize_delta(w, ldw, rows, cols, col_scale, row_clip, group, bits, sym, d, pool_);
  }
  void row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out) override {
    cpu_dev::row_dots(a, b, rows, cols, out);
  }

 private:
  static constexpr std::size_t kHeader = 64;       // keeps the returned pointer 64-byte aligned
  static constexpr std::int64_t kSplit = 1 << 14;  // elements below which threads cost more than they save
  ThreadPool& pool_;
  bool host_formats_;
  ops::Batching batching_;  // for the stored formats (LinearKind::host)
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(ThreadPool& pool) { return std::make_unique<CpuBackend>(pool, false, ops::Batching::invariant); }
std::unique_ptr<Backend> make_host_backend(ThreadPool& pool, ops::Batching batching) {
  return std::make_unique<CpuBackend>(pool, true, batching);
}

std::unique_ptr<Backend> make_backend(Device device, ThreadPool& pool) {
  return device == Device::cuda ? make_cuda_backend(0) : make_host_backend(pool, ops::Batching::invariant);
}

std::unique_ptr<Backend> make_cuda_backend(int ordinal) {
  std::string why;
  const CudaPluginApi* api = cuda_plugin(&why);
  if (api == nullptr) throw UsageError("device: cuda was asked for, but the CUDA backend is unavailable: " + why);
  return api->make_backend(ordinal);
}

}  // namespace mo::engine
