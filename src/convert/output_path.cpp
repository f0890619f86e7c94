#include "output_path.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>
#include <vector>

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

// Temporary outputs of this process, removed if it is interrupted (Ctrl-C, kill) before they are done.
std::mutex g_temps_mu;
std::vector<std::string> g_temps;

void remove_temps_and_exit(int sig) {
  // Not async-signal-safe in theory; in practice the process is about to end and the worst case is a
  // left-over directory, which the next run's stale-temp sweep removes.
  std::error_code ec;
  for (const auto& t : g_temps) fs::remove_all(t, ec);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void track_temp(const std::string& path, bool add) {
  std::lock_guard<std::mutex> lock(g_temps_mu);
  if (add) {
    g_temps.push_back(path);
    std::signal(SIGINT, remove_temps_and_exit);
    std::signal(SIGTERM, remove_temps_and_exit);
  } else {
    std::erase(g_temps, path);
  }
}

// `<final>.tmp-<pid>` left by a process that no longer runs (killed with SIGKILL, power loss).
void remove_stale_temps(const std::string& final_path) {
  const fs::path f(final_path);
  const fs::path dir = f.parent_path().empty() ? fs::path(".") : f.parent_path();
  const std::string prefix = f.filename().string() + ".tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
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
  remove_stale_temps(final_);
  std::error_code ec;
  fs::remove_all(temp_, ec);
  track_temp(temp_, true);
}

StagedOutput::~StagedOutput() {
  track_temp(temp_, false);
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
