// Drives the q8.h tile kernels for ops::linear and ops::linear_multi: the activations are quantized
// once per call (in parallel over tokens for big batches), then the output rows (of all matrices, for
// linear_multi) are split across the pool, each thread running the kernel on its rows with every
// token. The kernels give the same bits for a (row, token) whatever rows and tokens share the call, so
// linear_multi equals separate linear calls and a token's result does not depend on its batch.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mo/engine/ops/linear.h"
#include "mo/formats/ggml_types.h"
#include "q8.h"
#include "q8_linear.h"

namespace mo::ops {
namespace q8 {
namespace {

std::atomic<bool> g_int_dot{[] {
  const char* e = std::getenv("MO_INT_DOT");
  return e == nullptr || std::strcmp(e, "0") != 0;
}()};

// The kernel for w, or nullptr when w must take another path.
Kernel kernel_of(const engine::Matrix& w) {
  if (!g_int_dot || w.in_perm || w.rows == 0 || w.cols % kBlock != 0) return nullptr;
  if (w.type == engine::kQ4zType) return kernel(w.type, simd_level());
  const GgmlTypeInfo* info = ggml_type_info(w.type);
  if (info == nullptr || w.cols % info->block_size != 0) return nullptr;
  return kernel(w.type, simd_level());
}

// x quantized into the calling thread's reusable buffer.
const BlockQ8* quantize(const float* x, std::int64_t n, std::int64_t cols, ThreadPool& pool) {
  thread_local std::vector<BlockQ8> buf;
  const std::int64_t nb = cols / kBlock;
  if (static_cast<std::int64_t>(buf.size()) < n * nb) buf.resize(static_cast<std::size_t>(n * nb));
  BlockQ8* out = buf.data();
  if (n >= 32 && pool.size() > 1) {
    pool.parallel_for(
        0, n, [&](std::int64_t t0, std::int64_t t1, int) { quantize_rows(x + t0 * cols, t1 - t0, cols, cols, out + t0 * nb); }, 8);
  } else {
    quantize_rows(x, n, cols, cols, out);
  }
  return out;
}

// Rows per thread chunk at least enough work (~64K multiply-adds) that splitting pays for the sync.
std::int64_t grain(std::int64_t n, std::int64_t cols) {
  return std::max<std::int64_t>(16, (std::int64_t{1} << 16) / std::max<std::int64_t>(1, n * cols));
}

struct Part {
  const engine::Matrix* w;
  Kernel k;
  float* y;
  std::int64_t first;  // index of its row 0 in the union of all rows
};

void run_parts(const Part* parts, std::size_t np, const BlockQ8* xq, std::int64_t n, std::int64_t cols, std::int64_t total,
               ThreadPool& pool) {
  pool.parallel_for(
      0, total,
      [&](std::int64_t r0, std::int64_t r1, int) {
        for (std::size_t i = 0; i < np; ++i) {
          const Part& p = parts[i];
          const std::int64_t a = std::max(r0, p.first), b = std::min(r1, p.first + p.w->rows);
          if (a >= b) continue;
          const std::int64_t r = a - p.first;
          p.k(p.w->row(r), p.w->row_bytes, static_cast<int>(b - a), xq, static_cast<int>(n), cols, p.y + r, p.w->rows);
        }
      },
      grain(n, cols));
}

}  // namespace

void set_int_dot(bool on) { g_int_dot = on; }
bool int_dot() { return g_int_dot; }

bool linear_int(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool) {
  const Kernel k = kernel_of(w);
  if (k == nullptr) return false;
  if (n <= 0) return true;
  const BlockQ8* xq = quantize(x, n, w.cols, pool);
  const Part part{&w, k, y, 0};
  run_parts(&part, 1, xq, n, w.cols, w.rows, pool);
  return true;
}

}  // namespace q8

void linear_multi(const float* x, std::int64_t n, std::span<const engine::Matrix* const> ws, std::span<float* const> ys, ThreadPool& pool,
                  Batching batching) {
  std::vector<q8::Part> parts;
  std::int64_t total = 0;
  bool shared = !ws.empty() && ws.size() == ys.size();
  for (std::size_t i = 0; shared && i < ws.size(); ++i) {
    const q8::Kernel k = q8::kernel_of(*ws[i]);
    shared = k != nullptr && ws[i]->cols == ws[0]->cols;
    parts.push_back({ws[i], k, ys[i], total});
    total += ws[i]->rows;
  }
  if (!shared) {
    for (std::size_t i = 0; i < std::min(ws.size(), ys.size()); ++i) linear(x, n, *ws[i], ys[i], pool, batching);
    return;
  }
  if (n <= 0) return;
  const q8::BlockQ8* xq = q8::quantize(x, n, ws[0]->cols, pool);
  q8::run_parts(parts.data(), parts.size(), xq, n, ws[0]->cols, total, pool);
}

}  // namespace mo::ops
