#pragma once
// The op tests are written once (tests/ops/*_op_tests.h, typed test suites over a device tag) and
// instantiated for the CPU backend (tests/unit/test_ops_backend_cpu.cpp) and for CUDA
// (tests/cuda/test_ops_cuda.cpp, label "cuda"). Each test computes its expected values with plain
// host math that does not share code with the backend under test, on random inputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mo/core/device.h"
#include "mo/core/half.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"

namespace mo::test {

struct CpuTag {
  static constexpr const char* name = "cpu";
  static std::string skip_reason() { return {}; }
  static std::unique_ptr<engine::Backend> make(ThreadPool& pool) { return engine::make_cpu_backend(pool); }
};

struct CudaTag {
  static constexpr const char* name = "cuda";
  static std::string skip_reason() {
    if (!cuda_built()) return "built without CUDA";
    if (cuda_device_count() == 0) return "no CUDA GPU visible";
    return {};
  }
  static std::unique_ptr<engine::Backend> make(ThreadPool&) { return engine::make_cuda_backend(0); }
};

// Fixture base: a backend of the tag's device (the test is skipped with the reason when there is none)
// and helpers to move typed vectors to and from its memory.
template <class Tag>
class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = Tag::skip_reason(); !why.empty()) GTEST_SKIP() << Tag::name << ": " << why;
    backend_ = Tag::make(pool_);
  }
  engine::Backend& backend() { return *backend_; }

  template <class T>
  engine::DeviceBuffer to_device(const std::vector<T>& v) {
    engine::DeviceBuffer b(*backend_, v.size() * sizeof(T));
    if (!v.empty()) backend_->upload(b.as(), v.data(), v.size() * sizeof(T));
    return b;
  }
  template <class T>
  std::vector<T> to_host(const engine::DeviceBuffer& b, std::size_t n) {
    std::vector<T> v(n);
    if (n) backend_->download(v.data(), b.as(), n * sizeof(T));
    return v;
  }
  engine::DeviceBuffer zeros(std::size_t bytes) { return engine::DeviceBuffer(*backend_, bytes); }

  std::mt19937_64 rng_{12345};
  std::vector<float> random_floats(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }

 private:
  ThreadPool pool_{2};
  std::unique_ptr<engine::Backend> backend_;
};

using DeviceTags = ::testing::Types<CpuTag, CudaTag>;

}  // namespace mo::test
