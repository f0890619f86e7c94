#pragma once
// Helpers shared by the fuzz targets. Each target defines LLVMFuzzerTestOneInput; built with clang's
// -fsanitize=fuzzer it is a libFuzzer binary, else fuzz_main.cpp replays files (the seed corpora in ctest).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "mo/core/error.h"

namespace mo::fuzz {

// A file of this process holding the input, for parsers that read paths (the same name each run).
inline std::string write_input(const std::uint8_t* data, std::size_t size, const std::string& name) {
  static std::filesystem::path dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("mo-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
  }
  const std::string path = (dir / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// MO_FUZZ_VERBOSE set: targets print what each input ended in (to see how far the seeds reach).
inline bool verbose() {
  static const bool on = std::getenv("MO_FUZZ_VERBOSE") != nullptr;
  return on;
}

// The shared data folder (MO_SHARED_DATA), for targets that need a real tokenizer. Without it the target
// cannot run: exit 77, which ctest reports as Skipped.
inline std::string shared_model(const char* name) {
  const char* d = std::getenv("MO_SHARED_DATA");
  const std::string path = d && *d ? std::string(d) + "/models/" + name : std::string();
  if (path.empty() || !std::filesystem::exists(path)) {
    std::fprintf(stderr, "fuzz: skipped: %s not found (set MO_SHARED_DATA to the shared data folder)\n",
                 path.empty() ? name : path.c_str());
    std::exit(77);
  }
  return path;
}

// mo::Error is the clean, named refusal a user sees; any other exception escaping is a finding.
template <class F>
void refusals_are_errors(F&& fn) {
  try {
    fn();
  } catch (const mo::Error& e) {
    if (verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
}

}  // namespace mo::fuzz
