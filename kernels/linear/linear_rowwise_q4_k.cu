// The row-wise GEMV kernels for q4_k weights (linear_rowwise.cuh), for 1..8 tokens.
#include "linear_rowwise.cuh"

namespace mo::engine::cuda_dev::lin {

void rowwise_q4_k(const Args& a, const float* x, int n, float* y) { rowwise_detail::launch<rowwise_detail::Q4K>(a, a.row_bytes, x, n, y); }

}  // namespace mo::engine::cuda_dev::lin
