#include "mo/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "mo/core/error.h"

namespace mo {

namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() { ::close(fd); }
};

std::string cannot_open(const std::string& path, int err) { return path + ": cannot open: " + std::strerror(err); }

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO named like a model file must not hang the process on open().
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw UsageError(cannot_open(path, errno));
  FdGuard guard{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(cannot_open(path, errno));
  // open() succeeds on directories, FIFOs and devices; mmap would then fail confusingly or read forever.
  if (S_ISDIR(st.st_mode)) throw UsageError(cannot_open(path, EISDIR));
  if (!S_ISREG(st.st_mode)) throw UsageError(path + ": cannot open: not a regular file (a FIFO or a device)");
  if (st.st_size == 0) return;

  size_ = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    size_ = 0;
    throw Error(path + ": cannot map " + std::to_string(st.st_size) + " bytes: " + std::strerror(err));
  }
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mo
