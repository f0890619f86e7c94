#pragma once
#include <stdexcept>
#include <string>

namespace mo {

// Exit codes of the binary, documented in --help and docs/cli.md.
enum ExitCode : int { kExitOk = 0, kExitRuntime = 1, kExitUsage = 2 };

// A failure that ends an operation at run time (corrupt file, CUDA error): exit code 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user's input is wrong (bad flag, bad config value, missing file): exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Throws UsageError naming `path` when it does not exist or cannot be read; `what` says what it is
// ("config file", "model").
void require_readable(const std::string& path, const std::string& what);

}  // namespace mo
