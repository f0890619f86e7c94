#include "mo/engine/kv_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "mo/core/error.h"

namespace mo::engine {

std::size_t kv_dtype_bytes(KvDtype dtype) { return dtype == KvDtype::f16 ? 2 : 4; }

const char* kv_dtype_name(KvDtype dtype) { return dtype == KvDtype::f16 ? "f16" : "f32"; }

void check_block_size(int block_size) {
  if (std::find(std::begin(kKvBlockSizes), std::end(kKvBlockSizes), block_size) == std::end(kKvBlockSizes))
    throw UsageError(fmt::format("block_size {} is not supported: use 8, 16 or 32 (tokens per KV block)", block_size));
}

void KvLayout::validate() const {
  auto positive = [](const char* name, int value) {
    if (value <= 0) throw UsageError(fmt::format("KV layout: {} must be positive, got {}", name, value));
  };
  positive("num_layers", num_layers);
  positive("num_kv_heads", num_kv_heads);
  positive("head_dim", head_dim);
  check_block_size(block_size);
  // bytes_per_block() multiplies five factors; refuse shapes whose product does not fit in size_t.
  std::size_t bytes = 2 * kv_dtype_bytes(dtype);
  for (int f : {num_layers, num_kv_heads, head_dim, block_size}) {
    if (bytes > SIZE_MAX / static_cast<std::size_t>(f))
      throw UsageError(fmt::format("KV layout: {} layers x {} KV heads x head_dim {} x block_size {} overflows the byte count", num_layers,
                                   num_kv_heads, head_dim, block_size));
    bytes *= static_cast<std::size_t>(f);
  }
}

std::size_t KvLayout::bytes_per_token() const {
  return 2 * static_cast<std::size_t>(num_layers) * static_cast<std::size_t>(num_kv_heads) * static_cast<std::size_t>(head_dim) *
         kv_dtype_bytes(dtype);
}

std::size_t KvLayout::bytes_per_block() const { return bytes_per_token() * static_cast<std::size_t>(block_size); }

int blocks_for_budget(const KvLayout& layout, std::size_t bytes) {
  layout.validate();
  const std::size_t blocks = bytes / layout.bytes_per_block();
  // Slots (block * block_size + offset) are ints; a larger budget is capped rather than wrapped.
  return static_cast<int>(std::min<std::size_t>(blocks, INT_MAX / layout.block_size));
}

}  // namespace mo::engine
