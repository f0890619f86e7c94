#pragma once
// Writes a quantized model's tensors as they are produced, one decoder layer at a time, so memory holds
// at most one shard: tensors are buffered until `max_shard_bytes`, then flushed to a shard file; at the
// end the shards get their final names (model.safetensors, or model-0000i-of-0000N.safetensors plus
// model.safetensors.index.json as Transformers writes it).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mo/io/safetensors.h"

namespace mo::quant {

class ShardWriter {
 public:
  ShardWriter(std::string dir, std::uint64_t max_shard_bytes);
  // Copies `bytes` (numel * dtype size) under `name` with `shape`.
  void add(const std::string& name, st::Dtype dtype, std::vector<std::int64_t> shape, const void* data, std::size_t nbytes);
  template <typename T>
  void add(const std::string& name, st::Dtype dtype, std::vector<std::int64_t> shape, const std::vector<T>& v) {
    add(name, dtype, std::move(shape), v.data(), v.size() * sizeof(T));
  }
  void finish();  // flushes and renames; returns the tensor data bytes written
  std::uint64_t bytes_written() const { return total_bytes_; }
  std::size_t tensors_written() const { return weight_map_.size(); }

 private:
  void flush();

  std::string dir_;
  std::uint64_t max_shard_bytes_;
  std::vector<std::vector<std::uint8_t>> buffers_;
  std::vector<st::TensorData> pending_;
  std::uint64_t pending_bytes_ = 0, total_bytes_ = 0;
  std::size_t shards_ = 0;
  std::map<std::string, std::size_t> weight_map_;  // tensor -> shard index
};

}  // namespace mo::quant
