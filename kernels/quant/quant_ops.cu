// The quantization ops on the GPU: cuBLAS for the GEMMs and GPTQ's rank-k Hessian update (syrk),
// cuSOLVER for the Cholesky factor of H⁻¹ (f64 potrf / potri / potrf, as the CPU's LAPACK path), and
// kernels for the per-row GPTQ column sweep, AWQ's quantize-dequantize and the output-error sums.
// Row-major matrices are handed to the column-major libraries as their transposes.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <string>

#include "check.cuh"
#include "cuda_ops.h"
#include "mo/formats/group_params.h"

#define MO_CUBLAS_Q_CHECK(op, expr)                                                                                               \
  do {                                                                                                                            \
    cublasStatus_t mo_st_ = (expr);                                                                                               \
    if (mo_st_ != CUBLAS_STATUS_SUCCESS) throw ::mo::Error(std::string(op) + ": cuBLAS error: " + cublasGetStatusString(mo_st_)); \
  } while (0)
#define MO_CUSOLVER_CHECK(op, expr)                                                                                            \
  do {                                                                                                                         \
    cusolverStatus_t mo_st_ = (expr);                                                                                          \
    if (mo_st_ != CUSOLVER_STATUS_SUCCESS) throw ::mo::Error(std::string(op) + ": cuSOLVER status " + std::to_string(mo_st_)); \
  } while (0)

namespace mo::engine::cuda_dev {
namespace {

constexpr int kThreads = 256;
int blocks_for(std::int64_t n) { return static_cast<int>(std::max<std::int64_t>(1, (n + kThreads - 1) / kThreads)); }

// h = h * keep + a * g, g holding xᵀx in its column-major upper triangle (row-major lower: g[max * d + min]).
__global__ void hessian_fold(double* h, const float* g, std::int64_t d, double keep, double a) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= d * d) return;
  const std::int64_t i = idx / d, j = idx % d;
  const std::int64_t lo = i < j ? i : j, hi = i < j ? j : i;
  h[idx] = h[idx] * keep + a * static_cast<double>(g[hi * d + lo]);
}

// Row-major U: zero the strict lower triangle, cast to f32.
__global__ void upper_to_f32(const double* a, float* u, std::int64_t n) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n * n) return;
  const std::int64_t i = idx / n, j = idx % n;
  u[idx] = j < i ? 0.0f : static_cast<float>(a[idx]);
}

// One thread per row: the row's whole sweep through the block (rows are independent in GPTQ's inner loop).
__global__ void gptq_block_kernel(GptqBlockArgs a) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  const std::int64_t rows = a.rows;
  double loss = 0;
  for (std::int64_t i = 0; i < a.count; ++i) {
    const std::int64_t set = a.param_set[i];
    formats::GroupParams p;
    if (const std::int64_t len = a.group_start[i]; len > 0) {
      p = formats::group_params(a.w_start + i * rows + r, len, rows, a.bits, a.sym);
      a.scales[set * rows + r] = p.scale_f16;
      a.zeros[set * rows + r] = p.zero;
    } else {
      p.scale_f16 = a.scales[set * rows + r];
      p.zero = a.zeros[set * rows + r];
    }
    const float wv = a.w[i * rows + r];
    const int q = formats::quantize_code(wv, p, a.bits);
    a.codes[i * rows + r] = static_cast<std::uint8_t>(q);
    const float e = (wv - formats::dequantize_code(q, p)) / a.u[i * a.ldu + i];
    a.err[i * rows + r] = e;
    loss += static_cast<double>(e) * e;
    const float* ui = a.u + i * a.ldu;
    for (std::int64_t j = i + 1; j < a.count; ++j) a.w[j * rows + r] = fmaf(-ui[j], e, a.w[j * rows + r]);
  }
  a.loss[r] += loss;
}

// One thread per (row, group).
__global__ void fake_quantize_kernel(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym) {
  const std::int64_t groups = (cols + group - 1) / group;
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * groups) return;
  const std::int64_t r = idx / groups, c0 = (idx % groups) * group;
  const std::int64_t n = cols - c0 < group ? cols - c0 : group;
  float* g = w + r * cols + c0;
  formats::fake_quantize_group(g, n, formats::group_params(g, n, 1, bits, sym), bits);
}

// One thread per (row, group): scale, clip, quantize-dequantize, unscale, minus the original.
__global__ void quantize_delta_kernel(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale,
                                      const float* row_clip, std::int64_t group, int bits, bool sym, float* d) {
  const std::int64_t groups = (cols + group - 1) / group;
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * groups) return;
  const std::int64_t r = idx / groups, c0 = (idx % groups) * group;
  const std::int64_t n = cols - c0 < group ? cols - c0 : group;
  const float* wg = w + r * ldw + c0;
  float* g = d + r * cols + c0;
  for (std::int64_t i = 0; i < n; ++i) {
    float v = col_scale ? wg[i] * col_scale[c0 + i] : wg[i];
    if (row_clip) v = fminf(fmaxf(v, -row_clip[r]), row_clip[r]);
    g[i] = v;
  }
  formats::fake_quantize_group(g, n, formats::group_params(g, n, 1, bits, sym), bits);
  for (std::int64_t i = 0; i < n; ++i) g[i] = (col_scale ? g[i] / col_scale[c0 + i] : g[i]) - wg[i];
}

