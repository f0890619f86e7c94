// A calibration file (JSONL, or a JSON array when it starts with '['): records, text fields, chat
// messages rendered with a template, then the samples quantize would run; and the same bytes as a text file.
#include "fuzz_tokenizer.h"
#include "mo/quant/calibration.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool array = size > 0 && data[0] == '[';
  const std::string path = mo::fuzz::write_input(data, size, array ? "calib.json" : "calib.jsonl");
  const auto& tok = mo::fuzz::stories_tokenizer();
  for (const char* field : {"auto", "text", "messages"}) {
    mo::fuzz::refusals_are_errors([&] {
      mo::quant::CalibrationOptions opt;
      opt.source = path;
      opt.text_field = field;
      opt.num_samples = 4;
      opt.seq_len = 32;
      opt.pack = field[0] != 'm';
      mo::quant::load_calibration(opt, tok, std::string());  // no template: ChatML
    });
  }
  // The same bytes as a plain-text file: one sample per blank-line paragraph.
  const std::string text = mo::fuzz::write_input(data, size, "calib.txt");
  mo::fuzz::refusals_are_errors([&] {
    mo::quant::CalibrationOptions opt;
    opt.source = text;
    opt.num_samples = 4;
    opt.seq_len = 32;
    mo::quant::load_calibration(opt, tok, std::string());
  });
  return 0;
}
