#include "calibration_run.h"

#include <fmt/format.h>

#include "mo/core/error.h"
#include "mo/core/log.h"

namespace mo::quant {

CalibrationSet load_run_calibration(const QuantizeOptions& cfg, const SourceModel& src, QuantizeReport& rep, const char* why) {
  if (!src.tokenizer())
    throw UsageError(fmt::format("{}: the model has no tokenizer, so calibration text cannot be tokenized{}", cfg.model_path, why));
  CalibrationOptions co;
  co.source = cfg.calibration_data;
  co.text_field = cfg.calibration_field;
  co.num_samples = cfg.num_samples;
  co.seq_len = cfg.max_seq_len;
  co.pack = cfg.calibration_pack;
  co.seed = cfg.seed;
  CalibrationSet set = load_calibration(co, *src.tokenizer(), src.chat_template());
  for (const auto& w : set.warnings) {
    log::warn("calibration: {}", w);
    rep.notes.push_back(w);
  }
  rep.calibration = set.description;
  return set;
}

}  // namespace mo::quant
