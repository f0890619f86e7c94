#include "mo/io/gguf_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "mo/core/error.h"
#include "mo/formats/ggml_types.h"

namespace mo::gguf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;  // bytes, GGUF_DEFAULT_ALIGNMENT
constexpr uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
constexpr std::size_t kMaxNameBytes = 63;   // GGML_MAX_NAME - 1: llama.cpp rejects longer tensor names
constexpr uint32_t kLastValueType = static_cast<uint32_t>(ValueType::f64);

uint64_t pad(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Little-endian serialisation of metadata values; every mismatch between a Value's declared type and
// what it holds is an error rather than a silently truncated number.
class Encoder {
 public:
  Encoder(const std::string& path, std::vector<uint8_t>& out) : path_(path), out_(out) {}

  // resize + memcpy rather than insert: GCC 12 reports false -Warray-bounds on small inserts.
  void bytes(const void* p, std::size_t n) {
    const std::size_t at = out_.size();
    out_.resize(at + n);
    if (n != 0) std::memcpy(out_.data() + at, p, n);
  }

  template <typename T>
  void raw(T v) {
    bytes(&v, sizeof(T));
  }

  void string(std::string_view s) {
    raw<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }

  void value(const Value& v, const std::string& key) {
    switch (v.type) {
      case ValueType::u8: raw(unsigned_as<uint8_t>(v, key)); return;
      case ValueType::u16: raw(unsigned_as<uint16_t>(v, key)); return;
      case ValueType::u32: raw(unsigned_as<uint32_t>(v, key)); return;
      case ValueType::u64: raw(unsigned_as<uint64_t>(v, key)); return;
      case ValueType::i8: raw(signed_as<int8_t>(v, key)); return;
      case ValueType::i16: raw(signed_as<int16_t>(v, key)); return;
      case ValueType::i32: raw(signed_as<int32_t>(v, key)); return;
      case ValueType::i64: raw(signed_as<int64_t>(v, key)); return;
      case ValueType::f32: raw(static_cast<float>(holds<double>(v, key))); return;
      case ValueType::f64: raw(holds<double>(v, key)); return;
      case ValueType::boolean: raw<uint8_t>(holds<bool>(v, key) ? 1 : 0); return;
      case ValueType::string: string(holds<std::string>(v, key)); return;
      case ValueType::array: array(v, key); return;
    }
    fail(key, fmt::format("unknown value type {}", static_cast<uint32_t>(v.type)));
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(fmt::format("{}: metadata key '{}': {}", path_, key, problem));
  }

  template <typename T>
  const T& holds(const Value& v, const std::string& key) const {
    const T* p = std::get_if<T>(&v.data);
    if (p == nullptr) fail(key, fmt::format("a {} value holds the wrong kind of data", type_name(v.type)));
    return *p;
  }

  template <typename T>
  T unsigned_as(const Value& v, const std::string& key) const {
    const uint64_t x = holds<uint64_t>(v, key);
    if (x > std::numeric_limits<T>::max()) fail(key, fmt::format("{} does not fit in {}", x, type_name(v.type)));
    return static_cast<T>(x);
  }

  template <typename T>
  T signed_as(const Value& v, const std::string& key) const {
    const int64_t x = holds<int64_t>(v, key);
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
      fail(key, fmt::format("{} does not fit in {}", x, type_name(v.type)));
    }
    return static_cast<T>(x);
  }

  void array(const Value& v, const std::string& key) {
    if (static_cast<uint32_t>(v.elem_type) > kLastValueType) {
      fail(key, fmt::format("unknown array element type {}", static_cast<uint32_t>(v.elem_type)));
    }
    const auto& elems = holds<std::vector<Value>>(v, key);
    raw(static_cast<uint32_t>(v.elem_type));
    raw<uint64_t>(elems.size());
    for (std::size_t i = 0; i < elems.size(); ++i) {
      if (elems[i].type != v.elem_type) {
        fail(key, fmt::format("element {} of an array of {} is {}", i, type_name(v.elem_type), type_name(elems[i].type)));
      }
      value(elems[i], key);
    }
  }

  const std::string& path_;
  std::vector<uint8_t>& out_;
};

// Closes the temporary file and removes it unless the write completed.
struct TempFile {
  std::string path;
  std::FILE* f = nullptr;
  bool keep = false;
  ~TempFile() {
    if (f != nullptr) std::fclose(f);
    if (!keep) std::remove(path.c_str());
  }
};

}  // namespace

Writer::Writer(std::string path, uint32_t version) : path_(std::move(path)), version_(version) {
  if (version_ != 2 && version_ != 3) {
    throw Error(fmt::format("{}: cannot write GGUF version {} (supported: 2, 3)", path_, version_));
  }
}

