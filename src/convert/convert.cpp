#include "mo/convert/convert.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "directions.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/io/output_path.h"
#include "mo/model/model_check.h"

namespace mo::convert {

ConvertReport convert_model(const std::string& input, const std::string& output, const ConvertOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  if (input.empty()) throw UsageError("model_path: no input model given");
  model::ModelFiles in = model::ModelFiles::open(input);
  // What convert writes must load again: it rewrites only models the other commands would run.
  model::check_model(in, model::TokenizerUse::optional);
  std::string format = opt.output_format;
  if (format == "auto") format = std::filesystem::path(output).extension() == ".gguf" ? "gguf" : "hf";
  if (format == in.format() || (format == "hf" && in.format() == "safetensors")) {
    throw UsageError(fmt::format("output_format: '{}' is already {}; convert writes the other format", input,
                                 in.format() == "gguf" ? "a GGUF file" : "an HF directory"));
  }
  io::check_output_path(input, output, opt.force);

  ConvertReport report;
  report.input = input;
  report.output = output;
  report.output_format = format;
  io::StagedOutput staged(output, input, opt.force);
  log::info("converting {} ({}, {} tensors) to {}", input, in.format(), in.tensors().size(), format == "hf" ? "an HF directory" : "GGUF");
  if (format == "hf")
    write_hf(in, staged.temp_path(), opt, report);
  else
    write_gguf(in, staged.temp_path(), opt, report);
  staged.commit();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::info("wrote {} tensors ({:.1f} MB) to {} in {:.2f} s", report.tensors, report.bytes_written / 1e6, output, report.seconds);
  return report;
}

}  // namespace mo::convert
