#pragma once
// The engine's device side: memory and the ops of the Llama block over buffers that live in one
// device's memory. Two implementations with the same contracts:
//   - the CPU backend (host memory), which runs the same device-layout math on the CPU, and
//   - the CUDA backend (kernels/, device memory; only in builds with MO_WITH_CUDA).
// DeviceModel (device_model.h) runs the forward pass over either. Every pointer an op takes is in the
// backend's memory; sizes are element counts unless a name says bytes. Ops are queued in order on the
// backend's stream: download() and synchronize() wait for them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mo/core/device.h"
#include "mo/engine/rope_style.h"

namespace mo {
class ThreadPool;
}
namespace mo::ops {
enum class Batching;  // mo/engine/ops/linear.h
}

namespace mo::engine {

struct Matrix;

// How one linear layer's weights are stored on the device, each read by its own kernel.
enum class LinearKind {
  f16,   // weight: f16 bits [rows, cols] row-major (F32/F16/BF16 and other GGUF types are converted to this)
  q8_0,  // weight: GGUF Q8_0 blocks, `rows` rows of `row_bytes` (cols % 32 == 0)
  q4_k,  // weight: GGUF Q4_K blocks (cols % 256 == 0)
  q6_k,  // weight: GGUF Q6_K blocks (cols % 256 == 0)
  awq,   // AutoAWQ GEMM 4-bit: weight = qweight int32 [cols, rows/8], interleaved order 0,2,4,6,1,3,5,7
         // along out; qzeros int32 [groups, rows/8] same order, true zeros; scales f16 [groups, rows]
  gptq,  // AutoGPTQ 4 or 8 bits: weight = qweight int32 [cols*bits/32, rows] packed along in (value j of
         // a word at bits*j); qzeros int32 [groups, rows*bits/32] packed along out; scales f16
         // [groups, rows]; g_idx int32 [cols] (group of each input) or null for g = k / group_size
  f32,   // weight: f32 [rows, cols] row-major, an f32 GEMM: the quantizers' calibration passes run the weights
         // they are quantizing unrounded
  host,  // host backend only: the model's own stored Matrix read in place (any ggml type, AWQ/GPTQ as the
         // engine binds them) by the fast CPU kernels of ops::linear. Last: the CUDA side casts the others.
};
inline const char* linear_kind_name(LinearKind k) {
  switch (k) {
    case LinearKind::f16: return "f16";
    case LinearKind::q8_0: return "q8_0";
    case LinearKind::q4_k: return "q4_k";
    case LinearKind::q6_k: return "q6_k";
    case LinearKind::awq: return "awq";
    case LinearKind::gptq: return "gptq";
    case LinearKind::f32: return "f32";
    case LinearKind::host: return "host";
  }
  return "?";
}

// y[n, rows] = x[n, cols] · Wᵀ, W dequantized as (q - zero) * scale for awq/gptq.
struct DeviceLinear {
  LinearKind kind = LinearKind::f16;
  std::int64_t rows = 0;  // output features
  std::int64_t cols = 0;  // input features
  const void* weight = nullptr;
  std::size_t row_bytes = 0;              // q8_0 / q4_k / q6_k: bytes of one row of blocks
  const std::int32_t* qzeros = nullptr;   // awq / gptq
  const std::uint16_t* scales = nullptr;  // awq / gptq: f16 bits [groups, rows]
  const std::int32_t* g_idx = nullptr;    // gptq: [cols], or null
  int bits = 4;                           // awq: 4; gptq: 4 or 8
  std::int64_t group_size = 0;            // awq / gptq: inputs per group (cols for one group per row)
  std::int64_t groups = 0;                // awq / gptq: rows of qzeros and scales
  bool zero_minus_one = false;            // gptq v1: the stored zero is the true zero - 1
  std::size_t bytes = 0;                  // device bytes of all its buffers (for bandwidth figures)
  const Matrix* host = nullptr;           // host: the matrix as stored
};

// Paged attention over f16 KV blocks, for decode and ragged prefill alike: each query row (one token of
// one sequence) attends to positions 0 .. row_ctx[r]-1 of its sequence (causal: its own position + 1),
// found through the sequence's block table. GQA: query head h reads KV head h / (num_heads / num_kv_heads).
struct AttentionArgs {
  const float* q = nullptr;                    // [n_rows, num_heads, head_dim], RoPE applied
  float* out = nullptr;                        // [n_rows, num_heads, head_dim]
  const std::uint16_t* k_cache = nullptr;      // one layer, f16 bits [num_blocks, block_size, num_kv_heads, head_dim]
  const std::uint16_t* v_cache = nullptr;      // same shape
  const std::int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  const std::int32_t* row_seq = nullptr;       // [n_rows]: index of the row's sequence in block_tables
  const std::int32_t* row_ctx = nullptr;       // [n_rows]: positions the row attends to (>= 1)
  int n_rows = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 16, max_blocks_per_seq = 0;
  int max_ctx = 0;     // max of row_ctx (known on the host)
  float scale = 1.0f;  // 1 / sqrt(head_dim)
  // Optional, for kernels that tile a sequence's query rows (prefill): the rows of sequence s are
  // seq_first_row[s] .. seq_first_row[s+1]-1, contiguous, positions increasing ([num_seqs + 1], device
  // memory); max_rows_per_seq is known on the host. Null / 0 when the caller does not provide them.
  const std::int32_t* seq_first_row = nullptr;
  int num_seqs = 0;
  int max_rows_per_seq = 0;
  // Host backends only: an f32 cache instead of the f16 one (k_cache / v_cache null then).
  const float* k_cache_f32 = nullptr;
  const float* v_cache_f32 = nullptr;
};

// One block of GPTQ's column sweep (AutoGPTQ fasterquant's inner loop). Every row is independent: for
// each column i in order, compute the group params where a dynamic group starts, quantize, err = (w -
// deq) / U_ii, and push the error into the block's later columns (w_j -= U_ij * err).
struct GptqBlockArgs {
  float* w = nullptr;              // [count, rows]: the block's columns (columns are rows here), swept in place
  const float* w_start = nullptr;  // [count, rows]: the same before the sweep (dynamic group params read it)
  const float* u = nullptr;        // the block's U: U_ij at u[i * ldu + j]
  std::int64_t ldu = 0;
  float* err = nullptr;                       // [count, rows] out
  std::uint8_t* codes = nullptr;              // [count, rows] out
  std::uint16_t* scales = nullptr;            // [param sets, rows] f16 bits: read, and written where a dynamic group starts
  std::int32_t* zeros = nullptr;              // [param sets, rows]
  const std::int32_t* param_set = nullptr;    // [count]: the params row each column uses
  const std::int32_t* group_start = nullptr;  // [count]: n > 0 where a dynamic group of n columns starts, else 0
  double* loss = nullptr;                     // [rows]: += err^2
  std::int64_t rows = 0, count = 0;
  int bits = 4;
  bool sym = true;
};

// Sums over two outputs a and b (f64): the cosine and relative error of a quantized layer's output.
struct ErrorSums {
  double ab = 0, aa = 0, bb = 0, dd = 0;  // a.b, |a|^2, |b|^2, |a - b|^2
  double max_abs = 0;                     // max |a - b|
};

struct DeviceMemory {
  std::size_t free = 0, total = 0;  // of the whole device (cudaMemGetInfo; host RAM for the CPU)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string describe() const = 0;  // "cpu (2 threads)", "cuda:0 NVIDIA H200, 139.8 GiB, sm_90"

