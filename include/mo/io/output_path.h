#pragma once
// Output safety for commands that write models: never over or inside the input, never over a path
// the user had unless it is an earlier output of ours and they asked (--force); written under a
// temporary name and renamed into place when complete.
#include <string>

namespace mo::io {

// The marker an HF directory we wrote carries, and the GGUF key that marks our files.
inline constexpr const char* kMarkerFile = "model-optimizer.json";
inline constexpr const char* kMarkerKey = "model-optimizer.source";

bool is_our_output(const std::string& path);

// Throws UsageError naming `key` (the config key of the output) when `output` may not be written.
void check_output_path(const std::string& input, const std::string& output, bool force, const std::string& key = "output_path");

// The output is built inside a directory `<final>.tmp-<pid>` that holds a marker (kTempMarker: our pid and
// a random token) and the payload under the final file name; commit() moves the payload into place. A
// crashed run's directory is removed by the next run for the same output only when its marker proves it
// ours, its process is gone, and it does not hold `keep` (the input model).
inline constexpr const char* kTempMarker = ".model-optimizer-temp";

class StagedOutput {
 public:
  // `force`: commit() may replace an earlier output of ours at the final path (never anything else).
  explicit StagedOutput(std::string final_path, std::string keep = {}, bool force = false);
  ~StagedOutput();  // removes the temporary output unless committed
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  // Where to write the output (file or directory), inside the temporary directory.
  const std::string& temp_path() const { return payload_; }
  // Moves the temporary output to the final path (io::move_into_place): onto nothing, or with `force` onto an
  // earlier output of ours. What appeared there meanwhile is left alone; the output is then kept beside it.
  void commit();
  // Moves a side file written as temp_path() + suffix (".decisions.jsonl") to the final path + suffix, same rules.
  void commit_side_file(const std::string& suffix);

 private:
  std::string final_, dir_, payload_, token_;
  bool force_ = false;
  bool keep_dir_ = false;  // a failed commit left the finished output in it
};

// Removes `<final>.tmp-<pid>` directories that StagedOutput left behind (marker checked, process gone,
// `keep` not inside). Returns how many it removed.
int remove_stale_temps(const std::string& final_path, const std::string& keep = {});

}  // namespace mo::io
