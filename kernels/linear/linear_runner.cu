// LinearRunner: checks a DeviceLinear, then picks the path.
//   n <= 8: fused GEMV kernels (linear_rowwise.cu for f16/q8_0/q4_k/q6_k, linear_packed.cu for awq/gptq),
//           unless a pointer is not aligned as the vector loads need: then the batched path below.
//   n > 8:  W dequantized to f16 scratch (f16 weights are used in place), x rounded to f16 scratch, and
//           one cublasGemmEx (f16 inputs, f32 output and accumulation), as vLLM does for large batches.
#include <string>

#include "cuda_ops.h"
#include "linear/linear_kernels.cuh"

namespace mo::engine::cuda_dev {
namespace {

// Plain string building, no fmt: its headers do not compile in nvcc's C++20 mode.
std::string str(std::int64_t v) { return std::to_string(v); }

[[noreturn]] void bad(const DeviceLinear& w, const std::string& why) {
  throw Error(std::string("linear ") + linear_kind_name(w.kind) + " (" + str(w.rows) + " x " + str(w.cols) + "): " + why);
}

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// The shape rules of the CPU backend's linear (src/engine/backend/linear_cpu_dev.cpp), plus the pointer
// alignment every path needs (int32 and f16 buffers at least naturally aligned). g_idx entries are not
// read back from the device: they must lie in [0, groups).
void validate(const DeviceLinear& w, std::int64_t n) {
  if (n < 0) bad(w, "negative token count " + str(n));
  if (w.rows <= 0 || w.cols <= 0) bad(w, "rows and cols must be positive");
  if (!w.weight) bad(w, "no weight buffer");
  switch (w.kind) {
    case LinearKind::f16:
      if (!aligned(w.weight, 2)) bad(w, "weight not 2-byte aligned");
      return;
    case LinearKind::q8_0:
    case LinearKind::q4_k:
    case LinearKind::q6_k: {
      const std::int64_t block = w.kind == LinearKind::q8_0 ? 32 : 256;
      const std::size_t bytes = w.kind == LinearKind::q8_0 ? 34 : w.kind == LinearKind::q4_k ? 144 : 210;
      if (w.cols % block != 0) bad(w, "cols must be a multiple of " + str(block));
      const std::size_t want = static_cast<std::size_t>(w.cols / block) * bytes;
      if (w.row_bytes != want)
        bad(w, "row_bytes " + str(static_cast<std::int64_t>(w.row_bytes)) + " != " + str(static_cast<std::int64_t>(want)));
      return;
    }
    case LinearKind::awq:
      if (w.bits != 4) bad(w, "AWQ stores 4-bit weights, got " + str(w.bits) + " bits");
      if (w.rows % 8 != 0) bad(w, "rows must be a multiple of 8");
      if (w.group_size <= 0 || w.cols % w.group_size != 0) bad(w, "group size " + str(w.group_size) + " must divide cols");
      if (w.groups != w.cols / w.group_size) bad(w, str(w.groups) + " groups for group size " + str(w.group_size));
      if (w.g_idx) bad(w, "AWQ has no g_idx");
      if (!w.qzeros || !w.scales) bad(w, "qzeros and scales are required");
      break;
    case LinearKind::gptq: {
      if (w.bits != 4 && w.bits != 8) bad(w, str(w.bits) + " bits (4 or 8)");
      const int pf = 32 / w.bits;
      if (w.rows % pf != 0 || w.cols % pf != 0) bad(w, "rows and cols must be multiples of " + str(pf));
      if (w.groups <= 0 || !w.qzeros || !w.scales) bad(w, "groups, qzeros and scales are required");
      if (!w.g_idx && (w.group_size <= 0 || (w.cols + w.group_size - 1) / w.group_size > w.groups))
        bad(w, "group size " + str(w.group_size) + " needs more than " + str(w.groups) + " groups");
      break;
    }
    default: bad(w, "unknown kind");
  }
  if (!aligned(w.weight, 4) || !aligned(w.qzeros, 4) || !aligned(w.g_idx, 4) || !aligned(w.scales, 2))
    bad(w, "qweight/qzeros/g_idx must be 4-byte and scales 2-byte aligned");
}

lin::Args to_args(const DeviceLinear& w) {
  lin::Args a;
  a.kind = static_cast<lin::Kind>(static_cast<int>(w.kind));
  a.rows = w.rows, a.cols = w.cols;
  a.w = static_cast<const std::uint8_t*>(w.weight);
  a.row_bytes = static_cast<std::int64_t>(w.row_bytes);
  a.qzeros = reinterpret_cast<const std::uint32_t*>(w.qzeros);
  a.scales = w.scales, a.g_idx = w.g_idx;
  a.bits = w.bits, a.group_size = w.group_size > 0 ? w.group_size : w.cols, a.groups = w.groups;
  a.zero_add = w.kind == LinearKind::gptq && w.zero_minus_one ? 1 : 0;
  return a;
}
static_assert(static_cast<int>(LinearKind::gptq) == static_cast<int>(lin::Kind::gptq) &&
                  static_cast<int>(LinearKind::q6_k) == static_cast<int>(lin::Kind::q6_k),
              "lin::Kind mirrors LinearKind");

// A device buffer that grows to the largest request and is reused.
struct Scratch {
  void* p = nullptr;
  std::size_t cap = 0;
  void* get(std::size_t bytes, const char* what) {
    if (bytes <= cap) return p;
    if (p) MO_CUDA_CHECK(what, cudaFree(p));
    p = nullptr, cap = 0;
    MO_CUDA_CHECK(what, cudaMalloc(&p, bytes));
    cap = bytes;
    return p;
  }
  void release() noexcept {
    if (p) cudaFree(p);  // destructor path: nothing to report to
    p = nullptr, cap = 0;
  }
};

}  // namespace

struct LinearRunner::Impl {
  cublasHandle_t handle = nullptr;
  int sm_count = 1;
  Scratch xh, wh, partial;  // f16 activations, f16 weights, split-K partial sums

