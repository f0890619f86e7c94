#pragma once
// Device discovery from the CUDA library (mo_cuda), for src/core/device.cpp; memory and ops go through
// the CUDA backend (mo/engine/backend.h).
#include <string>

namespace mo::cuda {

int device_count();            // 0 when the driver or a GPU is missing (never throws)
std::string device_summary();  // names and memory of the visible devices

}  // namespace mo::cuda
