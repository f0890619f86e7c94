#include "mo/io/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <unordered_set>

#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/core/mapped_file.h"
#include "mo/formats/ggml_types.h"

namespace mo::gguf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;  // bytes, GGUF_DEFAULT_ALIGNMENT
constexpr uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
// llama.cpp rejects nested arrays; the GGUF spec allows them and gguf-py reads them, so we do too,
// but bound the recursion so a crafted file cannot exhaust the stack.
constexpr int kMaxArrayDepth = 8;
// Smallest possible metadata entry (empty key length, type, 1-byte value) and tensor info (name
// length, n_dims = 0, type, offset), in bytes: used to reject impossible counts before reserving.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr uint32_t kLastValueType = static_cast<uint32_t>(ValueType::f64);
// Counts are only bounded by the bytes left, and a Value takes ~50 bytes for each 1-byte element, so
// containers grow with what is actually parsed instead of being reserved to a declared count.
constexpr uint64_t kMaxReserve = 1 << 16;

// Smallest encoding of one value, in bytes; an array count above remaining / this is impossible.
uint64_t min_encoded_size(ValueType type) {
  switch (type) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean: return 1;
    case ValueType::u16:
    case ValueType::i16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    // A string is at least its u64 length.
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
    case ValueType::string: return 8;
    case ValueType::array: return 4 + 8;
  }
  return 1;
}

std::string describe(const Value& v) {
  if (v.type != ValueType::array) return type_name(v.type);
  return "array of " + type_name(v.elem_type);
}

std::string describe_array(ValueType elem, uint64_t count) {
  const char* noun = elem == ValueType::string ? "strings" : elem == ValueType::array ? "arrays" : nullptr;
  return noun ? fmt::format("array of {} {}", count, noun) : fmt::format("array of {} {}", count, type_name(elem));
}

[[noreturn]] void type_mismatch(const Value& v, const char* expected) {
  throw Error(fmt::format("expected {}, got {}", expected, describe(v)));
}

