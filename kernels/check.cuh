#pragma once
#include <cuda_runtime.h>

#include <string>

#include "mo/core/error.h"

// Every CUDA call goes through this: a failure throws mo::Error naming the op and CUDA's message.
#define MO_CUDA_CHECK(op, expr)                                                                                      \
  do {                                                                                                               \
    cudaError_t mo_err_ = (expr);                                                                                    \
    if (mo_err_ != cudaSuccess) throw ::mo::Error(std::string(op) + ": CUDA error: " + cudaGetErrorString(mo_err_)); \
  } while (0)

namespace mo::cuda_detail {

// An attribute (SM count, shared-memory limit) of the device this thread uses, for launch heuristics.
inline int device_attribute(cudaDeviceAttr attr, const char* op) {
  int dev = 0, value = 0;
  MO_CUDA_CHECK(op, cudaGetDevice(&dev));
  MO_CUDA_CHECK(op, cudaDeviceGetAttribute(&value, attr, dev));
  return value;
}

}  // namespace mo::cuda_detail
