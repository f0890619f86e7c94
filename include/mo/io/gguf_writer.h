#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mo/io/gguf.h"

namespace mo::gguf {

// Writes a GGUF v2 or v3 file laid out as llama.cpp's gguf_write_to_file does: header, metadata in
// insertion order, tensor infos, zero padding to general.alignment (default 32 bytes), then each
// tensor's bytes in insertion order, each followed by zero padding to the alignment. Reading a
// llama.cpp-written file and adding its metadata and tensors in file order writes it back byte for byte.
//
//   Writer w(out_path);
//   w.set("general.architecture", Value::str("llama"));
//   w.add_tensor("output_norm.weight", {576}, 0 /* F32 */, bytes);
//   w.write();
class Writer {
 public:
  explicit Writer(std::string path, std::uint32_t version = 3);

  // Adds `key` at the end, or replaces its value in place when it is already set. Throws Error for
  // an empty key, and for general.alignment unless it is a u32 power of two.
  void set(std::string key, Value value);
  // Removes `key`; returns false when it was not set.
  bool remove(std::string_view key);
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }

  // Adds a tensor of ggml type `type` and shape `ne` (ne[0] = row length, 1 to 4 dimensions).
  // `data` is referenced, not copied: it must stay valid and unchanged until write() returns
  // (a span of a mapped gguf::File's tensor_bytes() qualifies). Throws Error naming the tensor for a
  // duplicate or empty name, an unknown type, a row length that is not a multiple of the type's
  // block size, or a data size other than the tensor's byte count.
  void add_tensor(std::string name, std::vector<std::uint64_t> ne, std::uint32_t type, std::span<const std::uint8_t> data);
  // The same, but the writer takes ownership of the bytes (for freshly quantized buffers).
  void add_tensor(std::string name, std::vector<std::uint64_t> ne, std::uint32_t type, std::vector<std::uint8_t>&& data);
  std::size_t tensor_count() const { return tensors_.size(); }

  // Writes the file to "<path>.tmp-<pid>" and renames it to <path>, so a reader never sees a partial
  // file. Throws Error naming the path on any I/O failure (the temporary file is removed) and when a
  // metadata value does not match its declared type (e.g. a u8 holding 300). May be called again.
  void write() const;

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    std::span<const std::uint8_t> referenced;
    std::vector<std::uint8_t> owned;
    bool is_owned;
    std::span<const std::uint8_t> bytes() const { return is_owned ? std::span<const std::uint8_t>(owned) : referenced; }
  };

  std::uint64_t alignment() const;
  void check_tensor(const std::string& name, const std::vector<std::uint64_t>& ne, std::uint32_t type, std::size_t n_bytes) const;
  // Header, metadata, tensor infos and the padding after them: everything before the tensor data.
  std::vector<std::uint8_t> header_bytes() const;

  std::string path_;
  std::uint32_t version_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace mo::gguf
