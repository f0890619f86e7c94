#include "mo/quant/shard_writer.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mo/core/error.h"

namespace mo::quant {

namespace fs = std::filesystem;

namespace {
std::string temp_shard(const std::string& dir, std::size_t i) {
  return (fs::path(dir) / fmt::format("shard-{:05}.tmp.safetensors", i)).string();
}
}  // namespace

ShardWriter::ShardWriter(std::string dir, std::uint64_t max_shard_bytes) : dir_(std::move(dir)), max_shard_bytes_(max_shard_bytes) {}

void ShardWriter::add(const std::string& name, st::Dtype dtype, std::vector<std::int64_t> shape, const void* data, std::size_t nbytes) {
  if (weight_map_.count(name)) throw Error(fmt::format("quantize: tensor {} written twice", name));
  if (pending_bytes_ > 0 && pending_bytes_ + nbytes > max_shard_bytes_) flush();
  auto& buf = buffers_.emplace_back(nbytes);
  if (nbytes) std::memcpy(buf.data(), data, nbytes);
  st::TensorData t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = buf.data();
  t.nbytes = nbytes;
  pending_.push_back(std::move(t));
  pending_bytes_ += nbytes;
  total_bytes_ += nbytes;
  weight_map_[name] = shards_;
}

void ShardWriter::flush() {
  if (pending_.empty()) return;
  st::write_file(temp_shard(dir_, shards_), pending_, {{"format", "pt"}});
  pending_.clear();
  buffers_.clear();
  pending_bytes_ = 0;
  ++shards_;
}

void ShardWriter::finish() {
  flush();
  if (shards_ == 0) throw Error("quantize: no tensors to write");
  if (shards_ == 1) {
    fs::rename(temp_shard(dir_, 0), fs::path(dir_) / st::kSingleFileName);
    return;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards_; ++i) fs::rename(temp_shard(dir_, i), fs::path(dir_) / st::shard_file_name(i, shards_));
  for (const auto& [name, shard] : weight_map_) weight_map[name] = st::shard_file_name(shard, shards_);
  const nlohmann::json index = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", weight_map}};
  std::ofstream out(fs::path(dir_) / st::kIndexFileName);
  out << index.dump(2, ' ', true) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write", (fs::path(dir_) / st::kIndexFileName).string()));
}

}  // namespace mo::quant