  // Memory. alloc returns zeroed memory and throws mo::Error naming the bytes when it cannot.
  virtual void* alloc(std::size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void synchronize() = 0;
  virtual DeviceMemory memory() const = 0;
  std::size_t allocated_bytes() const { return allocated_; }
  std::size_t peak_allocated_bytes() const { return peak_; }

  // table: f16 bits [vocab, dim]; out[t] = table[tokens[t]] as f32 (ids checked by the caller).
  virtual void embedding(const std::uint16_t* table, std::int64_t dim, const std::int32_t* tokens, std::int64_t n, float* out) = 0;
  // out[t] = x[t] / sqrt(mean(x[t]²) + eps) * w, rows of d; out may alias x.
  virtual void rms_norm(const float* x, const float* w, float* out, std::int64_t n, std::int64_t d, float eps) = 0;
  // x: [n, heads, head_dim]; token t rotated for position pos[t] exactly as ops::rope (factors: [head_dim/2] or null).
  virtual void rope(float* x, const std::int32_t* pos, std::int64_t n, std::int64_t heads, std::int64_t head_dim, float theta,
                    float freq_scale, const float* factors, RopeStyle style) = 0;
  virtual void silu_mul(float* gate, const float* up, std::int64_t n) = 0;                   // gate = silu(gate) * up
  virtual void add(float* x, const float* y, std::int64_t n) = 0;                            // x += y (residual)
  virtual void add_bias(float* y, const float* bias, std::int64_t n, std::int64_t d) = 0;    // y[t] += bias, rows of d
  virtual void scale_columns(float* y, const float* s, std::int64_t n, std::int64_t d) = 0;  // y[t, c] *= s[c], rows of d
  // Stores token t's K and V rows ([n, row] f32) as f16 (round to nearest even) at slot slots[t] of
  // one layer's caches ([num_slots, row] f16 bits, slot = block * block_size + offset).
  virtual void kv_write(std::uint16_t* k_cache, std::uint16_t* v_cache, const float* k, const float* v, const std::int32_t* slots,
                        std::int64_t n, std::int64_t row) = 0;
  virtual void attention(const AttentionArgs& a) = 0;
  // s [n, ld]: row i becomes the softmax of its columns 0..i, columns past i become 0 (a causal block's
  // attention weights, for the quantizers' f32 self-attention without a cache).
  virtual void causal_softmax(float* s, std::int64_t n, std::int64_t ld) = 0;
  virtual void linear(const float* x, std::int64_t n, const DeviceLinear& w, float* y) = 0;
  // Several linears of one input (q/k/v, gate/up) in one call: ys[i] = x · ws[i]ᵀ, each equal to linear().
  // (Pointer + count, not std::span: nvcc compiles this header as C++17.)
  virtual void linear_multi(const float* x, std::int64_t n, const DeviceLinear* const* ws, float* const* ys, int count) {
    for (int i = 0; i < count; ++i) linear(x, n, *ws[i], ys[i]);
  }
  // Quantization (GPTQ, AWQ's search, the sensitivity check, diagnose); f32 row-major unless a name says f64.
  // C[m, n] = alpha * op(A) * op(B) + beta * C, op(X) = Xᵀ when trans_x: cblas_sgemm's contract (f32, no TF32).
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                    std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) = 0;
  // GPTQ's Hessian as AutoGPTQ's running mean over x [n, d]: h = h * t/(t+n) + 2/(t+n) * xᵀx with t =
  // tokens_before; h [d, d] f64, kept symmetric (xᵀx itself in f32, a rank-n syrk update).
  virtual void hessian_update(double* h, const float* x, std::int64_t n, std::int64_t d, std::int64_t tokens_before) = 0;
  // u [n, n] f32 = the upper Cholesky factor U of a⁻¹ (a⁻¹ = UᵀU), strict lower triangle 0, computed in
  // f64 (potrf, potri, potrf); a is overwritten. False when a is not positive definite.
  virtual bool inverse_cholesky_upper(double* a, std::int64_t n, float* u) = 0;
  virtual void gptq_block(const GptqBlockArgs& a) = 0;
  // w [rows, cols] becomes dequantize(quantize(w)) under formats/group_params.h's rule, in groups of
  // `group` columns (the last may be shorter): AWQ's search scores scales with it.
  virtual void fake_quantize(float* w, std::int64_t rows, std::int64_t cols, std::int64_t group, int bits, bool sym) = 0;
  virtual ErrorSums error_sums(const float* a, const float* b, std::int64_t n) = 0;  // waits for the result
  // AWQ's candidates scored by their weight error: d [rows, cols] = fake_quantize(clamp(w * s, ±clip_r)) / s - w,
  // s per column (col_scale) and clip_r per row (row_clip), either null for none; w has leading dimension ldw.
  virtual void quantize_delta(const float* w, std::int64_t ldw, std::int64_t rows, std::int64_t cols, const float* col_scale,
                              const float* row_clip, std::int64_t group, int bits, bool sym, float* d) = 0;
  // out[r] = sum over c of a[r, c] * b[r, c] in f64, rows of `cols` values; out is host memory (waits).
  virtual void row_dots(const float* a, const float* b, std::int64_t rows, std::int64_t cols, double* out) = 0;