std::string printable_magic(const uint8_t* p) {
  std::string out;
  for (int i = 0; i < 4; ++i) {
    const unsigned char c = p[i];
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return out;
}

class Parser {
 public:
  Parser(const std::string& path, const uint8_t* data, std::size_t size) : path_(path), data_(data), size_(size) {}

  File parse() {
    File file;
    file.path = path_;
    file.alignment = kDefaultAlignment;
    try {
      read_header(file);
      read_metadata_entries(file);
      read_tensor_infos(file);
    } catch (const std::bad_alloc&) {
      fail(fmt::format("out of memory at offset {} while reading the metadata", pos_));
    }
    check_tensor_data(file);
    return file;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw Error(path_ + ": " + message); }

  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > remaining()) fail(fmt::format("truncated at offset {} while reading {}", pos_, what));
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    const uint64_t at = pos_;
    const auto len = read<uint64_t>(what);
    if (len > remaining()) {
      fail(fmt::format("truncated at offset {} while reading {}: string length {} exceeds the {} bytes left", at, what, len, remaining()));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(len));
    pos_ += len;
    return s;
  }

  void read_header(File& file) {
    if (size_ >= 4 && std::memcmp(data_, "GGUF", 4) != 0) {
      fail(fmt::format("not a GGUF file (magic '{}' at offset 0)", printable_magic(data_)));
    }
    need(4, "the magic");
    pos_ = 4;
    file.version = read<uint32_t>("the version");
    // A file written on a big-endian host reads as e.g. 0x03000000 here.
    if (file.version != 0 && (file.version & 0xFFFF) == 0) {
      fail(fmt::format("GGUF version {:#x} at offset 4 looks byte-swapped; big-endian files are not supported", file.version));
    }
    if (file.version == 1) fail("GGUF v1 files are not supported (offset 4); re-convert with a current llama.cpp");
    if (file.version != 2 && file.version != 3) {
      fail(fmt::format("unsupported GGUF version {} at offset 4 (supported: 2, 3)", file.version));
    }
    n_tensors_ = read<uint64_t>("the tensor count");
    n_kv_ = read<uint64_t>("the metadata key count");
    if (n_tensors_ > remaining() / kMinTensorInfoBytes || n_kv_ > remaining() / kMinKvBytes ||
        n_tensors_ * kMinTensorInfoBytes + n_kv_ * kMinKvBytes > remaining()) {
      fail(
          fmt::format("header at offset 8 declares {} tensors and {} metadata keys, more than the {} bytes left "
                      "can hold",
                      n_tensors_, n_kv_, remaining()));
    }
  }

  void read_metadata_entries(File& file) {
    file.metadata.reserve(std::min(n_kv_, kMaxReserve));
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_kv_; ++i) {
      const uint64_t key_at = pos_;
      std::string key = read_string(fmt::format("the key of metadata entry {}", i));
      if (key.empty()) fail(fmt::format("metadata entry {} at offset {} has an empty key", i, key_at));
      if (!seen.insert(key).second) fail(fmt::format("duplicate metadata key '{}' at offset {}", shown_name(key), key_at));

      const uint64_t type_at = pos_;
      const auto type = read<uint32_t>(fmt::format("the type of key '{}'", shown_name(key)));
      Value value = read_value(checked_type(type, key, type_at), key, 0, fmt::format("the value of key '{}'", shown_name(key)));
      if (key == "general.alignment") file.alignment = checked_alignment(value, key_at);
      file.metadata.emplace_back(std::move(key), std::move(value));
    }
  }

  ValueType checked_type(uint32_t type, const std::string& key, uint64_t at) const {
    if (type > kLastValueType) {
      fail(fmt::format("key '{}' has unknown value type {} at offset {}", shown_name(key), type, at));
    }
    return static_cast<ValueType>(type);
  }

  // llama.cpp requires general.alignment to be a u32 power of two; anything else would misplace
  // every tensor.
  uint64_t checked_alignment(const Value& v, uint64_t at) const {
    if (v.type != ValueType::u32) {
      fail(fmt::format("key 'general.alignment' at offset {} is {}, expected u32", at, describe(v)));
    }
    const uint64_t a = std::get<uint64_t>(v.data);
    if (a == 0 || (a & (a - 1)) != 0) {
      fail(fmt::format("key 'general.alignment' at offset {} is {}, not a power of two", at, a));
    }
    return a;
  }

  Value read_value(ValueType type, const std::string& key, int depth, const std::string& what) {
    Value v;
    v.type = type;
    v.elem_type = type;
    switch (type) {
      case ValueType::u8: v.data = uint64_t{read<uint8_t>(what)}; break;
      case ValueType::i8: v.data = int64_t{read<int8_t>(what)}; break;
      case ValueType::u16: v.data = uint64_t{read<uint16_t>(what)}; break;
      case ValueType::i16: v.data = int64_t{read<int16_t>(what)}; break;
      case ValueType::u32: v.data = uint64_t{read<uint32_t>(what)}; break;
      case ValueType::i32: v.data = int64_t{read<int32_t>(what)}; break;
      case ValueType::u64: v.data = read<uint64_t>(what); break;
      case ValueType::i64: v.data = read<int64_t>(what); break;
      case ValueType::f32: v.data = double{read<float>(what)}; break;
      case ValueType::f64: v.data = read<double>(what); break;
      // Like llama.cpp, any non-zero byte is true.
      case ValueType::boolean: v.data = read<uint8_t>(what) != 0; break;
      case ValueType::string: v.data = read_string(what); break;
      case ValueType::array: read_array(v, key, depth, what); break;
    }
    return v;
  }

  void read_array(Value& v, const std::string& key, int depth, const std::string& what) {
    if (depth >= kMaxArrayDepth) {
      fail(fmt::format("key '{}' nests arrays more than {} deep at offset {}", shown_name(key), kMaxArrayDepth, pos_));
    }
    const uint64_t elem_at = pos_;
    v.elem_type = checked_type(read<uint32_t>(what), key, elem_at);
    const uint64_t count_at = pos_;
    const auto count = read<uint64_t>(what);
    const std::string elems_what = fmt::format("the value of key '{}' ({})", shown_name(key), describe_array(v.elem_type, count));
    if (count > remaining() / min_encoded_size(v.elem_type)) {
      fail(fmt::format("truncated at offset {} while reading {}: {} elements cannot fit in the {} bytes left", count_at, elems_what, count,
                       remaining()));
    }
    std::vector<Value> elems;
    elems.reserve(std::min(count, kMaxReserve));
    for (uint64_t i = 0; i < count; ++i) elems.push_back(read_value(v.elem_type, key, depth + 1, elems_what));
    v.data = std::move(elems);
  }

  void read_tensor_infos(File& file) {
    file.tensors.reserve(std::min(n_tensors_, kMaxReserve));
    info_offsets_.reserve(std::min(n_tensors_, kMaxReserve));
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const uint64_t info_at = pos_;
      TensorInfo t;
      t.name = read_string(fmt::format("the name of tensor {}", i));
      if (!seen.insert(t.name).second) {
        fail(fmt::format("duplicate tensor name '{}' at offset {}", shown_name(t.name), info_at));
      }
      const std::string what = fmt::format("the info of tensor '{}'", shown_name(t.name));

      const uint64_t dims_at = pos_;
      const auto n_dims = read<uint32_t>(what);
      if (n_dims > kMaxDims) {
        fail(fmt::format("tensor '{}' has {} dimensions at offset {} (at most {})", shown_name(t.name), n_dims, dims_at, kMaxDims));
      }
      read_shape(t, n_dims, what);

      const uint64_t type_at = pos_;
      t.type = read<uint32_t>(what);
      check_tensor_type(t, type_at);
      info_offsets_.push_back(pos_);
      t.offset = read<uint64_t>(what);
      file.tensors.push_back(std::move(t));
    }
  }

  void read_shape(TensorInfo& t, uint32_t n_dims, const std::string& what) {
    // llama.cpp stores ne as int64_t and needs the element count to stay below INT64_MAX.
    constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
    uint64_t n_elements = 1;
    bool zero = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t at = pos_;
      const auto ne = read<uint64_t>(what);
      if (ne > kMax) {
        fail(fmt::format("tensor '{}' dimension {} is {} at offset {}, above INT64_MAX", shown_name(t.name), d, ne, at));
      }
      zero = zero || ne == 0;
      if (!zero && ne > 1 && n_elements > kMax / ne) {
        fail(fmt::format("tensor '{}' has more than INT64_MAX elements (dimension {} at offset {})", shown_name(t.name), d, at));
      }
      if (!zero) n_elements *= ne;
      t.ne.push_back(ne);
    }
  }

  void check_tensor_type(const TensorInfo& t, uint64_t at) const {
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    if (info == nullptr) {
      fail(fmt::format("tensor '{}' has unknown ggml type {} at offset {}", shown_name(t.name), t.type, at));
    }
    const uint64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % info->block_size != 0) {
      fail(
          fmt::format("tensor '{}' of type {} at offset {} has rows of {} weights, not a multiple of its block "
                      "size {}",
                      shown_name(t.name), info->name, at, row, info->block_size));
    }
    const uint64_t blocks = t.n_elements() / info->block_size;
    if (blocks > std::numeric_limits<uint64_t>::max() / info->type_size) {
      fail(fmt::format("tensor '{}' at offset {} is too large: its size in bytes overflows 64 bits", shown_name(t.name), at));
    }
  }

  void check_tensor_data(File& file) {
    // The data section starts at the next alignment boundary, as llama.cpp pads it.
    file.data_offset = pos_;
    if (!file.tensors.empty()) file.data_offset = (pos_ + file.alignment - 1) / file.alignment * file.alignment;
    if (file.data_offset > size_) {
      fail(fmt::format("truncated at offset {} while reading the padding before the tensor data (due at offset {})", size_,
                       file.data_offset));
    }
    const uint64_t data_size = size_ - file.data_offset;
    for (std::size_t i = 0; i < file.tensors.size(); ++i) {
      const TensorInfo& t = file.tensors[i];
      if (t.offset % file.alignment != 0) {
        fail(fmt::format("tensor '{}' has data offset {} at offset {}, not a multiple of the alignment {}", shown_name(t.name), t.offset,
                         info_offsets_[i], file.alignment));
      }
      const uint64_t n = t.n_bytes();
      if (t.offset > data_size || n > data_size - t.offset) {
        fail(
            fmt::format("tensor '{}' (offset field at offset {}) has {} bytes of data at data offset {}, past the end "
                        "of the file ({} bytes, data section from offset {})",
                        shown_name(t.name), info_offsets_[i], n, t.offset, size_, file.data_offset));
      }
    }
    check_overlaps(file);
  }

  void check_overlaps(const File& file) const {
    std::vector<std::size_t> order(file.tensors.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return file.tensors[a].offset < file.tensors[b].offset; });
    const TensorInfo* prev = nullptr;
    for (std::size_t i : order) {
      const TensorInfo& t = file.tensors[i];
      if (t.n_bytes() == 0) continue;
      if (prev != nullptr && t.offset < prev->offset + prev->n_bytes()) {
        fail(
            fmt::format("tensors '{}' and '{}' overlap: data offsets [{}, {}) and [{}, {}) (offset field of '{}' at "
                        "offset {})",
                        shown_name(prev->name), shown_name(t.name), prev->offset, prev->offset + prev->n_bytes(), t.offset,
                        t.offset + t.n_bytes(), shown_name(t.name), info_offsets_[i]));
      }
      prev = &t;
    }
  }

  const std::string& path_;
  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::vector<uint64_t> info_offsets_;  // file offset of each tensor's offset field
};

}  // namespace

