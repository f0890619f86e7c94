// A .safetensors file: the JSON header, dtypes, shapes and data offsets, then every tensor's bytes read.
#include "fuzz_util.h"
#include "mo/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mo::fuzz::write_input(data, size, "model.safetensors");
  mo::fuzz::refusals_are_errors([&] {
    const auto m = mo::st::Model::open(path);
    volatile std::uint8_t sink = 0;
    for (const auto& name : m.names()) {
      const auto* t = m.find(name);
      if (!t) std::abort();  // names() promised it
      const std::uint8_t* p = t->data;
      for (std::size_t i = 0; i < t->nbytes; i += 4096) sink = sink + p[i];
      if (t->nbytes) sink = sink + p[t->nbytes - 1];
    }
  });
  return 0;
}
