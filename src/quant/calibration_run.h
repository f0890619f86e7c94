#pragma once
// The calibration samples a quantize run asked for (calibration_data, calibration_field, num_samples,
// max_seq_len, calibration_pack, seed), tokenized with the source model's tokenizer and chat template;
// warnings go to the log and the report's notes, the description into the report.
#include "mo/quant/options.h"
#include "mo/quant/calibration.h"
#include "mo/quant/quantize.h"
#include "source_model.h"

namespace mo::quant {

// Throws UsageError naming the model when it has no tokenizer; `why` ends that message.
CalibrationSet load_run_calibration(const QuantizeOptions& cfg, const SourceModel& src, QuantizeReport& rep, const char* why = "");

}  // namespace mo::quant
