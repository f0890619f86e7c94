#include <fmt/format.h>

#include <iostream>

#include "cli.h"
#include "mo/config/commands.h"
#include "mo/convert/convert.h"

namespace mo::app {
namespace {

class ConvertCommand : public Command {
 public:
  const char* name() const override { return "convert"; }
  const char* summary() const override {
    return "convert IN OUT: GGUF -> HF directory (dequantizing any block type) or HF -> GGUF (F32/F16/BF16)";
  }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    convert::ConvertOptions opt;
    opt.output_format = cfg_.output_format;
    opt.dtype = cfg_.dtype;
    opt.force = cfg_.force;
    opt.max_shard_bytes = static_cast<std::uint64_t>(cfg_.max_shard_size_mb) * 1'000'000ull;
    convert::ConvertReport r = convert::convert_model(cfg_.model_path, cfg_.output_path, opt);
    std::cout << fmt::format("converted {} -> {} ({}): {} tensors, {:.1f} MB of tensor data in {:.2f} s\n", r.input, r.output,
                             r.output_format == "hf" ? "HF directory" : "GGUF", r.tensors, r.bytes_written / 1e6, r.seconds);
    for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
    return 0;
  }

 private:
  config::ConvertConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_convert_command() { return std::make_unique<ConvertCommand>(); }

}  // namespace mo::app