  // True when the backend's memory is host memory and its linears read the stored formats in place
  // (LinearKind::host): weights are not copied, and callers may read its buffers directly.
  virtual bool host_formats() const { return false; }

 protected:
  // Inline: the CUDA plugin (libmo_cuda.so) uses it and links nothing of the core library.
  void count_alloc(std::ptrdiff_t bytes) {
    allocated_ = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(allocated_) + bytes);
    if (allocated_ > peak_) peak_ = allocated_;
  }
  std::size_t allocated_ = 0, peak_ = 0;
};

// The CPU backend runs on `pool`'s threads. make_cpu_backend reads the device layouts above (f16, GGUF
// blocks, AWQ/GPTQ packed): the reference the CUDA kernels are tested against. make_host_backend is the
// engine's own CPU path: the stored formats in place (LinearKind::host), f16 or f32 KV.
std::unique_ptr<Backend> make_cpu_backend(ThreadPool& pool);
std::unique_ptr<Backend> make_host_backend(ThreadPool& pool, ops::Batching batching);  // batching: for its linear layers
// The CUDA backend on GPU `ordinal`. Throws UsageError in a build without CUDA or when no GPU is visible.
std::unique_ptr<Backend> make_cuda_backend(int ordinal = 0);
std::unique_ptr<Backend> make_backend(Device device, ThreadPool& pool);

// Device memory that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& b, std::size_t bytes) : b_(&b), p_(bytes ? b.alloc(bytes) : nullptr), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      b_ = o.b_, p_ = o.p_, bytes_ = o.bytes_;
      o.p_ = nullptr, o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset() {
    if (p_) b_->free(p_);
    p_ = nullptr, bytes_ = 0;
  }
  template <class T = void>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  Backend* b_ = nullptr;
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// A new buffer in b's memory holding count values copied from host memory (count 0: an empty buffer).
template <class T>
DeviceBuffer to_device(Backend& b, const T* src, std::size_t count) {
  DeviceBuffer d(b, count * sizeof(T));
  if (count > 0) b.upload(d.as(), src, d.bytes());
  return d;
}
template <class T>
DeviceBuffer to_device(Backend& b, const std::vector<T>& v) {
  return to_device(b, v.data(), v.size());
}
// count values from b's memory, copied to the host.
template <class T>
std::vector<T> to_host(Backend& b, const T* src, std::size_t count) {
  std::vector<T> v(count);
  if (count > 0) b.download(v.data(), src, count * sizeof(T));
  return v;
}

}  // namespace mo::engine
