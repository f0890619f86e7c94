// Writes tensors with mo::st, for tests/python/test_safetensors_reference.py.
//   mo_tool_safetensors_write SPEC.json OUT
// SPEC: {"tensors": [{"name", "dtype", "shape", "hex"}], "metadata": {str: str}, "max_shard_bytes": N}.
// Without max_shard_bytes OUT is the file to write; with it OUT is the directory for write_sharded.
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/io/safetensors.h"

namespace {

std::vector<std::uint8_t> unhex(const std::string& s) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<std::uint8_t> out(s.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(nibble(s[2 * i]) * 16 + nibble(s[2 * i + 1]));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: mo_tool_safetensors_write SPEC.json OUT\n";
    return mo::kExitUsage;
  }
  try {
    const nlohmann::json spec = mo::io::read_json(argv[1]);
    std::vector<std::vector<std::uint8_t>> buffers;
    std::vector<mo::st::TensorData> tensors;
    buffers.reserve(spec.at("tensors").size());
    for (const nlohmann::json& t : spec.at("tensors")) {
      const auto dtype = mo::st::dtype_from_name(t.at("dtype").get<std::string>());
      if (!dtype) throw mo::UsageError("unknown dtype " + t.at("dtype").dump());
      buffers.push_back(unhex(t.at("hex").get<std::string>()));
      tensors.push_back({t.at("name").get<std::string>(), *dtype, t.at("shape").get<std::vector<std::int64_t>>(), buffers.back().data(),
                         buffers.back().size()});
    }
    const auto metadata = spec.value("metadata", std::map<std::string, std::string>{});
    if (spec.contains("max_shard_bytes")) {
      mo::st::write_sharded(argv[2], tensors, spec.at("max_shard_bytes").get<std::size_t>(), metadata);
    } else {
      mo::st::write_file(argv[2], tensors, metadata);
    }
    return 0;
  } catch (const mo::UsageError& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitRuntime;
  }
}
