// Which row-wise kernel a layout takes (the kernels: linear_rowwise.cuh, one file per layout).
#include "linear_rowwise.cuh"

namespace mo::engine::cuda_dev::lin {
namespace {

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace

bool rowwise_gemv_supported(const Args& a) {
  switch (a.kind) {
    case Kind::f16: return aligned(a.w, 2);
    case Kind::q8_0:
    case Kind::q6_k: return aligned(a.w, 2) && a.row_bytes % 2 == 0;
    case Kind::q4_k: return aligned(a.w, 16) && a.row_bytes % 16 == 0;
    default: return false;
  }
}

void rowwise_gemv(const Args& a, const float* x, int n, float* y) {
  switch (a.kind) {
    case Kind::f16:
      if (a.cols % 8 == 0 && aligned(a.w, 16)) return rowwise_f16_vec(a, x, n, y);
      return rowwise_f16_scalar(a, x, n, y);
    case Kind::q8_0: return rowwise_q8_0(a, x, n, y);
    case Kind::q4_k: return rowwise_q4_k(a, x, n, y);
    case Kind::q6_k: return rowwise_q6_k(a, x, n, y);
    default: throw Error("linear row-wise gemv: not a row-wise kind");
  }
}

}  // namespace mo::engine::cuda_dev::lin
