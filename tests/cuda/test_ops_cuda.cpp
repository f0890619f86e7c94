#include <gtest/gtest.h>

#include <vector>

#include "mo/core/device.h"
#include "mo/core/device_cuda.h"
#include "mo/engine/ops/add.h"

namespace {

// f32 elementwise add is exact on both devices, so the CUDA result must equal the CPU one bit for bit.
TEST(OpsCuda, AddInplaceMatchesCpu) {
  if (mo::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible";
  const std::size_t n = 100003;  // not a multiple of the block size
  std::vector<float> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = 0.001f * static_cast<float>(i) - 7.0f;
    y[i] = 3.0f - 0.0005f * static_cast<float>(i % 977);
  }
  std::vector<float> expect = x;
  mo::ops::add_inplace(mo::Device::cpu, expect.data(), y.data(), n);

  float* dx = mo::cuda::alloc_f32(n);
  float* dy = mo::cuda::alloc_f32(n);
  mo::cuda::copy_to_device(dx, x.data(), n);
  mo::cuda::copy_to_device(dy, y.data(), n);
  mo::ops::add_inplace(mo::Device::cuda, dx, dy, n);
  std::vector<float> got(n);
  mo::cuda::copy_to_host(got.data(), dx, n);
  mo::cuda::free(dx);
  mo::cuda::free(dy);
  EXPECT_EQ(got, expect);
}

}  // namespace
