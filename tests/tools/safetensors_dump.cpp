// Prints what mo::st reads, for tests/python/test_safetensors_reference.py.
//   mo_tool_safetensors_dump MODEL           JSON: {"files", "metadata" (first file), "tensors": {name: {dtype,
//                                            shape, hex}}} for a .safetensors file, an index or a directory
//   mo_tool_safetensors_dump --check F...    one JSON line per file: {"path", "ok", "error"}
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "mo/core/error.h"
#include "mo/io/safetensors.h"

namespace {

std::string hex(const std::uint8_t* p, std::size_t n) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

int dump(const std::string& path) {
  const mo::st::Model model = mo::st::Model::open(path);
  nlohmann::json out;
  out["files"] = nlohmann::json::array();
  for (const mo::st::File& f : model.files()) out["files"].push_back(f.path());
  out["metadata"] = model.files().front().metadata();
  out["total_bytes"] = model.total_bytes();
  nlohmann::json tensors = nlohmann::json::object();
  for (const std::string& name : model.names()) {
    const mo::st::TensorView* v = model.find(name);
    tensors[name] = {{"dtype", mo::st::dtype_name(v->dtype)}, {"shape", v->shape}, {"hex", hex(v->data, v->nbytes)}};
  }
  out["tensors"] = std::move(tensors);
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: mo_tool_safetensors_dump MODEL | --check FILE...\n";
    return mo::kExitUsage;
  }
  try {
    if (std::string(argv[1]) != "--check") return dump(argv[1]);
    for (int i = 2; i < argc; ++i) {
      nlohmann::json line = {{"path", argv[i]}, {"ok", true}, {"error", nullptr}};
      try {
        mo::st::File::open(argv[i]);
      } catch (const mo::Error& e) {
        line["ok"] = false;
        line["error"] = e.what();
      }
      // Messages may quote corrupt names: replace invalid UTF-8 rather than fail to print.
      std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return 0;
  } catch (const mo::UsageError& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitUsage;
  } catch (const mo::Error& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitRuntime;
  }
}
