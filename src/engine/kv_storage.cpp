#include "mo/engine/kv_storage.h"

#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/half.h"

namespace mo::engine {

KvStorage::KvStorage(const KvLayout& layout, int num_blocks) : KvStorage(layout, num_blocks, nullptr) {}

KvStorage::KvStorage(const KvLayout& layout, int num_blocks, Backend* device) : layout_(layout), num_blocks_(num_blocks), device_(device) {
  layout_.validate();
  if (num_blocks < 0 || num_blocks > INT_MAX / layout_.block_size)
    throw Error(fmt::format("KV storage: num_blocks {} is out of range [0, {}]", num_blocks, INT_MAX / layout_.block_size));
  row_elems_ = static_cast<std::size_t>(layout_.num_kv_heads) * static_cast<std::size_t>(layout_.head_dim);
  const std::size_t per_block = layout_.bytes_per_block();
  if (num_blocks != 0 && per_block > SIZE_MAX / static_cast<std::size_t>(num_blocks))
    throw Error(fmt::format("KV storage: {} blocks of {} bytes overflow the address space", num_blocks, per_block));
  bytes_ = per_block * static_cast<std::size_t>(num_blocks);
  if (device_ && layout_.dtype != KvDtype::f16)
    throw UsageError(fmt::format("kv_cache_dtype: {} keeps the KV cache in f16 only, {} was asked for", device_->describe(),
                                 kv_dtype_name(layout_.dtype)));
  if (bytes_ == 0) return;
  if (device_) {
    device_data_ = DeviceBuffer(*device_, bytes_);
    base_ = device_data_.as<std::byte>();
    return;
  }
  data_.reset(static_cast<std::byte*>(std::calloc(bytes_, 1)));
  if (!data_)
    throw Error(fmt::format("KV storage: cannot allocate {} bytes ({:.2f} GiB) for {} blocks of {} bytes; lower the KV budget", bytes_,
                            static_cast<double>(bytes_) / (1ull << 30), num_blocks, per_block));
  base_ = data_.get();
}

std::size_t KvStorage::offset(int layer, int kv, int block) const {
  const std::size_t block_bytes = static_cast<std::size_t>(layout_.block_size) * row_elems_ * kv_dtype_bytes(layout_.dtype);
  const std::size_t array_bytes = block_bytes * static_cast<std::size_t>(num_blocks_);
  return (static_cast<std::size_t>(layer) * 2 + static_cast<std::size_t>(kv)) * array_bytes + static_cast<std::size_t>(block) * block_bytes;
}

void KvStorage::check_layer(int layer, const char* op) const {
  if (layer < 0 || layer >= layout_.num_layers)
    throw Error(fmt::format("KvStorage::{}: layer {} is out of range [0, {})", op, layer, layout_.num_layers));
}

void KvStorage::check_slot(int slot, const char* op) const {
  if (slot < 0 || slot >= num_slots()) throw Error(fmt::format("KvStorage::{}: slot {} is out of range [0, {})", op, slot, num_slots()));
}

void KvStorage::write(int layer, std::span<const int> slots, const float* k, const float* v) {
  check_layer(layer, "write");
  for (int s : slots) check_slot(s, "write");  // before any store, so a bad slot writes nothing
  const float* src[2] = {k, v};
  if (device_) {  // rows converted here, then copied one slot at a time
    std::vector<std::uint16_t> row(row_elems_);
    for (int kv = 0; kv < 2; ++kv)
      for (std::size_t t = 0; t < slots.size(); ++t) {
        for (std::size_t i = 0; i < row_elems_; ++i) row[i] = f32_to_f16(src[kv][t * row_elems_ + i]);
        device_->upload(base_ + offset(layer, kv, 0) + static_cast<std::size_t>(slots[t]) * row_elems_ * 2, row.data(), row_elems_ * 2);
      }
    return;
  }
  for (int kv = 0; kv < 2; ++kv) {
    std::byte* base = base_ + offset(layer, kv, 0);
    for (std::size_t t = 0; t < slots.size(); ++t) {
      const float* row = src[kv] + t * row_elems_;
      const std::size_t first = static_cast<std::size_t>(slots[t]) * row_elems_;
      if (layout_.dtype == KvDtype::f32) {
        std::memcpy(reinterpret_cast<float*>(base) + first, row, row_elems_ * sizeof(float));
      } else {
        std::uint16_t* dst = reinterpret_cast<std::uint16_t*>(base) + first;
        for (std::size_t i = 0; i < row_elems_; ++i) dst[i] = f32_to_f16(row[i]);
      }
    }
  }
}

void KvStorage::read(int layer, std::span<const int> slots, float* k, float* v) const {
  check_layer(layer, "read");
  for (int s : slots) check_slot(s, "read");
  float* dst[2] = {k, v};
  if (device_) {
    std::vector<std::uint16_t> row(row_elems_);
    for (int kv = 0; kv < 2; ++kv)
      for (std::size_t t = 0; t < slots.size(); ++t) {
        device_->download(row.data(), base_ + offset(layer, kv, 0) + static_cast<std::size_t>(slots[t]) * row_elems_ * 2, row_elems_ * 2);
        for (std::size_t i = 0; i < row_elems_; ++i) dst[kv][t * row_elems_ + i] = f16_to_f32(row[i]);
      }
    return;
  }
  for (int kv = 0; kv < 2; ++kv) {
    const std::byte* base = base_ + offset(layer, kv, 0);
    for (std::size_t t = 0; t < slots.size(); ++t) {
      float* row = dst[kv] + t * row_elems_;
      const std::size_t first = static_cast<std::size_t>(slots[t]) * row_elems_;
      if (layout_.dtype == KvDtype::f32) {
        std::memcpy(row, reinterpret_cast<const float*>(base) + first, row_elems_ * sizeof(float));
      } else {
        const std::uint16_t* src = reinterpret_cast<const std::uint16_t*>(base) + first;
        for (std::size_t i = 0; i < row_elems_; ++i) row[i] = f16_to_f32(src[i]);
      }
    }
  }
}

void KvStorage::copy_block(int src, int dst) {
  for (int b : {src, dst})
    if (b < 0 || b >= num_blocks_) throw Error(fmt::format("KvStorage::copy_block: block {} is out of range [0, {})", b, num_blocks_));
  if (src == dst) return;
  const std::size_t block_bytes = layout_.bytes_per_block() / (2 * static_cast<std::size_t>(layout_.num_layers));
  for (int layer = 0; layer < layout_.num_layers; ++layer)
    for (int kv = 0; kv < 2; ++kv)
      if (device_)
        device_->copy(base_ + offset(layer, kv, dst), base_ + offset(layer, kv, src), block_bytes);
      else
        std::memcpy(base_ + offset(layer, kv, dst), base_ + offset(layer, kv, src), block_bytes);
}

template <typename T>
const T* KvStorage::block_ptr(int layer, int kv, int block, const char* op) const {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::uint16_t>);
  const KvDtype want = std::is_same_v<T, float> ? KvDtype::f32 : KvDtype::f16;
  if (want != layout_.dtype)
    throw Error(fmt::format("KvStorage::{}: the cache holds {}, asked for {}", op, kv_dtype_name(layout_.dtype), kv_dtype_name(want)));
  check_layer(layer, op);
  if (block < 0 || block >= num_blocks_)
    throw Error(fmt::format("KvStorage::{}: block {} is out of range [0, {})", op, block, num_blocks_));
  return reinterpret_cast<const T*>(base_ + offset(layer, kv, block));
}

template <typename T>
const T* KvStorage::k_block(int layer, int block) const {
  return block_ptr<T>(layer, 0, block, "k_block");
}

template <typename T>
const T* KvStorage::v_block(int layer, int block) const {
  return block_ptr<T>(layer, 1, block, "v_block");
}

template const float* KvStorage::k_block<float>(int, int) const;
template const std::uint16_t* KvStorage::k_block<std::uint16_t>(int, int) const;
template const float* KvStorage::v_block<float>(int, int) const;
template const std::uint16_t* KvStorage::v_block<std::uint16_t>(int, int) const;

}  // namespace mo::engine