std::string type_name(ValueType type) {
  switch (type) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

Value Value::u8(uint8_t v) { return {ValueType::u8, ValueType::u8, uint64_t{v}}; }
Value Value::i8(int8_t v) { return {ValueType::i8, ValueType::i8, int64_t{v}}; }
Value Value::u16(uint16_t v) { return {ValueType::u16, ValueType::u16, uint64_t{v}}; }
Value Value::i16(int16_t v) { return {ValueType::i16, ValueType::i16, int64_t{v}}; }
Value Value::u32(uint32_t v) { return {ValueType::u32, ValueType::u32, uint64_t{v}}; }
Value Value::i32(int32_t v) { return {ValueType::i32, ValueType::i32, int64_t{v}}; }
Value Value::u64(uint64_t v) { return {ValueType::u64, ValueType::u64, v}; }
Value Value::i64(int64_t v) { return {ValueType::i64, ValueType::i64, v}; }
Value Value::f32(float v) { return {ValueType::f32, ValueType::f32, double{v}}; }
Value Value::f64(double v) { return {ValueType::f64, ValueType::f64, v}; }
Value Value::boolean(bool v) { return {ValueType::boolean, ValueType::boolean, v}; }
Value Value::str(std::string v) { return {ValueType::string, ValueType::string, std::move(v)}; }

Value Value::array(ValueType elem_type, std::vector<Value> elems) {
  for (std::size_t i = 0; i < elems.size(); ++i) {
    if (elems[i].type != elem_type) {
      throw Error(fmt::format("array of {}: element {} is {}", type_name(elem_type), i, describe(elems[i])));
    }
  }
  return {ValueType::array, elem_type, std::move(elems)};
}

namespace {

template <typename T, typename Make>
Value array_of(ValueType elem_type, std::span<const T> v, Make make) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const T& x : v) elems.push_back(make(x));
  return {ValueType::array, elem_type, std::move(elems)};
}

}  // namespace

