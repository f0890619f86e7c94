#include <cuda_runtime.h>

#include <fmt/format.h>

#include "check.cuh"
#include "mo/core/device_cuda.h"

namespace mo::cuda {

int device_count() {
  int n = 0;
  // No driver or no GPU is a normal state for a CPU machine, not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string device_summary() {
  int n = device_count();
  std::string out = fmt::format("{} device{}", n, n == 1 ? "" : "s");
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    MO_CUDA_CHECK("cudaGetDeviceProperties", cudaGetDeviceProperties(&p, i));
    out += fmt::format("{} {} {:.1f} GiB sm_{}{}", i ? ";" : ":", p.name, p.totalGlobalMem / double(1ull << 30), p.major, p.minor);
  }
  return out;
}

}  // namespace mo::cuda
