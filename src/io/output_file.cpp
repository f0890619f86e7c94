#include "mo/io/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/output_path.h"

namespace mo::io {
namespace fs = std::filesystem;

namespace {

// Bytes read to recognise a file as ours; a marker is always near the start.
constexpr std::size_t kSniffBytes = 4096;
// A decisions log is small; a larger .jsonl is not one of ours.
constexpr std::uintmax_t kMaxJsonBytes = 64u << 20;

std::string head_of(const fs::path& p, std::size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

bool ours_json(const fs::path& p, bool lines) {
  std::error_code ec;
  if (fs::file_size(p, ec) > kMaxJsonBytes || ec) return false;
  std::ifstream in(p, std::ios::binary);
  if (!lines) {
    const auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() && j.contains(kWrittenByKey) && j[kWrittenByKey].is_string() &&
           j[kWrittenByKey].get<std::string>().rfind("model-optimizer", 0) == 0;
  }
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("module")) return false;
    any = true;
  }
  return any;
}

// Where a finished output goes when its own path is taken: "out-<pid>", "model-<pid>.gguf".
std::string free_name_beside(const std::string& to) {
  const fs::path p(to);
  const std::string pid = std::to_string(::getpid());
  for (int i = 0; i < 100; ++i) {
    const std::string suffix = i == 0 ? "-" + pid : fmt::format("-{}-{}", pid, i);
    const fs::path name = p.has_extension() && !fs::is_directory(p)
                              ? p.parent_path() / (p.stem().string() + suffix + p.extension().string())
                              : fs::path(to + suffix);
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(name, ec))) return name.string();
  }
  return {};
}

// renameat2(RENAME_NOREPLACE); where the filesystem has no renameat2 (EINVAL), the same guarantee by other means.
int rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(from, ec))) {
    // rename(2) onto a directory replaces only an empty one, so no data can be lost.
    if (fs::exists(fs::symlink_status(to, ec))) {
      errno = EEXIST;
      return -1;
    }
    return ::rename(from.c_str(), to.c_str());
  }
  if (::link(from.c_str(), to.c_str()) != 0) return -1;  // EEXIST when `to` is there
  return ::unlink(from.c_str());
}

// The failure that leaves this run's finished output at a named place (the caller must not remove it).
struct OutputKept : Error {
  using Error::Error;
};

[[noreturn]] void keep_and_fail(const std::string& from, const std::string& to, const std::string& key, const std::string& why) {
  const std::string kept = free_name_beside(to);
  const std::string at = !kept.empty() && rename_noreplace(from, kept) == 0 ? kept : from;
  throw OutputKept(fmt::format("{}: '{}' {}; it was left as it is, and this run's output is at '{}'", key, to, why, at));
}

}  // namespace

std::string with_file_marker(const std::string& text) { return std::string(kFileMarkerComment) + "\n" + text; }

std::string written_by_value() { return "model-optimizer " + build_info().version; }

bool written_by_us(const std::string& path) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec || fs::is_symlink(st)) return false;
  if (fs::is_directory(st)) return fs::is_regular_file(fs::symlink_status(fs::path(path) / kMarkerFile, ec));
  if (!fs::is_regular_file(st)) return false;
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".gguf") return is_our_output(path);
  const std::string head = head_of(path, kSniffBytes);
  if (head.find(kFileMarkerComment) != std::string::npos) return true;  // Markdown, SVG
  if (ext == ".jsonl") return ours_json(path, true);
  const auto first = head.find_first_not_of(" \t\r\n");
  return first != std::string::npos && head[first] == '{' && ours_json(path, false);
}

void check_new_output(const std::string& path, bool force, const std::string& key) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return;
  if (!force)
    throw UsageError(fmt::format(
        "{}: '{}' already exists; choose another path, or pass --force to replace an earlier output of model-optimizer", key, path));
  if (!written_by_us(path))
    throw UsageError(fmt::format(
        "{}: '{}' exists and was not written by model-optimizer; --force replaces only model-optimizer's own outputs", key, path));
}

void move_into_place(const std::string& from, const std::string& to, bool force, const std::string& key) {
  if (rename_noreplace(from, to) == 0) return;
  if (errno != EEXIST && errno != ENOTEMPTY)
    throw Error(fmt::format("{}: cannot move the finished output '{}' to '{}': {}", key, from, to, std::strerror(errno)));
  if (!force || !written_by_us(to))
    keep_and_fail(from, to, key, force ? "exists and was not written by model-optimizer" : "appeared while this run was writing");
  // Swap the two in one step, then look at what was displaced: if it is not ours after all, swap back.
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      throw Error(fmt::format("{}: cannot replace '{}' with '{}': {}", key, to, from, std::strerror(errno)));
    // No exchange on this filesystem: the earlier output is moved aside first and restored on failure.
    const std::string aside = free_name_beside(to + ".old");
    if (aside.empty() || rename_noreplace(to, aside) != 0) keep_and_fail(from, to, key, "could not be moved aside");
    if (rename_noreplace(from, to) != 0) {
      rename_noreplace(aside, to);
      keep_and_fail(from, to, key, "appeared while this run was replacing it");
    }
    std::error_code ec;
    fs::remove_all(aside, ec);
    return;
  }
  if (!written_by_us(from)) {
    ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE);
    keep_and_fail(from, to, key, "was replaced by something not written by model-optimizer while this run was writing");
  }
  std::error_code ec;
  fs::remove_all(from, ec);  // the earlier output, now at `from`
}

void write_output_file(const std::string& path, const std::string& text, bool force, const std::string& key) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(fmt::format("{}: cannot write '{}' (disk full, or no permission?)", key, tmp));
    }
  }
  try {
    move_into_place(tmp, path, force, key);
  } catch (const OutputKept&) {
    throw;
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace mo::io
