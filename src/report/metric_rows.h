#pragma once
// The comparison table's rows: one metric, its base and model values, and which direction is better,
// shared by the Markdown and JSON writers so both show the same numbers.
#include <optional>
#include <string>
#include <vector>

#include "mo/eval/evaluate.h"

namespace mo::report {

enum class Better { lower, higher, none };
enum class DeltaKind { relative, points, ratio };  // +2.1% | -0.8 points | 2.4x

struct MetricRow {
  std::string key;    // JSON key: "ppl", "arc_easy.acc", "decode_tokens_per_s"
  std::string label;  // Markdown label
  std::optional<double> base, model;
  Better better = Better::none;
  DeltaKind delta = DeltaKind::relative;
  int decimals = 4;
  double scale = 1;                           // shown value = value * scale (accuracies in %)
  std::optional<double> base_err, model_err;  // standard errors, same units as the values
};

std::vector<MetricRow> metric_rows(const eval::EvalResult& r);

}  // namespace mo::report
