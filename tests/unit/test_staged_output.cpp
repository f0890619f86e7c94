// Outputs are staged in `<final>.tmp-<pid>`; the sweep of temporaries a crashed run left must never
// remove what is not provably ours, nor the input model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "mo/io/output_path.h"
#include "mo/convert/convert.h"
#include "mo/core/error.h"

namespace {

namespace fs = std::filesystem;
using mo::io::StagedOutput;

const std::string kStories = std::string(MO_SHARED_DATA) + "/models/stories260K.gguf";
constexpr const char* kGonePid = "99999999";  // above any pid_max: no such process

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mo_staged_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.insert(e.path().filename().string());
    return out;
  }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

void write_marker(const fs::path& dir, const std::string& pid) {
  write(dir / mo::io::kTempMarker, "model-optimizer temporary output\npid " + pid + "\ntoken 0123456789abcdef\n");
}

TEST(StagedOutput, UserDirectoryNamedLikeATemporarySurvives) {
  TempDir t;
  const fs::path user = t.path / (std::string("out.tmp-") + kGonePid);
  write(user / "notes.txt", "mine");
  { StagedOutput s((t.path / "out").string()); }
  EXPECT_TRUE(fs::exists(user / "notes.txt"));
}

TEST(StagedOutput, OurStaleTemporaryIsRemoved) {
  TempDir t;
  const fs::path stale = t.path / (std::string("out.tmp-") + kGonePid);
  write_marker(stale, kGonePid);
  write(stale / "out" / "model.safetensors", "half written");
  EXPECT_EQ(mo::io::remove_stale_temps((t.path / "out").string()), 1);
  EXPECT_FALSE(fs::exists(stale));
}

TEST(StagedOutput, MarkerOfAnotherPidOrASymlinkIsKept) {
  TempDir t;
  const fs::path other = t.path / "out.tmp-12345678";
  write_marker(other, kGonePid);  // copied from elsewhere: the pid does not match the name
  const fs::path target = t.path / "precious";
  write_marker(target, kGonePid);
  write(target / "data.bin", "x");
  fs::create_directory_symlink(target, t.path / (std::string("out.tmp-") + kGonePid));
  EXPECT_EQ(mo::io::remove_stale_temps((t.path / "out").string()), 0);
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(target / "data.bin"));
}

TEST(StagedOutput, TheInputModelIsNeverSwept) {
  TempDir t;
  const fs::path holder = t.path / (std::string("out.tmp-") + kGonePid);
  write_marker(holder, kGonePid);  // even a stale temporary of ours, once it holds the input
  fs::copy_file(kStories, holder / "stories.gguf");
  mo::convert::convert_model((holder / "stories.gguf").string(), (t.path / "out").string(), {});
  EXPECT_TRUE(fs::exists(holder / "stories.gguf"));
  EXPECT_TRUE(fs::exists(t.path / "out" / "config.json"));
}

TEST(StagedOutput, CommitLeavesOnlyTheOutputAndAbandonLeavesNothing) {
  TempDir t;
  {
    StagedOutput s((t.path / "out").string());
    write(fs::path(s.temp_path()) / "a.txt", "a");
    s.commit();
  }
  EXPECT_EQ(t.names(), std::set<std::string>{"out"});
  EXPECT_TRUE(fs::exists(t.path / "out" / "a.txt"));
  {
    StagedOutput s((t.path / "file.gguf").string());
    write(s.temp_path(), "partial");
  }
  EXPECT_EQ(t.names(), std::set<std::string>{"out"});
}

TEST(StagedOutput, ANameClashWithOurPidIsRefusedNotRemoved) {
  TempDir t;
  const fs::path clash = t.path / ("out.tmp-" + std::to_string(::getpid()));
  write(clash / "notes.txt", "mine");
  EXPECT_THROW(StagedOutput((t.path / "out").string()), mo::Error);
  EXPECT_TRUE(fs::exists(clash / "notes.txt"));
}

}  // namespace