// One block per row.
__global__ void row_dots_kernel(const float* a, const float* b, std::int64_t cols, double* out) {
  __shared__ double sh[kThreads];
  const std::int64_t r = blockIdx.x;
  double s = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += static_cast<double>(a[r * cols + c]) * b[r * cols + c];
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int step = kThreads / 2; step > 0; step /= 2) {
    if (static_cast<int>(threadIdx.x) < step) sh[threadIdx.x] += sh[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[r] = sh[0];
}

// Block partial sums, folded with f64 atomics (max |a - b| as the bits of a non-negative double).
__global__ void error_sums_kernel(const float* a, const float* b, std::int64_t n, double* out) {
  __shared__ double sh[5][kThreads];
  double s[5] = {0, 0, 0, 0, 0};
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double x = a[i], y = b[i], d = x - y;
    s[0] += x * y;
    s[1] += x * x;
    s[2] += y * y;
    s[3] += d * d;
    s[4] = fmax(s[4], fabs(d));
  }
  for (int k = 0; k < 5; ++k) sh[k][threadIdx.x] = s[k];
  __syncthreads();
  for (int step = kThreads / 2; step > 0; step /= 2) {
    if (static_cast<int>(threadIdx.x) < step) {
      for (int k = 0; k < 4; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + step];
      sh[4][threadIdx.x] = fmax(sh[4][threadIdx.x], sh[4][threadIdx.x + step]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int k = 0; k < 4; ++k) atomicAdd(&out[k], sh[k][0]);
    atomicMax(reinterpret_cast<unsigned long long*>(&out[4]), static_cast<unsigned long long>(__double_as_longlong(sh[4][0])));
  }
}

void check_launch(const char* op) { MO_CUDA_CHECK(op, cudaGetLastError()); }

}  // namespace

struct QuantRunner::Impl {
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  float* g = nullptr;  // hessian_update's xᵀx scratch
  std::size_t g_bytes = 0;
  double* dots = nullptr;  // row_dots' results
  std::size_t dots_bytes = 0;

  ~Impl() {
    if (dots) cudaFree(dots);
    if (g) cudaFree(g);
    if (solver) cusolverDnDestroy(solver);
    if (blas) cublasDestroy(blas);
  }
  cublasHandle_t cublas() {
    if (!blas) MO_CUBLAS_Q_CHECK("cublasCreate", cublasCreate(&blas));
    return blas;
  }
  cusolverDnHandle_t cusolver() {
    if (!solver) MO_CUSOLVER_CHECK("cusolverDnCreate", cusolverDnCreate(&solver));
    return solver;
  }
  float* scratch(std::size_t bytes) {
    if (bytes > g_bytes) {
      if (g) MO_CUDA_CHECK("cudaFree", cudaFree(g));
      g = nullptr;
      g_bytes = 0;
      MO_CUDA_CHECK("cudaMalloc (Hessian scratch)", cudaMalloc(&g, bytes));
      g_bytes = bytes;
    }
    return g;
  }
};

QuantRunner::QuantRunner() : impl_(std::make_unique<Impl>()) {}
QuantRunner::~QuantRunner() = default;
std::size_t QuantRunner::scratch_bytes() const { return impl_->g_bytes + impl_->dots_bytes; }

void QuantRunner::gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                       std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, the row-major buffers read as their transposes.
  MO_CUBLAS_Q_CHECK("cublasSgemm", cublasSgemm(impl_->cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                               static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                                               static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
}

void QuantRunner::hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before) {
  if (n <= 0) return;
  float* g = impl_->scratch(static_cast<std::size_t>(d * d) * sizeof(float));
  const float one = 1.0f, zero = 0.0f;
  // Row-major x [n, d] is column-major xᶜ [d, n]; xᵀx = xᶜ·xᶜᵀ.
  MO_CUBLAS_Q_CHECK("cublasSsyrk", cublasSsyrk(impl_->cublas(), CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, static_cast<int>(d),
                                               static_cast<int>(n), &one, x, static_cast<int>(d), &zero, g, static_cast<int>(d)));
  const double keep = static_cast<double>(tokens_before) / static_cast<double>(tokens_before + n);
  const double a = 2.0 / static_cast<double>(tokens_before + n);
  hessian_fold<<<blocks_for(d * d), kThreads>>>(h, g, d, keep, a);
  check_launch("hessian_fold");
}

