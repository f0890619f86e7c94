// GGUF dequantization and writing with mo::gguf, for tests/python/test_gguf_reference.py.
//   mo_tool_gguf_dequant blocks TYPE IN.bin OUT.f32     raw blocks of TYPE (name or id) -> f32
//   mo_tool_gguf_dequant tensor FILE.gguf NAME OUT.f32  one tensor of a GGUF file -> f32
//   mo_tool_gguf_dequant write SPEC.json OUT.gguf       a GGUF file from a spec (below)
//   mo_tool_gguf_dequant rewrite IN.gguf OUT.gguf       read a file and write its metadata and tensors back
// f32 output is little-endian, in file order. SPEC: {"version": 3, "kv": [KV], "tensors": [{"name",
// "ne": [..], "type": name or id, "data": path of the raw bytes}]}, KV = {"key", "type", "value"} with
// "type" one of u8 i8 u16 i16 u32 i32 f32 bool string array u64 i64 f64; an array value is
// {"elem": type, "values": [..]}, each element of an array of arrays again {"elem", "values"}.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/io/gguf_dequant.h"
#include "mo/io/gguf_writer.h"
#include "mo/io/json_file.h"

namespace {

using mo::gguf::Value;
using mo::gguf::ValueType;

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw mo::UsageError(path + ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) throw mo::Error(path + ": cannot write");
}

// A ggml type given by name ("q4_K") or id (12, or "12" on the command line).
std::uint32_t ggml_type(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint32_t>();
  const std::string s = j.get<std::string>();
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return std::stoul(s);
  const auto id = mo::ggml_type_from_name(s);
  if (!id) throw mo::UsageError("unknown ggml type '" + s + "'");
  return *id;
}

ValueType value_type(const std::string& name) {
  for (std::uint32_t t = 0; t <= static_cast<std::uint32_t>(ValueType::f64); ++t) {
    if (mo::gguf::type_name(static_cast<ValueType>(t)) == name) return static_cast<ValueType>(t);
  }
  throw mo::UsageError("unknown value type '" + name + "'");
}

Value make_value(ValueType type, const nlohmann::json& j) {
  switch (type) {
    case ValueType::u8: return Value::u8(j.get<std::uint8_t>());
    case ValueType::i8: return Value::i8(j.get<std::int8_t>());
    case ValueType::u16: return Value::u16(j.get<std::uint16_t>());
    case ValueType::i16: return Value::i16(j.get<std::int16_t>());
    case ValueType::u32: return Value::u32(j.get<std::uint32_t>());
    case ValueType::i32: return Value::i32(j.get<std::int32_t>());
    case ValueType::u64: return Value::u64(j.get<std::uint64_t>());
    case ValueType::i64: return Value::i64(j.get<std::int64_t>());
    case ValueType::f32: return Value::f32(j.get<float>());
    case ValueType::f64: return Value::f64(j.get<double>());
    case ValueType::boolean: return Value::boolean(j.get<bool>());
    case ValueType::string: return Value::str(j.get<std::string>());
    case ValueType::array: {
      const ValueType elem = value_type(j.at("elem").get<std::string>());
      std::vector<Value> elems;
      for (const nlohmann::json& e : j.at("values")) elems.push_back(make_value(elem, e));
      return Value::array(elem, std::move(elems));
    }
  }
  throw mo::UsageError("unknown value type");
}

int run(const std::vector<std::string>& args) {
  const std::string& cmd = args[0];
  if (cmd == "blocks" && args.size() == 4) {
    const std::uint32_t type = ggml_type(nlohmann::json(args[1]));
    const mo::GgmlTypeInfo* info = mo::ggml_type_info(type);
    if (info == nullptr) throw mo::UsageError("unknown ggml type " + args[1]);
    const std::vector<std::uint8_t> in = read_bytes(args[2]);
    if (in.size() % info->type_size != 0) throw mo::UsageError(args[2] + ": not a whole number of blocks");
    std::vector<float> out(in.size() / info->type_size * info->block_size);
    mo::gguf::dequantize_row(type, in.data(), out.data(), static_cast<std::int64_t>(out.size()));
    write_floats(args[3], out);
    return 0;
  }
  if (cmd == "tensor" && args.size() == 4) {
    const mo::gguf::File f = mo::gguf::read_metadata(args[1]);
    const mo::gguf::TensorInfo* t = f.find_tensor(args[2]);
    if (t == nullptr) throw mo::UsageError(args[1] + ": no tensor '" + args[2] + "'");
    write_floats(args[3], mo::gguf::dequantize(f, *t));
    return 0;
  }
  if (cmd == "write" && args.size() == 3) {
    const nlohmann::json spec = mo::io::read_json(args[1]);
    mo::gguf::Writer w(args[2], spec.value("version", 3u));
    for (const nlohmann::json& kv : spec.at("kv")) {
      w.set(kv.at("key").get<std::string>(), make_value(value_type(kv.at("type").get<std::string>()), kv.at("value")));
    }
    for (const nlohmann::json& t : spec.value("tensors", nlohmann::json::array())) {
      w.add_tensor(t.at("name").get<std::string>(), t.at("ne").get<std::vector<std::uint64_t>>(), ggml_type(t.at("type")),
                   read_bytes(t.at("data").get<std::string>()));
    }
    w.write();
    return 0;
  }
  if (cmd == "rewrite" && args.size() == 3) {
    const mo::gguf::File f = mo::gguf::read_metadata(args[1]);
    mo::gguf::Writer w(args[2], f.version);
    for (const auto& [key, value] : f.metadata) w.set(key, value);
    for (const mo::gguf::TensorInfo& t : f.tensors) w.add_tensor(t.name, t.ne, t.type, f.tensor_bytes(t));
    w.write();
    return 0;
  }
  std::cerr << "usage: mo_tool_gguf_dequant blocks TYPE IN OUT | tensor FILE NAME OUT | write SPEC OUT | "
               "rewrite IN OUT\n";
  return mo::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return run({""});
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const mo::UsageError& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return mo::kExitRuntime;
  }
}
