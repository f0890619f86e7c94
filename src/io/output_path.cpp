#include "mo/io/output_path.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/signals.h"
#include "mo/io/gguf.h"
#include "mo/io/output_file.h"

namespace mo::io {
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

// On SIGINT/SIGTERM the temporaries are removed, then the process ends of the signal. The action runs
// on the signal module's watcher thread, so it may allocate and lock.
void install_stop_handler() {
  static const auto* on_stop = new signals::OnStopSignal([](int sig) {  // for the life of the process
    {
      std::lock_guard<std::mutex> lock(g_temps_mu);
      std::error_code ec;
      // Again when a worker still writing created a file in between.
      for (int attempt = 0; attempt < 3; ++attempt)
        for (const auto& t : g_temps) fs::remove_all(t, ec);
    }
    signals::die_of(sig);
  });
  (void)on_stop;
}

void track_temp(const std::string& path, bool add) {
  if (add) install_stop_handler();
  std::lock_guard<std::mutex> lock(g_temps_mu);
  if (add)
    g_temps.push_back(path);
  else
    std::erase(g_temps, path);
}

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::string marker_text(long pid, const std::string& token) {
  return fmt::format("model-optimizer temporary output\npid {}\ntoken {}\n", pid, token);
}

// The pid a temporary directory's marker names, when the marker is there and well formed.
std::optional<long> marker_pid(const fs::path& dir) {
  std::error_code ec;
  const fs::path m = dir / kTempMarker;
  if (!fs::is_regular_file(fs::symlink_status(m, ec)) || fs::file_size(m, ec) > 256) return std::nullopt;
  std::ifstream in(m);
  std::string head, pid_key, token_key, token;
  long pid = 0;
  if (!std::getline(in, head) || head != "model-optimizer temporary output") return std::nullopt;
  if (!(in >> pid_key >> pid >> token_key >> token) || pid_key != "pid" || token_key != "token" || token.size() != 16 ||
      token.find_first_not_of("0123456789abcdef") != std::string::npos)
    return std::nullopt;
  return pid;
}

bool process_gone(long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

int remove_stale_temps(const std::string& final_path, const std::string& keep) {
  const fs::path f(final_path);
  const fs::path dir = f.parent_path().empty() ? fs::path(".") : f.parent_path();
  const std::string prefix = f.filename().string() + ".tmp-";
  std::error_code ec;
  const fs::path kept = keep.empty() ? fs::path() : fs::weakly_canonical(keep, ec);
  int removed = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!fs::is_directory(fs::symlink_status(e.path(), ec))) continue;  // ours are real directories
    const auto owner = marker_pid(e.path());
    if (!owner || *owner != std::stol(pid) || !process_gone(*owner)) continue;
    if (!kept.empty() && within(kept, fs::weakly_canonical(e.path(), ec))) continue;  // never the input model
    fs::remove_all(e.path(), ec);
    removed += !ec;
  }
  return removed;
}

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
  if (!force)
    throw UsageError(
        fmt::format("{}: '{}' already exists; choose a new path (or --force to replace an earlier model-optimizer output)", key, output));
  if (!is_our_output(output))
    throw UsageError(
        fmt::format("{}: '{}' exists and was not written by model-optimizer; --force only replaces our own outputs", key, output));
}

StagedOutput::StagedOutput(std::string final_path, std::string keep, bool force)
    : final_(std::move(final_path)), token_(random_token()), force_(force) {
  dir_ = final_ + ".tmp-" + std::to_string(::getpid());
  remove_stale_temps(final_, keep);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir_, ec))) {
    // Only a directory an earlier process with our pid left (its marker says so) may go.
    if (marker_pid(dir_) != std::optional<long>(::getpid()))
      throw Error(fmt::format("{}: exists and is not a model-optimizer temporary; move it away", dir_));
    fs::remove_all(dir_, ec);
  }
  track_temp(dir_, true);  // before it exists, so that a signal from here on removes it
  if (!fs::create_directory(dir_, ec) || ec) {
    track_temp(dir_, false);
    throw Error(fmt::format("{}: cannot create the temporary directory: {}", dir_, ec.message()));
  }
  std::ofstream(fs::path(dir_) / kTempMarker) << marker_text(::getpid(), token_);
  payload_ = (fs::path(dir_) / fs::path(final_).filename()).string();
}

StagedOutput::~StagedOutput() {
  track_temp(dir_, false);
  std::error_code ec;
  if (!keep_dir_) fs::remove_all(dir_, ec);  // created by this object: after commit only the marker is left
}

void StagedOutput::commit() {
  try {
    move_into_place(payload_, final_, force_, "output_path");
  } catch (const Error&) {
    // The finished output that could not go into place stays where the error says: not a temporary any more.
    std::error_code ec;
    if (fs::exists(fs::symlink_status(payload_, ec))) {
      fs::remove(fs::path(dir_) / kTempMarker, ec);
      track_temp(dir_, false);
      keep_dir_ = true;
    }
    throw;
  }
}

void StagedOutput::commit_side_file(const std::string& suffix) {
  move_into_place(payload_ + suffix, final_ + suffix, force_, "output_path");
}

}  // namespace mo::io
