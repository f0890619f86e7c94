#pragma once
// Memory behind the paged KV cache (host memory, or a device backend's memory when the engine runs
// there): for each layer a K and a V array
//   k, v: [num_blocks, block_size, num_kv_heads, head_dim]  of layout.dtype (f16 as IEEE half bits, or f32)
// so slot s (= block * block_size + offset, from KvCacheManager) is row s of the
// [num_blocks * block_size, num_kv_heads, head_dim] view. The bookkeeping lives in kv_cache.h.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "mo/engine/backend.h"
#include "mo/engine/kv_layout.h"

namespace mo::engine {

class KvStorage {
 public:
  // Zeroed memory for num_blocks blocks of `layout`. Throws UsageError for a bad layout and mo::Error
  // naming the bytes when the memory cannot be had.
  KvStorage(const KvLayout& layout, int num_blocks);
  // The same arrays in `device`'s memory (nullptr = host memory); a device cache holds f16 only.
  // k_block/v_block then return device pointers for the backend's kernels; write/read/copy_block work
  // through the backend (slowly: the engine's forward writes K/V with the backend's kv_write op).
  KvStorage(const KvLayout& layout, int num_blocks, Backend* device);

  // Stores token t's K and V at slots[t], converting to layout.dtype (f16 rounds to nearest even).
  // k, v: [slots.size(), num_kv_heads, head_dim] f32
  void write(int layer, std::span<const int> slots, const float* k, const float* v);
  // The inverse, widening f16 to f32. k, v: [slots.size(), num_kv_heads, head_dim] f32, written.
  void read(int layer, std::span<const int> slots, float* k, float* v) const;
  // Copy-on-write: block dst becomes a copy of block src in every layer, K and V.
  void copy_block(int src, int dst);

  // One block of a layer: [block_size, num_kv_heads, head_dim]. T is std::uint16_t (f16 bits) or float and
  // must match layout.dtype (else mo::Error). Blocks of a layer are contiguous, so k_block(layer, 0) is
  // the whole [num_blocks, block_size, num_kv_heads, head_dim] array that a paged-attention kernel indexes.
  template <typename T>
  const T* k_block(int layer, int block) const;
  template <typename T>
  const T* v_block(int layer, int block) const;

  const KvLayout& layout() const { return layout_; }
  int num_blocks() const { return num_blocks_; }
  int num_slots() const { return num_blocks_ * layout_.block_size; }
  std::size_t bytes() const { return bytes_; }
  Backend* device() const { return device_; }  // nullptr for host memory

 private:
  // Byte offset of (layer, K or V, block) in data_; the layout is [layer][K, V][block][slot][head][dim].
  std::size_t offset(int layer, int kv, int block) const;
  template <typename T>
  const T* block_ptr(int layer, int kv, int block, const char* op) const;
  void check_layer(int layer, const char* op) const;
  void check_slot(int slot, const char* op) const;

  KvLayout layout_;
  int num_blocks_;
  std::size_t bytes_;
  std::size_t row_elems_;  // num_kv_heads * head_dim: one token of one layer's K (or V)
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, FreeDeleter> data_;  // calloc'd: the OS hands out zero pages lazily
  Backend* device_ = nullptr;
  DeviceBuffer device_data_;
  std::byte* base_ = nullptr;  // data_ or device_data_
};

extern template const float* KvStorage::k_block<float>(int, int) const;
extern template const std::uint16_t* KvStorage::k_block<std::uint16_t>(int, int) const;
extern template const float* KvStorage::v_block<float>(int, int) const;
extern template const std::uint16_t* KvStorage::v_block<std::uint16_t>(int, int) const;

}  // namespace mo::engine
