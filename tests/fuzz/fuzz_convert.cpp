// convert's input checks: a GGUF model converted to an HF directory and back. convert refuses what the
// other commands refuse (the model check); what it accepts it must write as a model that passes the same
// check, with every tensor it read, so an output that would not load is a finding (abort), not a refusal.
#include <filesystem>

#include "fuzz_util.h"
#include "mo/convert/convert.h"
#include "mo/core/log.h"
#include "mo/model/model_check.h"
#include "mo/model/model_files.h"

namespace {

// The output of a conversion that succeeded: it loads, and holds as many tensors as were written.
void expect_loadable(const std::string& path, const mo::convert::ConvertReport& r) {
  try {
    const auto m = mo::model::ModelFiles::open(path);
    mo::model::check_model(m, mo::model::TokenizerUse::optional);
    if (m.tensors().size() != r.tensors) {
      std::fprintf(stderr, "convert wrote %zu tensors to %s but reported %zu\n", m.tensors().size(), path.c_str(),
                   static_cast<std::size_t>(r.tensors));
      std::abort();
    }
  } catch (const mo::Error& e) {
    std::fprintf(stderr, "convert accepted the input but its output %s does not load: %s\n", path.c_str(), e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool quiet = (mo::log::init("error"), true);
  (void)quiet;
  const std::string path = mo::fuzz::write_input(data, size, "model.gguf");
  const auto dir = std::filesystem::path(path).parent_path();
  const std::string hf = (dir / "hf").string(), back = (dir / "back.gguf").string();
  std::filesystem::remove_all(hf);
  std::filesystem::remove(back);
  mo::fuzz::refusals_are_errors([&] {
    const auto to_hf = mo::convert::convert_model(path, hf, {});
    expect_loadable(hf, to_hf);
    const auto to_gguf = mo::convert::convert_model(hf, back, {});
    expect_loadable(back, to_gguf);
  });
  return 0;
}
