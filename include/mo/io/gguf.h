#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

// GGUF (llama.cpp's model file): header, key/value pairs, tensor descriptions and raw tensor bytes.
// Decoding tensor data to f32 is in mo/io/gguf_dequant.h; writing files in mo/io/gguf_writer.h.
namespace mo {
class MappedFile;
}

namespace mo::gguf {

// On-disk value type ids (gguf.h `enum gguf_type`).
enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

// "u8", "i32", "f32", "bool", "string", "array", ...; "type <n>" for ids outside the enum.
std::string type_name(ValueType type);

struct Value {
  ValueType type = ValueType::u8;
  ValueType elem_type = ValueType::u8;  // element type; meaningful only when type == array
  // Unsigned ints as uint64_t, signed ints as int64_t, f32/f64 as double.
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> data;

  // Typed constructors, e.g. Value::u32(2), Value::str("llama"), Value::array_of_strings(tokens).
  static Value u8(uint8_t v);
  static Value i8(int8_t v);
  static Value u16(uint16_t v);
  static Value i16(int16_t v);
  static Value u32(uint32_t v);
  static Value i32(int32_t v);
  static Value u64(uint64_t v);
  static Value i64(int64_t v);
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v);
  static Value str(std::string v);
  // An array whose elements all have type `elem_type` (arrays may nest, each inner array with its
  // own element type). Throws Error naming the first element of another type.
  static Value array(ValueType elem_type, std::vector<Value> elems);
  static Value array_of_strings(const std::vector<std::string>& v);
  static Value array_of_f32(std::span<const float> v);
  static Value array_of_i32(std::span<const int32_t> v);
  static Value array_of_u32(std::span<const uint32_t> v);

  // Same type, element type and value (f32/f64 compared as doubles, so NaN != NaN).
  bool operator==(const Value& other) const = default;

  bool is_int() const;
  // Any integer type. Throws Error on other types and on a u64 above INT64_MAX.
  int64_t as_int() const;
  // Integers or floats.
  double as_number() const;
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // elements per dimension; ne[0] is the row length (`in` of [out, in])
  uint32_t type = 0;         // ggml type id, see mo/formats/ggml_types.h
  uint64_t offset = 0;       // bytes, relative to File::data_offset

  uint64_t n_elements() const;
  // Bytes of tensor data; throws Error for a type ggml_type_info does not know.
  uint64_t n_bytes() const;
};

struct File {
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = 32;                              // bytes; general.alignment or the default
  uint64_t data_offset = 0;                             // bytes from the start of the file to the tensor data section
  std::vector<std::pair<std::string, Value>> metadata;  // in file order
  std::vector<TensorInfo> tensors;                      // in file order
  // The mapped file, shared by copies of this File; null for a File assembled by hand.
  std::shared_ptr<const MappedFile> mapping;

  const Value* find(std::string_view key) const;
  // The getters throw Error("<path>: metadata key '<key>' is missing") or name the key, its actual
  // type and the expected one. The _opt forms return nullopt only when the key is missing.
  int64_t get_int(std::string_view key) const;
  std::optional<int64_t> get_int_opt(std::string_view key) const;
  double get_number(std::string_view key) const;
  std::optional<double> get_number_opt(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;

  // The raw bytes of `tensor` (n_bytes() of them) inside the mapping; valid while any copy of this
  // File lives. Throws Error naming the file and tensor when there is no mapping or the bytes would
  // lie outside it (a TensorInfo edited or taken from another file).
  std::span<const uint8_t> tensor_bytes(const TensorInfo& tensor) const;
};

// Reads GGUF v2 or v3 metadata and keeps the file mapped (read-only, pages loaded on first touch) so
// tensor_bytes() works. Every tensor's data is checked to lie inside the file. Throws UsageError when
// the file cannot be opened and one Error per problem otherwise, naming the file, the key or tensor
// concerned and the byte offset.
File read_metadata(const std::string& path);

}  // namespace mo::gguf
