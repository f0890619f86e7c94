#pragma once
// Scale and min of sub-block j (0..7) from the 12 packed scale bytes of a Q4_K / Q5_K block (ggml's
// get_scale_min_k4): one definition for the CPU decoders, dot kernels, quantizer and the CUDA kernels.
#include <cstdint>

#if defined(__CUDACC__)
#define MO_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MO_HOST_DEVICE inline
#endif

namespace mo::formats {

// q: the 12 bytes (a pointer or anything indexable); d, m: the 6-bit scale and min.
template <class Bytes, class Out>
MO_HOST_DEVICE void scale_min_k4(int j, const Bytes& q, Out& d, Out& m) {
  if (j < 4) {
    d = static_cast<Out>(q[j] & 63);
    m = static_cast<Out>(q[j + 4] & 63);
  } else {
    d = static_cast<Out>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<Out>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace mo::formats
