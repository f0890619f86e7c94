#pragma once
// Residual add, x += y, elementwise. The first op behind the device dispatch: one header, a CPU file
// (src/engine/cpu/add_cpu.cpp) and a CUDA file (kernels/ops/add.cu).
#include <cstddef>

#include "mo/core/device.h"

namespace mo::ops {

// x, y: [n] f32, in the memory of `device` (host memory for cpu, device memory for cuda).
void add_inplace(Device device, float* x, const float* y, std::size_t n);

void add_inplace_cpu(float* x, const float* y, std::size_t n);
void add_inplace_cuda(float* x, const float* y, std::size_t n);

}  // namespace mo::ops
