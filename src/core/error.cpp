#include "mo/core/error.h"

#include <unistd.h>

#include <filesystem>

#include "mo/core/file_read.h"

namespace mo {

void require_readable(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(what + " not found: " + path);
  if (fs::is_directory(path, ec)) return;
  ::close(open_regular_file(path, what));  // never blocks on a FIFO; refuses devices
}

}  // namespace mo
