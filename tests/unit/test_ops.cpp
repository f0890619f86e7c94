#include <gtest/gtest.h>

#include <vector>

#include "mo/core/device.h"
#include "mo/core/error.h"

namespace {

TEST(Device, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(mo::parse_device("cpu"), mo::Device::cpu);
  // auto is the GPU exactly when asking for it by name would work, else the CPU.
  bool cuda_usable = true;
  try {
    mo::parse_device("cuda");
  } catch (const mo::UsageError&) {
    cuda_usable = false;
  }
  EXPECT_EQ(mo::parse_device("auto"), cuda_usable ? mo::Device::cuda : mo::Device::cpu);
  if (!mo::cuda_built()) {
    EXPECT_EQ(mo::parse_device("auto"), mo::Device::cpu);
  }
  try {
    mo::parse_device("tpu");
    FAIL();
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu' is not one of cpu, cuda, auto"), std::string::npos);
  }
}

TEST(Device, CudaWithoutGpuSaysWhy) {
  if (mo::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  try {
    mo::parse_device("cuda");
    FAIL();
  } catch (const mo::UsageError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(msg.find("built without CUDA") != std::string::npos || msg.find("no CUDA GPU") != std::string::npos) << msg;
  }
}

}  // namespace
