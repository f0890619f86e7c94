#include "mo/core/error.h"

#include <filesystem>
#include <fstream>

namespace mo {

void require_readable(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(what + " not found: " + path);
  if (fs::is_directory(path, ec)) return;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(what + " cannot be read: " + path);
}

}  // namespace mo
