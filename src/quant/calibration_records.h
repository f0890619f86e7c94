#pragma once
// Reading calibration records out of a JSON / JSONL / text file (the part of calibration.cpp that knows files).
#include <cstdint>
#include <string>
#include <vector>

#include "mo/tokenizer/chat_template.h"

namespace mo::quant::detail {

struct CalibrationRecord {
  std::string text;
  bool chat = false;  // rendered from messages: its special-token texts ("<|im_start|>") are tokens
};

struct CalibrationRecords {
  std::vector<CalibrationRecord> records;  // non-empty texts in file order
  std::int64_t total = 0;                  // records in the file
  std::int64_t empty = 0;                  // records with no text (left out of `records`)
  std::string format;                      // "JSONL", "JSON array" or "text paragraphs"
  std::vector<std::string> warnings;
};

// Throws UsageError naming `path` and the JSONL line or JSON record when the file is not what is
// expected or the chat template rejects a record; Error when the template fails in another way.
CalibrationRecords read_calibration_records(const std::string& path, const std::string& text_field, const tok::ModelChatTemplate& chat);

}  // namespace mo::quant::detail