Value Value::array_of_strings(const std::vector<std::string>& v) {
  return array_of(ValueType::string, std::span<const std::string>(v), [](const std::string& s) { return str(s); });
}
Value Value::array_of_f32(std::span<const float> v) { return array_of(ValueType::f32, v, f32); }
Value Value::array_of_i32(std::span<const int32_t> v) { return array_of(ValueType::i32, v, i32); }
Value Value::array_of_u32(std::span<const uint32_t> v) { return array_of(ValueType::u32, v, u32); }

bool Value::is_int() const { return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data); }

int64_t Value::as_int() const {
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  const auto* u = std::get_if<uint64_t>(&data);
  if (u == nullptr) type_mismatch(*this, "an integer");
  if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(fmt::format("{} value {} does not fit in int64", describe(*this), *u));
  }
  return static_cast<int64_t>(*u);
}

double Value::as_number() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  type_mismatch(*this, "a number");
}

bool Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  type_mismatch(*this, "bool");
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&data)) return *s;
  type_mismatch(*this, "string");
}

const std::vector<Value>& Value::as_array() const {
  if (const auto* a = std::get_if<std::vector<Value>>(&data)) return *a;
  type_mismatch(*this, "array");
}

uint64_t TensorInfo::n_elements() const { return std::accumulate(ne.begin(), ne.end(), uint64_t{1}, std::multiplies<>()); }

