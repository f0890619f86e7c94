// A YAML config file (quantize.yaml, serve.yaml, bench.yaml): keys, types, ranges, aliases.
#include "fuzz_util.h"
#include "mo/config/commands.h"
#include "mo/config/yaml_loader.h"

namespace {
template <class Config>
void load(const std::string& text, const char* section) {
  mo::config::Schema s(section);
  Config c;
  mo::config::bind(s, c);
  mo::fuzz::refusals_are_errors([&] { mo::config::load_yaml_text(s, text, "fuzz.yaml"); });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  load<mo::config::QuantizeConfig>(text, "quantize");
  load<mo::config::ServeConfig>(text, "serve");
  load<mo::config::BenchConfig>(text, "bench");
  return 0;
}
