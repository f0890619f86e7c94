#include "mo/core/error.h"
#include "mo/engine/ops/add.h"

namespace mo::ops {

void add_inplace(Device device, float* x, const float* y, std::size_t n) {
  if (device == Device::cpu) return add_inplace_cpu(x, y, n);
#if MO_WITH_CUDA
  return add_inplace_cuda(x, y, n);
#else
  throw Error("add_inplace: this binary was built without CUDA");
#endif
}

}  // namespace mo::ops
