#pragma once
// Output safety for commands that write models: never over or inside the input, never over a path
// the user had unless it is an earlier output of ours and they asked (--force); written under a
// temporary name and renamed into place when complete.
#include <string>

namespace mo::convert {

// The marker an HF directory we wrote carries, and the GGUF key that marks our files.
inline constexpr const char* kMarkerFile = "model-optimizer.json";
inline constexpr const char* kMarkerKey = "model-optimizer.source";

bool is_our_output(const std::string& path);

// Throws UsageError naming `key` (the config key of the output) when `output` may not be written.
void check_output_path(const std::string& input, const std::string& output, bool force, const std::string& key = "output_path");

class StagedOutput {
 public:
  explicit StagedOutput(std::string final_path);
  ~StagedOutput();  // removes the temporary output unless committed
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  const std::string& temp_path() const { return temp_; }
  // Moves the temporary output to the final path, replacing what check_output_path allowed.
  void commit();

 private:
  std::string final_, temp_;
  bool committed_ = false;
};

}  // namespace mo::convert
