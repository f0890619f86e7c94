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
  explicit StagedOutput(std::string final_path, std::string keep = {});
  ~StagedOutput();  // removes the temporary output unless committed
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  // Where to write the output (file or directory), inside the temporary directory.
  const std::string& temp_path() const { return payload_; }
  // Moves the temporary output to the final path, replacing what check_output_path allowed.
  void commit();

 private:
  std::string final_, dir_, payload_, token_;
};

// Removes `<final>.tmp-<pid>` directories that StagedOutput left behind (marker checked, process gone,
// `keep` not inside). Returns how many it removed.
int remove_stale_temps(const std::string& final_path, const std::string& keep = {});

}  // namespace mo::io
