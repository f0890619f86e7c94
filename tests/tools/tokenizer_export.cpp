// Prints what the tokenizer conversion computes, for tests/python/test_tokenizer_export_reference.py:
//   mo_tool_tokenizer_export to-hf FILE.gguf OUTDIR
//       writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into OUTDIR
//   mo_tool_tokenizer_export to-gguf-kv tokenizer.json [tokenizer_config.json] [--vocab-size N]
//       prints the GGUF keys as a JSON list of {"key", "type", "elem_type"?, "value"}
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/tokenizer/tokenizer_export.h"

namespace {

using mo::gguf::Value;
using mo::gguf::ValueType;
using nlohmann::json;

json value_json(const Value& v) {
  switch (v.type) {
    case ValueType::string: return v.as_string();
    case ValueType::boolean: return v.as_bool();
    case ValueType::f32:
    case ValueType::f64: return v.as_number();
    case ValueType::array: {
      json out = json::array();
      for (const auto& e : v.as_array()) out.push_back(value_json(e));
      return out;
    }
    default: return v.as_int();
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: mo_tool_tokenizer_export to-hf FILE.gguf OUTDIR\n"
               "       mo_tool_tokenizer_export to-gguf-kv tokenizer.json [tokenizer_config.json] [--vocab-size N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 3 && args[0] == "to-hf") {
      const auto file = mo::gguf::read_metadata(args[1]);
      mo::tok::write_hf_tokenizer_files(mo::tok::hf_tokenizer_from_gguf(file), args[2]);
      return 0;
    }
    if (!args.empty() && args[0] == "to-gguf-kv") {
      std::vector<std::string> files;
      std::int64_t vocab_size = 0;
      for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--vocab-size" && i + 1 < args.size()) {
          vocab_size = std::stoll(args[++i]);
        } else {
          files.push_back(args[i]);
        }
      }
      if (files.empty() || files.size() > 2) return usage();
      const json tokenizer = mo::io::read_json(files[0]);
      const json config = files.size() > 1 ? mo::io::read_json(files[1]) : json(nullptr);
      json out = json::array();
      for (const auto& [key, value] : mo::tok::gguf_tokenizer_kv_from_hf(tokenizer, config, vocab_size)) {
        json entry = {{"key", key}, {"type", mo::gguf::type_name(value.type)}, {"value", value_json(value)}};
        if (value.type == ValueType::array) entry["elem_type"] = mo::gguf::type_name(value.elem_type);
        out.push_back(std::move(entry));
      }
      std::cout << out.dump(-1, ' ', false) << "\n";
      return 0;
    }
  } catch (const mo::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return usage();
}
