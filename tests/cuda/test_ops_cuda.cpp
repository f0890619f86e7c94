// The backend op tests (tests/ops/) instantiated for the CUDA backend (ctest -L cuda). Without a GPU
// every test is skipped with the reason.
#include "../ops/block_op_tests.h"
#include "../ops/linear_op_tests.h"
#include "../ops/quant_op_tests.h"

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, BlockOps, ::testing::Types<mo::test::CudaTag>);
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, LinearOps, ::testing::Types<mo::test::CudaTag>);
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, QuantOps, ::testing::Types<mo::test::CudaTag>);
