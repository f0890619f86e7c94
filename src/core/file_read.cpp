#include "mo/core/file_read.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mo/core/error.h"

namespace mo {

namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

int open_regular_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw UsageError(fmt::format("{} not found: {}", what, path));
    throw UsageError(fmt::format("{} cannot be read: {}: {}", what, path, std::strerror(errno)));
  }
  Fd guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(fmt::format("{} cannot be read: {}: {}", what, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw UsageError(fmt::format("{} '{}' is {}; expected a regular file", what, path, kind_of(st.st_mode)));
  // Back to blocking reads: a regular file never blocks, and some filesystems dislike O_NONBLOCK.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  guard.fd = -1;
  return fd;
}

std::string read_regular_file(const std::string& path, const std::string& what, std::uint64_t max_bytes) {
  Fd fd{open_regular_file(path, what)};
  struct stat st {};
  ::fstat(fd.fd, &st);
  const auto too_large = [&](std::uint64_t n) {
    return UsageError(fmt::format("{} '{}' is {} bytes or more; at most {} bytes are read", what, path, n, max_bytes));
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) throw too_large(static_cast<std::uint64_t>(st.st_size));
  std::string text;
  char buf[1 << 16];
  // Files in /proc report size 0, so the limit holds while reading too.
  for (;;) {
    const ssize_t n = ::read(fd.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UsageError(fmt::format("{} cannot be read: {}: {}", what, path, std::strerror(errno)));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) throw too_large(text.size() + static_cast<std::size_t>(n));
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace mo
