// The backend op tests (tests/ops/) instantiated for the CPU backend; tests/cuda/test_ops_cuda.cpp
// instantiates the same suites for CUDA.
#include "../ops/block_op_tests.h"
#include "../ops/linear_op_tests.h"
#include "../ops/quant_op_tests.h"

INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, BlockOps, ::testing::Types<mo::test::CpuTag>);
INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, LinearOps, ::testing::Types<mo::test::CpuTag>);
INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, QuantOps, ::testing::Types<mo::test::CpuTag>);
