// A quantized Hugging Face directory (AWQ GEMM, GPTQ, compressed-tensors): config.json with its
// quantization_config and model.safetensors with the packed tensors, bound to the engine's layout as
// generate and serve load it. The input is a bundle: a little-endian u32 length, config.json, then
// model.safetensors (tests/fuzz/make_corpus.py writes the seeds).
#include <cstring>
#include <filesystem>

#include "fuzz_util.h"
#include "mo/engine/weights.h"
#include "mo/model/model_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t n = 0;
  std::memcpy(&n, data, 4);
  if (n > size - 4) return 0;
  const std::string config = mo::fuzz::write_input(data + 4, n, "config.json");
  const std::string weights = mo::fuzz::write_input(data + 4 + n, size - 4 - n, "model.safetensors");
  const std::string dir = std::filesystem::path(config).parent_path().string();
  mo::fuzz::refusals_are_errors([&] {
    const auto files = mo::model::ModelFiles::open(dir);
    const auto w = mo::engine::bind_weights(files);
    volatile std::uint64_t sink = w.matrix_bytes();
    (void)sink;
  });
  return 0;
}
