#pragma once
// Entry points of the CUDA library (mo_cuda); only src/core/device.cpp and op dispatchers include this.
#include <cstddef>
#include <string>

namespace mo::cuda {

int device_count();          // 0 when the driver or a GPU is missing (never throws)
std::string device_summary();  // names and memory of the visible devices

// Copies between host and device memory; every CUDA call is checked and a failure throws mo::Error
// naming the op and the CUDA message.
float* alloc_f32(std::size_t n);
void free(void* p);
void copy_to_device(float* dst, const float* src, std::size_t n);
void copy_to_host(float* dst, const float* src, std::size_t n);

}  // namespace mo::cuda
