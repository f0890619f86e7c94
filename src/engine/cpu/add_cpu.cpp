#include "mo/engine/ops/add.h"

namespace mo::ops {

void add_inplace_cpu(float* x, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace mo::ops
