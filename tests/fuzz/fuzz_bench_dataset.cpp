// A prompt dataset for bench --dataset (JSONL prompts or a ShareGPT JSON array).
#include "fuzz_util.h"
#include "mo/bench/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool array = size > 0 && data[0] == '[';
  const std::string path = mo::fuzz::write_input(data, size, array ? "dataset.json" : "dataset.jsonl");
  mo::fuzz::refusals_are_errors([&] {
    const auto prompts = mo::bench::load_dataset_prompts(path);
    volatile std::size_t sink = 0;
    for (const auto& p : prompts) sink = sink + p.size();
  });
  return 0;
}
