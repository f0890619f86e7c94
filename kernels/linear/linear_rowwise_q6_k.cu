// The row-wise GEMV kernels for q6_k weights (linear_rowwise.cuh), for 1..8 tokens.
#include "linear_rowwise.cuh"

namespace mo::engine::cuda_dev::lin {

void rowwise_q6_k(const Args& a, const float* x, int n, float* y) { rowwise_detail::launch<rowwise_detail::Q6K>(a, a.row_bytes, x, n, y); }

}  // namespace mo::engine::cuda_dev::lin
