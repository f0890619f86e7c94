// The row-wise GEMV kernels for q8_0 weights (linear_rowwise.cuh), for 1..8 tokens.
#include "linear_rowwise.cuh"

namespace mo::engine::cuda_dev::lin {

void rowwise_q8_0(const Args& a, const float* x, int n, float* y) { rowwise_detail::launch<rowwise_detail::Q8_0>(a, a.row_bytes, x, n, y); }

}  // namespace mo::engine::cuda_dev::lin
