#pragma once
// Shape of the paged KV cache: how many bytes one block takes, and how many blocks a byte budget holds.
// Pure arithmetic on the model's hyperparameters; shared by the block bookkeeping and the storage.
#include <cstddef>

namespace mo::engine {

enum class KvDtype { f16, f32 };

// Bytes of one K or V element: 2 for f16, 4 for f32.
std::size_t kv_dtype_bytes(KvDtype dtype);
const char* kv_dtype_name(KvDtype dtype);

// Block sizes the cache supports (tokens per block). Anything else is a UsageError naming block_size.
inline constexpr int kKvBlockSizes[] = {8, 16, 32};
void check_block_size(int block_size);

struct KvLayout {
  int num_layers = 0;            // transformer layers, each with its own K and V cache
  int num_kv_heads = 0;          // KV heads (fewer than query heads under GQA)
  int head_dim = 0;              // elements per head
  int block_size = 16;           // tokens per block: 8, 16 or 32
  KvDtype dtype = KvDtype::f16;  // element type of the stored K and V

  // Throws UsageError naming the first field that is out of range.
  void validate() const;
  // bytes of K and V for one token, all layers: 2 * num_layers * num_kv_heads * head_dim * dtype bytes
  std::size_t bytes_per_token() const;
  // bytes of K and V for one block, all layers: bytes_per_token() * block_size
  std::size_t bytes_per_block() const;
};

// Whole blocks that fit in `bytes` (rounded down; 0 when not even one fits), capped so every slot
// (block * block_size + offset) fits in an int. Validates the layout.
int blocks_for_budget(const KvLayout& layout, std::size_t bytes);

}  // namespace mo::engine
