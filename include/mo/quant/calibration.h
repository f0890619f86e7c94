#pragma once
// Calibration data for `quantize`: text records from a JSON / JSONL file, the paragraphs of a text file
// or a built-in set, cleaned of duplicates and tokenized into the samples that the quantizers run through the model.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/tokenizer/chat_template.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::quant {

struct CalibrationOptions {
  std::string source = "general";  // a .json / .jsonl / .txt file, or a built-in set: general | code | chat
  // Where a record's text is: auto (text, else messages, else prompt+completion, per record) | text |
  // messages ([{role, content}], rendered with the model's chat template) | prompt+completion | any
  // other key of the records holding a string or a messages list.
  std::string text_field = "auto";
  std::int64_t num_samples = 128;  // samples returned; a warning outside 128-512
  std::int64_t seq_len = 512;      // tokens per sample, BOS included
  // true: records joined with EOS into one stream cut into seq_len windows (every sample full);
  // false: one record per sample, cut at seq_len (short records give short samples).
  bool pack = true;
  std::uint64_t seed = 0;  // the order records are taken in (same seed, same samples)
};

struct CalibrationSet {
  std::vector<std::vector<std::int32_t>> samples;  // token ids, BOS first when the tokenizer adds one
  std::string source;                              // the file path, or "built-in:general"
  std::string description;                         // one line for the log and the manifest
  std::int64_t records = 0;                        // records in the source
  std::int64_t duplicates_removed = 0;             // same text as an earlier record
  std::int64_t near_duplicates_removed = 0;        // same text once case, punctuation and spacing are ignored
  std::int64_t empty_skipped = 0;                  // no text, or only whitespace
  std::int64_t records_used = 0;                   // records whose tokens are in `samples`
  std::int64_t tokens = 0;                         // total tokens in `samples`
  bool builtin = false;
  // For the caller to log: sample count outside 128-512, fewer tokens or records than asked, ...
  std::vector<std::string> warnings;
};

// Throws UsageError for what the user can fix (missing file, bad options, a record without the text
// field, messages the chat template rejects, no usable text), naming the file and the JSONL line or
// JSON record. `chat` renders `messages` records (ChatML when it has no template or one that cannot
// run here, with one warning).
CalibrationSet load_calibration(const CalibrationOptions& opt, const tok::Tokenizer& tok, const tok::ModelChatTemplate& chat);
// The same with only the template's text: its bos_token / eos_token are the tokenizer's BOS / EOS.
CalibrationSet load_calibration(const CalibrationOptions& opt, const tok::Tokenizer& tok, const std::string& chat_template);

// $MO_CALIBRATION_DIR when set, else the directory scripts/fetch-calibration.sh fills.
std::string builtin_calibration_dir();
std::vector<std::string> builtin_calibration_names();  // general, code, chat

}  // namespace mo::quant