bool QuantRunner::inverse_cholesky_upper(double* a, std::int64_t n, float* u) {
  // Row-major upper U (a = UᵀU) is the column-major lower L = Uᵀ (a = L·Lᵀ) in the same memory.
  cusolverDnHandle_t s = impl_->cusolver();
  const int ni = static_cast<int>(n);
  int lwork_f = 0, lwork_i = 0;
  MO_CUSOLVER_CHECK("cusolverDnDpotrf_bufferSize", cusolverDnDpotrf_bufferSize(s, CUBLAS_FILL_MODE_LOWER, ni, a, ni, &lwork_f));
  MO_CUSOLVER_CHECK("cusolverDnDpotri_bufferSize", cusolverDnDpotri_bufferSize(s, CUBLAS_FILL_MODE_LOWER, ni, a, ni, &lwork_i));
  const int lwork = std::max(lwork_f, lwork_i);
  double* work = nullptr;
  int* info = nullptr;
  MO_CUDA_CHECK("cudaMalloc (cuSOLVER workspace)", cudaMalloc(&work, static_cast<std::size_t>(lwork) * sizeof(double) + sizeof(int)));
  info = reinterpret_cast<int*>(work + lwork);
  bool ok = true;
  auto step = [&](const char* op, cusolverStatus_t st) {
    if (!ok) return;
    MO_CUSOLVER_CHECK(op, st);
    int h_info = 0;
    MO_CUDA_CHECK(op, cudaMemcpy(&h_info, info, sizeof(int), cudaMemcpyDeviceToHost));
    ok = h_info == 0;
  };
  try {
    step("cusolverDnDpotrf", cusolverDnDpotrf(s, CUBLAS_FILL_MODE_LOWER, ni, a, ni, work, lwork, info));
    if (ok) step("cusolverDnDpotri", cusolverDnDpotri(s, CUBLAS_FILL_MODE_LOWER, ni, a, ni, work, lwork, info));
    // potri leaves only the lower triangle (column-major) of a⁻¹: the next potrf reads just that one.
    if (ok) step("cusolverDnDpotrf", cusolverDnDpotrf(s, CUBLAS_FILL_MODE_LOWER, ni, a, ni, work, lwork, info));
  } catch (...) {
    cudaFree(work);
    throw;
  }
  MO_CUDA_CHECK("cudaFree", cudaFree(work));
  if (!ok) return false;
  upper_to_f32<<<blocks_for(n * n), kThreads>>>(a, u, n);
  check_launch("upper_to_f32");
  return true;
}

void QuantRunner::gptq_block(const GptqBlockArgs& a) {
  if (a.rows <= 0 || a.count <= 0) return;
  gptq_block_kernel<<<blocks_for(a.rows), kThreads>>>(a);
  check_launch("gptq_block");
}

void QuantRunner::fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym) {
  if (rows <= 0 || cols <= 0) return;
  const std::int64_t groups = (cols + group - 1) / group;
  fake_quantize_kernel<<<blocks_for(rows * groups), kThreads>>>(w, rows, cols, group, bits, sym);
  check_launch("fake_quantize");
}

void QuantRunner::quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale,
                                 const float* row_clip, std::int64_t group, int bits, bool sym, float* d) {
  if (rows <= 0 || cols <= 0) return;
  const std::int64_t groups = (cols + group - 1) / group;
  quantize_delta_kernel<<<blocks_for(rows * groups), kThreads>>>(w, ldw, rows, cols, col_scale, row_clip, group, bits, sym, d);
  check_launch("quantize_delta");
}

void QuantRunner::row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out) {
  if (rows <= 0) return;
  const std::size_t bytes = static_cast<std::size_t>(rows) * sizeof(double);
  if (bytes > impl_->dots_bytes) {
    if (impl_->dots) MO_CUDA_CHECK("cudaFree", cudaFree(impl_->dots));
    impl_->dots = nullptr;
    impl_->dots_bytes = 0;
    MO_CUDA_CHECK("cudaMalloc (row_dots)", cudaMalloc(&impl_->dots, bytes));
    impl_->dots_bytes = bytes;
  }
  row_dots_kernel<<<static_cast<unsigned>(rows), kThreads>>>(a, b, cols, impl_->dots);
  check_launch("row_dots");
  MO_CUDA_CHECK("cudaMemcpy device to host", cudaMemcpy(out, impl_->dots, bytes, cudaMemcpyDeviceToHost));
}

ErrorSums QuantRunner::error_sums(const float* a, const float* b, std::int64_t n) {
  ErrorSums out;
  if (n <= 0) return out;
  double* sums = reinterpret_cast<double*>(impl_->scratch(std::max<std::size_t>(impl_->g_bytes, 5 * sizeof(double))));
  MO_CUDA_CHECK("cudaMemset", cudaMemset(sums, 0, 5 * sizeof(double)));
  const int blocks = static_cast<int>(std::min<std::int64_t>(1024, (n + kThreads - 1) / kThreads));
  error_sums_kernel<<<blocks, kThreads>>>(a, b, n, sums);
  check_launch("error_sums");
  double h[5];
  MO_CUDA_CHECK("cudaMemcpy device to host", cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost));
  out.ab = h[0], out.aa = h[1], out.bb = h[2], out.dd = h[3], out.max_abs = h[4];
  return out;
}

}  // namespace mo::engine::cuda_dev