void Writer::set(std::string key, Value value) {
  if (key.empty()) throw Error(fmt::format("{}: metadata keys cannot be empty", path_));
  if (key == "general.alignment") {
    const uint64_t* a = std::get_if<uint64_t>(&value.data);
    if (value.type != ValueType::u32 || a == nullptr || *a == 0 || *a > UINT32_MAX || (*a & (*a - 1)) != 0) {
      throw Error(fmt::format("{}: metadata key 'general.alignment' must be a u32 power of two", path_));
    }
  }
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

bool Writer::remove(std::string_view key) {
  const auto it = std::find_if(metadata_.begin(), metadata_.end(), [&](const auto& kv) { return kv.first == key; });
  if (it == metadata_.end()) return false;
  metadata_.erase(it);
  return true;
}

const Value* Writer::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Writer::check_tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type, std::size_t n_bytes) const {
  const auto fail = [&](const std::string& problem) { throw Error(fmt::format("{}: tensor '{}': {}", path_, name, problem)); };
  if (name.empty()) fail("tensor names cannot be empty");
  if (name.size() > kMaxNameBytes) {
    fail(fmt::format("the name is {} bytes long; llama.cpp allows at most {}", name.size(), kMaxNameBytes));
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) fail("added twice");
  }
  if (ne.size() > kMaxDims) fail(fmt::format("{} dimensions (at most {})", ne.size(), kMaxDims));
  for (uint64_t n : ne) {
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(fmt::format("dimension {} above INT64_MAX", n));
    }
  }
  if (ggml_type_info(type) == nullptr) fail(fmt::format("unknown ggml type {}", type));
  TensorInfo info;
  info.ne = ne;
  info.type = type;
  uint64_t expected = 0;
  try {
    expected = info.n_bytes();
  } catch (const Error& e) {
    fail(e.what());
  }
  if (expected != n_bytes) {
    fail(fmt::format("{} bytes of data given, {} of type {} expected", n_bytes, expected, ggml_type_info(type)->name));
  }
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> ne, uint32_t type, std::span<const uint8_t> data) {
  check_tensor(name, ne, type, data.size());
  tensors_.push_back({std::move(name), std::move(ne), type, data, {}, false});
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t>&& data) {
  check_tensor(name, ne, type, data.size());
  tensors_.push_back({std::move(name), std::move(ne), type, {}, std::move(data), true});
}

uint64_t Writer::alignment() const {
  const Value* a = find("general.alignment");
  return a != nullptr ? std::get<uint64_t>(a->data) : kDefaultAlignment;
}

std::vector<uint8_t> Writer::header_bytes() const {
  std::vector<uint8_t> out;
  Encoder enc(path_, out);
  enc.bytes("GGUF", 4);
  enc.raw<uint32_t>(version_);
  enc.raw<uint64_t>(tensors_.size());
  enc.raw<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    enc.string(key);
    enc.raw(static_cast<uint32_t>(value.type));
    enc.value(value, key);
  }
  const uint64_t align = alignment();
  uint64_t offset = 0;  // bytes from the start of the data section
  for (const Tensor& t : tensors_) {
    enc.string(t.name);
    enc.raw(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) enc.raw(n);
    enc.raw(t.type);
    enc.raw(offset);
    offset += pad(t.bytes().size(), align);
  }
  out.resize(pad(out.size(), align), 0);
  return out;
}

void Writer::write() const {
  const std::vector<uint8_t> header = header_bytes();
  const uint64_t align = alignment();

  TempFile tmp{fmt::format("{}.tmp-{}", path_, ::getpid())};
  const auto io_fail = [&](const char* what) {
    throw Error(fmt::format("{}: cannot {} {}: {}", path_, what, tmp.path, std::strerror(errno)));
  };
  tmp.f = std::fopen(tmp.path.c_str(), "wb");
  if (tmp.f == nullptr) io_fail("create");
  const auto put = [&](const uint8_t* p, std::size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, tmp.f) != n) io_fail("write");
  };
  put(header.data(), header.size());
  const std::vector<uint8_t> zeros(align, 0);
  for (const Tensor& t : tensors_) {
    const std::span<const uint8_t> bytes = t.bytes();
    put(bytes.data(), bytes.size());
    put(zeros.data(), pad(bytes.size(), align) - bytes.size());
  }
  const int rc = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (rc != 0) io_fail("write");
  if (std::rename(tmp.path.c_str(), path_.c_str()) != 0) {
    throw Error(fmt::format("{}: cannot rename {} to it: {}", path_, tmp.path, std::strerror(errno)));
  }
  tmp.keep = true;
}

}  // namespace mo::gguf