  Impl() {
    sm_count = cuda_detail::device_attribute(cudaDevAttrMultiProcessorCount, "linear: SM count");
    MO_CUBLAS_CHECK("linear: cublasCreate", cublasCreate(&handle));
  }
  ~Impl() {
    xh.release(), wh.release(), partial.release();
    if (handle) cublasDestroy(handle);
  }

  // y[n, rows] = x[n, cols] · Wᵀ through cuBLAS: column-major C[rows, n] = Aᵀ · B with A = W as
  // column-major [cols, rows] (lda = cols) and B = x as column-major [cols, n] (ldb = cols).
  void gemm(const lin::Args& a, const DeviceLinear& w, const float* x, std::int64_t n, float* y) {
    const void* wf16 = w.weight;
    if (w.kind != LinearKind::f16) {
      auto* d = static_cast<__half*>(wh.get(static_cast<std::size_t>(a.rows * a.cols) * sizeof(__half), "linear: f16 weight scratch"));
      lin::dequantize_f16(a, d);
      wf16 = d;
    }
    auto* xf = static_cast<__half*>(xh.get(static_cast<std::size_t>(n * a.cols) * sizeof(__half), "linear: f16 activation scratch"));
    lin::to_f16(x, n * a.cols, xf);
    const float alpha = 1.0f, beta = 0.0f;
    const int m = static_cast<int>(a.rows), nn = static_cast<int>(n), k = static_cast<int>(a.cols);
    MO_CUBLAS_CHECK("linear cublasGemmEx", cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &alpha, wf16, CUDA_R_16F, k, xf,
                                                        CUDA_R_16F, k, &beta, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  void run(const float* x, std::int64_t n, const DeviceLinear& w, float* y) {
    validate(w, n);
    if (n == 0) return;
    if (w.rows > INT32_MAX || w.cols > INT32_MAX || n > INT32_MAX) bad(w, "dimensions beyond cuBLAS's int range");
    const lin::Args a = to_args(w);
    if (n <= lin::kMaxGemvTokens) {
      const int nt = static_cast<int>(n);
      if (w.kind == LinearKind::awq || w.kind == LinearKind::gptq) {
        lin::PackedPlan plan;
        if (lin::packed_gemv_plan(a, nt, sm_count, plan)) {
          if (plan.ksplit == 1) return lin::packed_gemv(a, x, nt, plan, y);
          auto* part = static_cast<float*>(
              partial.get(static_cast<std::size_t>(plan.ksplit * n * a.rows) * sizeof(float), "linear: split-K scratch"));
          lin::packed_gemv(a, x, nt, plan, part);
          return lin::reduce_partials(part, plan.ksplit, n * a.rows, y);
        }
      } else if (lin::rowwise_gemv_supported(a)) {
        return lin::rowwise_gemv(a, x, nt, y);
      }
    }
    gemm(a, w, x, n, y);
  }
};

LinearRunner::LinearRunner() : impl_(std::make_unique<Impl>()) {}
LinearRunner::~LinearRunner() = default;

void LinearRunner::run(const float* x, std::int64_t n, const DeviceLinear& w, float* y) { impl_->run(x, n, w, y); }

std::size_t LinearRunner::scratch_bytes() const { return impl_->xh.cap + impl_->wh.cap + impl_->partial.cap; }

}  // namespace mo::engine::cuda_dev
