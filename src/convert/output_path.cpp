#include "output_path.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "mo/core/error.h"
#include "mo/io/gguf.h"

namespace mo::convert {
namespace fs = std::filesystem;

namespace {

// True when `inner` is `outer` or lies below it (both resolved).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin(), o = outer.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

bool is_our_output(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(fs::path(path) / kMarkerFile, ec);
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    return gguf::read_metadata(path).find(kMarkerKey) != nullptr;
  } catch (const Error&) {
    return false;
  }
}

void check_output_path(const std::string& input, const std::string& output, bool force, const std::string& key) {
  if (output.empty()) throw UsageError(fmt::format("{}: no output path given", key));
  const fs::path in = fs::weakly_canonical(input), out = fs::weakly_canonical(output);
  if (!input.empty() && (within(out, in) || within(in, out))) {
    throw UsageError(fmt::format("{}: '{}' is the input or overlaps it ('{}'); choose a new path", key, output, input));
  }
  std::error_code ec;
  if (!fs::exists(out, ec)) {
    if (!out.parent_path().empty() && !fs::is_directory(out.parent_path(), ec))
      throw UsageError(fmt::format("{}: the parent directory of '{}' does not exist", key, output));
    return;
  }
  if (!force) throw UsageError(fmt::format("{}: '{}' already exists; choose a new path (or --force to replace an earlier model-optimizer output)", key, output));
  if (!is_our_output(output))
    throw UsageError(fmt::format("{}: '{}' exists and was not written by model-optimizer; --force only replaces our own outputs", key, output));
}

StagedOutput::StagedOutput(std::string final_path) : final_(std::move(final_path)) {
  temp_ = final_ + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

StagedOutput::~StagedOutput() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

void StagedOutput::commit() {
  std::error_code ec;
  const std::string old = final_ + ".old-" + std::to_string(::getpid());
  bool replaced = false;
  if (fs::exists(final_, ec)) {
    fs::rename(final_, old, ec);
    if (ec) throw Error(fmt::format("{}: cannot move the earlier output aside: {}", final_, ec.message()));
    replaced = true;
  }
  fs::rename(temp_, final_, ec);
  if (ec) {
    if (replaced) fs::rename(old, final_, ec);
    throw Error(fmt::format("{}: cannot move the finished output into place: {}", final_, ec.message()));
  }
  committed_ = true;
  if (replaced) fs::remove_all(old, ec);
}

}  // namespace mo::convert
