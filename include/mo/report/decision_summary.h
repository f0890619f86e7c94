#pragma once
// The per-layer part of the report, read back from the decision log that `quantize` writes
// (decisions.jsonl: one JSON object per module with module, format, requested, reason, cosine, bytes).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mo::report {

struct DecisionRow {
  std::string module, requested, format, reason;
  double cosine = -1;  // -1: not recorded
  std::uint64_t bytes = 0;
};

struct DecisionSummary {
  std::string path;
  std::int64_t modules = 0;
  std::map<std::string, std::int64_t> by_format;         // format -> modules written in it
  std::map<std::string, std::uint64_t> bytes_by_format;  // format -> stored bytes
  std::vector<DecisionRow> changed;                      // modules whose format differs from the request
  std::vector<DecisionRow> lowest_cosine;                // the 5 lowest output cosines, lowest first
  double mean_cosine = -1;                               // over modules with a cosine; -1 when none
};

// Throws UsageError "<path>:<line>: ..." for a line that is not a JSON object with a "module" string.
DecisionSummary summarize_decisions(const std::string& path);

}  // namespace mo::report
