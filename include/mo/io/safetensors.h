#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mo/core/mapped_file.h"

// safetensors (Hugging Face's tensor file): an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// data section, with offsets relative to its start. Reading maps the file and hands out zero-copy
// views; writing goes to a temp file that is renamed when complete.
namespace mo::st {

// Element types. The names are the on-disk spellings; the reference also has F4, F6_*, F8_E8M0,
// F8_*FNUZ and C64, which we reject as unsupported.
enum class Dtype { F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL, U64, U32, U16 };

const char* dtype_name(Dtype dtype);                          // "F32", "BF16", "F8_E4M3", ...
std::optional<Dtype> dtype_from_name(std::string_view name);  // exact, case-sensitive spelling
std::size_t dtype_size(Dtype dtype);                          // bytes per element

// One tensor of a mapped file; `data` points into the mapping and stays valid while the File lives.
struct TensorView {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;  // row-major, outermost first; [] is a scalar
  const std::uint8_t* data = nullptr;
  std::size_t nbytes = 0;  // numel() * dtype_size(dtype)

  std::int64_t numel() const;
};

class File {
 public:
  // Maps `path` and validates the whole header the way the reference (the Rust `safetensors`
  // crate) does: header length at most 100,000,000 bytes and inside the file, UTF-8 JSON object,
  // every entry with a known dtype, a shape of non-negative integers and two data_offsets whose
  // difference is numel * dtype size, and the tensors tiling the data section exactly (sorted by
  // offset, each starts where the previous ends, the last ends at the end of the file). Unlike the
  // reference, a duplicated key is an error rather than "last one wins", and a dimension above
  // INT64_MAX is an error even when another dimension is 0. Throws UsageError when the file cannot be
  // opened and one Error otherwise, naming the file, the tensor or key and the offset.
  static File open(const std::string& path);

  const std::vector<TensorView>& tensors() const { return tensors_; }  // in data offset order
  const TensorView* find(std::string_view name) const;                 // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return mapped_.path(); }
  std::size_t data_offset() const { return data_offset_; }                                  // bytes: 8 + header length
  std::span<const std::uint8_t> bytes() const { return {mapped_.data(), mapped_.size()}; }  // the whole file

 private:
  explicit File(MappedFile mapped) : mapped_(std::move(mapped)) {}

  MappedFile mapped_;
  std::size_t data_offset_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// A model's weights: one file, or shards listed by a Transformers index.
class Model {
 public:
  // `path` is a .safetensors file, a model.safetensors.index.json, or a directory holding
  // model.safetensors (preferred, as Transformers does) or model.safetensors.index.json. Every shard
  // of an index must exist and hold each tensor the index maps to it; errors name the index file and
  // the tensor. Only the tensors of the weight_map are visible. Views stay valid while the Model
  // lives, moves included.
  static Model open(const std::string& path);

  const TensorView* find(std::string_view name) const;  // nullptr when absent
  std::vector<std::string> names() const;               // sorted
  std::size_t total_bytes() const;                      // tensor data of all names(), in bytes
  const std::vector<File>& files() const { return files_; }

 private:
  std::vector<File> files_;
  std::map<std::string, const TensorView*, std::less<>> tensors_;
};

struct TensorData {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;  // must be numel * dtype_size(dtype)
};

// Writes one file byte-identical to what the Python `safetensors` package writes for the same
// tensors and metadata: header keys "__metadata__" (only when non-empty) then the tensors in layout
// order, which is by dtype alignment (largest first) and then by name; header padded with spaces
// to a multiple of 8 bytes. (The reference writes metadata keys in hash order; we sort them.) The
// bytes go to `<path>.tmp-<pid>`, renamed to `path` when complete. Throws Error naming the tensor
// for inconsistent input and UsageError when the file cannot be created.
void write_file(const std::string& path, const std::vector<TensorData>& tensors, const std::map<std::string, std::string>& metadata = {});

// Writes `tensors` into the existing directory `dir`: `model.safetensors` when they fit in one
// shard of at most `max_shard_bytes` (bytes of tensor data), else `model-00001-of-0000N.safetensors`
// ... plus `model.safetensors.index.json`, split the way huggingface_hub does it (in input order; a
// tensor that would overflow the current shard starts a new one; a tensor larger than the limit
// gets a shard of its own at once, numbered ahead of the shard still being filled). `metadata` goes into every shard. The other layout's
// entry file (a stale index, or a stale model.safetensors that Model::open would prefer) is removed.
void write_sharded(const std::string& dir, const std::vector<TensorData>& tensors, std::size_t max_shard_bytes,
                   const std::map<std::string, std::string>& metadata = {});

// Names used by write_sharded and Model::open.
inline constexpr const char* kSingleFileName = "model.safetensors";
inline constexpr const char* kIndexFileName = "model.safetensors.index.json";
std::string shard_file_name(std::size_t index, std::size_t count);  // index from 0: "model-00001-of-00003.safetensors"

}  // namespace mo::st
