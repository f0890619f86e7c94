#pragma once
// Reading the files a user names (configs, datasets, task files, templates): never blocking on a FIFO,
// never reading a device or a directory, never more than a stated size.
#include <cstdint>
#include <string>

namespace mo {

inline constexpr std::uint64_t kMiB = 1ull << 20;

// The whole of `path` when it is a regular file of at most `max_bytes`. Throws UsageError naming `what`
// ("config file"), the path and what was expected: not found, not a regular file (a directory, a FIFO, a
// device), larger than max_bytes, or unreadable.
std::string read_regular_file(const std::string& path, const std::string& what, std::uint64_t max_bytes);

// Opens `path` for reading without blocking (O_NONBLOCK, so a FIFO cannot hang the process) and returns the
// descriptor when it is a regular file; throws UsageError as above otherwise.
int open_regular_file(const std::string& path, const std::string& what);

}  // namespace mo
