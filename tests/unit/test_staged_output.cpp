// Outputs are staged in `<final>.tmp-<pid>`; the sweep of temporaries a crashed run left must never
// remove what is not provably ours, nor the input model.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "mo/convert/convert.h"
#include "mo/core/error.h"
#include "mo/io/output_file.h"
#include "mo/io/output_path.h"

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
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found (the shared data)";
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

// Issue 32.1: what appears at the output path while a run writes is never replaced; the run's output is
// kept beside it under a name the error gives.
namespace {

std::string kept_path_in(const std::string& message) {
  const std::string key = "this run's output is at '";
  const auto at = message.find(key);
  if (at == std::string::npos) return {};
  return message.substr(at + key.size(), message.find('\'', at + key.size()) - at - key.size());
}

TEST(StagedOutput, ADirectoryThatAppearedMeanwhileIsKeptAndSoIsTheOutput) {
  TempDir t;
  const fs::path out = t.path / "out";
  std::string kept;
  {
    StagedOutput s(out.string());
    write(fs::path(s.temp_path()) / "model.safetensors", "our model");
    write(out / "thesis.txt", "irreplaceable");  // the user, while the run writes
    try {
      s.commit();
      FAIL() << "the commit replaced what appeared";
    } catch (const mo::Error& e) {
      EXPECT_NE(std::string(e.what()).find("output_path: '" + out.string() + "' appeared while this run was writing"), std::string::npos)
          << e.what();
      kept = kept_path_in(e.what());
    }
  }
  std::ifstream thesis(out / "thesis.txt");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(thesis)), {}), "irreplaceable");
  EXPECT_EQ(kept, (t.path / ("out-" + std::to_string(::getpid()))).string());
  EXPECT_TRUE(fs::exists(fs::path(kept) / "model.safetensors"));
}

TEST(StagedOutput, OfTwoRunsToOnePathTheFirstWinsAndTheSecondKeepsItsOutput) {
  TempDir t;
  const fs::path out = t.path / "model.gguf";
  StagedOutput first(out.string());
  write(first.temp_path(), "first");
  first.commit();
  // A second run of this process would stage under the same temporary name, so it is simulated by hand.
  const fs::path second = t.path / "second.gguf";
  write(second, "second");
  try {
    mo::io::move_into_place(second.string(), out.string(), false, "output_path");
    FAIL() << "the second run replaced the first";
  } catch (const mo::Error& e) {
    const std::string kept = kept_path_in(e.what());
    EXPECT_EQ(kept, (t.path / ("model-" + std::to_string(::getpid()) + ".gguf")).string()) << e.what();
    std::ifstream in(kept);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "second");
  }
  std::ifstream in(out);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "first");
}

TEST(OutputFile, ForceReplacesOnlyWhatWeWrote) {
  TempDir t;
  const fs::path report = t.path / "report.md";
  mo::io::write_output_file(report.string(), mo::io::with_file_marker("# first\n"), false, "output_path");
  EXPECT_TRUE(mo::io::written_by_us(report.string()));
  // Without --force even our own file stays; with it, ours is replaced.
  EXPECT_THROW(mo::io::check_new_output(report.string(), false, "output_path"), mo::UsageError);
  EXPECT_NO_THROW(mo::io::check_new_output(report.string(), true, "output_path"));
  mo::io::write_output_file(report.string(), mo::io::with_file_marker("# second\n"), true, "output_path");
  std::ifstream in(report);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), std::string(mo::io::kFileMarkerComment) + "\n# second\n");

  // A user's file, a directory, a FIFO and a link are never replaced, --force or not.
  const fs::path notes = t.path / "notes.md";
  write(notes, "# my notes\n");
  const fs::path fifo = t.path / "pipe.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(t.path / "dir.json");
  fs::create_symlink(report, t.path / "link.md");
  for (const fs::path& p : {notes, fifo, t.path / "dir.json", t.path / "link.md"}) {
    try {
      mo::io::check_new_output(p.string(), true, "out");
      ADD_FAILURE() << p << " may be replaced";
    } catch (const mo::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("was not written by model-optimizer"), std::string::npos) << e.what();
    }
  }
  // Written regardless of the check (a user file that appeared meanwhile): untouched, ours kept beside it.
  EXPECT_THROW(mo::io::write_output_file(notes.string(), "ours\n", true, "out"), mo::Error);
  std::ifstream mine(notes);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(mine)), {}), "# my notes\n");
  EXPECT_TRUE(fs::exists(t.path / ("notes-" + std::to_string(::getpid()) + ".md")));
  EXPECT_FALSE(fs::exists(t.path / ("notes.md.tmp-" + std::to_string(::getpid()))));
}

TEST(OutputFile, OurJsonAndDecisionLogsAreRecognised) {
  TempDir t;
  write(t.path / "results.json", R"({"written_by": "model-optimizer 0.1.0", "levels": []})");
  write(t.path / "other.json", R"({"levels": []})");
  write(t.path / "d.jsonl", "{\"module\": \"lm_head\", \"format\": \"f16\"}\n{\"module\": \"x\"}\n");
  write(t.path / "e.jsonl", "{\"module\": \"lm_head\"}\nnot json\n");
  write(t.path / "plain.txt", "hello");
  EXPECT_TRUE(mo::io::written_by_us((t.path / "results.json").string()));
  EXPECT_FALSE(mo::io::written_by_us((t.path / "other.json").string()));
  EXPECT_TRUE(mo::io::written_by_us((t.path / "d.jsonl").string()));
  EXPECT_FALSE(mo::io::written_by_us((t.path / "e.jsonl").string()));
  EXPECT_FALSE(mo::io::written_by_us((t.path / "plain.txt").string()));
}

}  // namespace
