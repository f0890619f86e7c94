// A Transformers config.json: the model shape and its quantization_config.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "mo/io/json_file.h"
#include "mo/model/model_source.h"
#include "mo/formats/hf_quant_config.h"

namespace formats = mo::formats;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mo::fuzz::write_input(data, size, "config.json");
  mo::fuzz::refusals_are_errors([&] {
    const nlohmann::json config = mo::io::read_json(path);
    mo::fuzz::refusals_are_errors([&] { mo::model::shape_from_hf_config(config, path); });
    if (config.is_object() && config.contains("quantization_config"))
      mo::fuzz::refusals_are_errors([&] { mo::formats::parse_quantization_config(config["quantization_config"]).describe(); });
  });
  return 0;
}
