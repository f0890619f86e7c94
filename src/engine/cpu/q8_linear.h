#pragma once
// ops::linear's integer-dot path (q8.h kernels) and ops::linear_multi.
#include <cstdint>

#include "mo/core/thread_pool.h"
#include "mo/engine/weights.h"

namespace mo::ops::q8 {

// y = x · Wᵀ through the integer-dot kernel when `w` has one at the current SimdLevel (and the switch
// below is on); false, touching nothing, when it has none.
bool linear_int(const float* x, std::int64_t n, const engine::Matrix& w, float* y, ThreadPool& pool);

// Off: quantized weights take the older f32 row kernels (qdot.h) instead, for benchmarks and A/B
// checks. On by default; the environment variable MO_INT_DOT=0 turns it off at start-up.
void set_int_dot(bool on);
bool int_dot();

}  // namespace mo::ops::q8
