#pragma once
#include <cuda_runtime.h>

#include <string>

#include "mo/core/error.h"

// Every CUDA call goes through this: a failure throws mo::Error naming the op and CUDA's message.
#define MO_CUDA_CHECK(op, expr)                                                                  \
  do {                                                                                           \
    cudaError_t mo_err_ = (expr);                                                                \
    if (mo_err_ != cudaSuccess)                                                                  \
      throw ::mo::Error(std::string(op) + ": CUDA error: " + cudaGetErrorString(mo_err_));      \
  } while (0)
