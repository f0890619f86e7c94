// An importance-matrix file (--imatrix FILE): llama.cpp's GGUF format or its first, binary one, then the
// per-tensor importance quantize reads from it.
#include "fuzz_util.h"
#include "mo/quant/imatrix.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mo::fuzz::write_input(data, size, "input.imatrix");
  mo::fuzz::refusals_are_errors([&] {
    const mo::quant::Imatrix m = mo::quant::read_imatrix(path);
    volatile float sink = 0;
    for (const auto& [name, e] : m.entries)
      for (float v : m.importance(name)) sink = sink + v;
  });
  return 0;
}