uint64_t TensorInfo::n_bytes() const {
  if (ne.empty()) return ggml_row_bytes(type, 1);
  const uint64_t rows = std::accumulate(ne.begin() + 1, ne.end(), uint64_t{1}, std::multiplies<>());
  return ggml_row_bytes(type, ne[0]) * rows;
}

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

const Value& require(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (v == nullptr) throw Error(fmt::format("{}: metadata key '{}' is missing", f.path, key));
  return *v;
}

// Runs an accessor, prefixing its type-mismatch message with the file and key.
template <typename Fn>
auto with_key(const File& f, std::string_view key, const Value& v, Fn fn) {
  try {
    return fn(v);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: metadata key '{}': {}", f.path, key, e.what()));
  }
}

}  // namespace

int64_t File::get_int(std::string_view key) const {
  return with_key(*this, key, require(*this, key), [](const Value& v) { return v.as_int(); });
}

std::optional<int64_t> File::get_int_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return with_key(*this, key, *v, [](const Value& x) { return x.as_int(); });
}

double File::get_number(std::string_view key) const {
  return with_key(*this, key, require(*this, key), [](const Value& v) { return v.as_number(); });
}

std::optional<double> File::get_number_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return with_key(*this, key, *v, [](const Value& x) { return x.as_number(); });
}

std::string File::get_string(std::string_view key) const {
  return with_key(*this, key, require(*this, key), [](const Value& v) { return v.as_string(); });
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::span<const uint8_t> File::tensor_bytes(const TensorInfo& tensor) const {
  if (mapping == nullptr) {
    throw Error(fmt::format("{}: tensor '{}': the file is not mapped", path, shown_name(tensor.name)));
  }
  uint64_t n = 0;
  try {
    n = tensor.n_bytes();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: tensor '{}': {}", path, shown_name(tensor.name), e.what()));
  }
  const uint64_t size = mapping->size();
  if (data_offset > size || tensor.offset > size - data_offset || n > size - data_offset - tensor.offset) {
    throw Error(
        fmt::format("{}: tensor '{}' has {} bytes of data at data offset {}, outside the file ({} bytes, data "
                    "section from offset {})",
                    path, shown_name(tensor.name), n, tensor.offset, size, data_offset));
  }
  return {mapping->data() + data_offset + tensor.offset, static_cast<std::size_t>(n)};
}

File read_metadata(const std::string& path) {
  auto mapped = std::make_shared<const MappedFile>(path);
  File file = Parser(path, mapped->data(), mapped->size()).parse();
  file.mapping = std::move(mapped);
  return file;
}

}  // namespace mo::gguf
