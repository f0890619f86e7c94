// A sharded checkpoint: model.safetensors.index.json (the input) over two fixed shards, opened and every
// tensor it maps read, as the loaders of quantize, convert and generate do.
#include <filesystem>
#include <fstream>

#include "fuzz_util.h"
#include "mo/io/safetensors.h"

namespace {

// Two valid shards beside the index: tensors a, b (f32 [2]) in the first, c (f16 [2]) in the second.
void write_shards(const std::filesystem::path& dir) {
  static bool done = false;
  if (done) return;
  const auto shard = [&](const char* name, const std::string& header, const std::string& body) {
    std::ofstream f(dir / name, std::ios::binary);
    const std::uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << body;
  };
  shard("model-00001-of-00002.safetensors",
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
        std::string(16, '\0'));
  shard("model-00002-of-00002.safetensors", R"({"c":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0'));
  done = true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string index = mo::fuzz::write_input(data, size, "model.safetensors.index.json");
  const std::filesystem::path dir = std::filesystem::path(index).parent_path();
  write_shards(dir);
  mo::fuzz::refusals_are_errors([&] {
    const auto m = mo::st::Model::open(dir.string());
    volatile std::uint8_t sink = 0;
    for (const auto& name : m.names()) {
      const auto* t = m.find(name);
      if (!t) std::abort();  // names() promised it
      if (t->nbytes) sink = sink + t->data[t->nbytes - 1];
    }
  });
  return 0;
}
