// The row-wise GEMV kernels for f16 weights (linear_rowwise.cuh), for 1..8 tokens.
#include "linear_rowwise.cuh"

namespace mo::engine::cuda_dev::lin {

void rowwise_f16_vec(const Args& a, const float* x, int n, float* y) {
  rowwise_detail::launch<rowwise_detail::F16Vec>(a, a.cols * 2, x, n, y);
}
void rowwise_f16_scalar(const Args& a, const float* x, int n, float* y) {
  rowwise_detail::launch<rowwise_detail::F16Scalar>(a, a.cols * 2, x, n, y);
}

}  // namespace mo::engine::cuda_dev::lin
