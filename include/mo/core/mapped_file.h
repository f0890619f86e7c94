#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mo {

// A whole file mapped read-only into memory (POSIX mmap). Model files are large and mostly read
// sparsely (metadata, then one tensor at a time), so mapping beats reading them into a buffer.
class MappedFile {
 public:
  // Throws UsageError("<path>: cannot open: <reason>") when the file is missing, unreadable or a
  // directory, and Error when mapping fails. An empty file maps to size() == 0, data() == nullptr.
  explicit MappedFile(const std::string& path);
  ~MappedFile();

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }  // bytes
  const std::string& path() const { return path_; }

 private:
  void unmap() noexcept;

  std::string path_;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace mo
