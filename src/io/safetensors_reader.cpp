#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include "mo/core/error.h"
#include "mo/io/safetensors.h"
#include "safetensors_json.h"

namespace mo::st {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// The reference (Rust crate, safetensors/src/tensor.rs) rejects longer headers as HeaderTooLarge.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::size_t kLengthBytes = 8;

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  std::size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    // clang-format off
    {Dtype::F64, "F64", 8},         {Dtype::F32, "F32", 4},         {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},       {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::I64, "I64", 8},         {Dtype::I32, "I32", 4},         {Dtype::I16, "I16", 2},
    {Dtype::I8, "I8", 1},           {Dtype::U8, "U8", 1},           {Dtype::BOOL, "BOOL", 1},
    {Dtype::U64, "U64", 8},         {Dtype::U32, "U32", 4},         {Dtype::U16, "U16", 2},
    // clang-format on
};

const DtypeInfo& info(Dtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  throw Error(fmt::format("safetensors: invalid dtype value {}", static_cast<int>(dtype)));
}

// One header entry as read, before the data section is checked.
struct Entry {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;
  std::size_t at = 0;  // file offset of the entry's key
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, std::string_view text) : json_(path, text, kLengthBytes) {}

  void parse(std::vector<Entry>& entries, std::map<std::string, std::string>& metadata) {
    json_.expect('{', "'{' (a JSON object)", "header");
    std::set<std::string, std::less<>> names;
    bool seen_metadata = false;
    if (json_.consume('}')) return json_.expect_end();
    while (true) {
      const std::size_t key_at = json_.offset();
      std::string key = json_.read_string("header key");
      json_.expect(':', "':'", fmt::format("header key {}", detail::quote(key)));
      if (key == "__metadata__") {
        if (seen_metadata) json_.fail(key_at, "duplicate key '__metadata__'");
        seen_metadata = true;
        read_metadata(metadata);
      } else {
        if (!names.insert(key).second) json_.fail(key_at, fmt::format("duplicate tensor {}", detail::quote(key)));
        entries.push_back(read_entry(std::move(key), key_at));
      }
      if (json_.consume(',')) continue;
      json_.expect('}', "',' or '}'", "header");
      return json_.expect_end();
    }
  }

 private:
  void read_metadata(std::map<std::string, std::string>& metadata) {
    if (json_.peek() == 'n') return json_.read_null("__metadata__");
    json_.expect('{', "an object of strings", "__metadata__");
    if (json_.consume('}')) return;
    while (true) {
      const std::size_t key_at = json_.offset();
      std::string key = json_.read_string("__metadata__ key");
      const std::string context = fmt::format("__metadata__ key {}", detail::quote(key));
      json_.expect(':', "':'", context);
      if (metadata.contains(key)) json_.fail(key_at, fmt::format("duplicate __metadata__ key {}", detail::quote(key)));
      metadata.emplace(std::move(key), json_.read_string(context));
      if (json_.consume(',')) continue;
      return json_.expect('}', "',' or '}'", "__metadata__");
    }
  }

  Entry read_entry(std::string name, std::size_t key_at) {
    Entry e;
    e.name = std::move(name);
    e.at = key_at;
    const std::string context = fmt::format("tensor {}", detail::quote(e.name));
    json_.expect('{', "an object with dtype, shape and data_offsets", context);
    bool has_dtype = false, has_shape = false, has_offsets = false;
    if (!json_.consume('}')) {
      while (true) {
        const std::size_t field_at = json_.offset();
        const std::string field = json_.read_string(context + " field name");
        const bool known = field == "dtype" || field == "shape" || field == "data_offsets";
        const std::string where = context + (known ? " " + field : " field " + detail::quote(field));
        json_.expect(':', "':'", where);
        auto once = [&](bool& seen) {
          if (seen) json_.fail(field_at, fmt::format("{}: duplicate field {}", context, detail::quote(field)));
          seen = true;
        };
        if (field == "dtype") {
          once(has_dtype);
          const std::size_t at = json_.offset();
          const std::string dtype = json_.read_string(where);
          const auto d = dtype_from_name(dtype);
          if (!d) json_.fail(at, fmt::format("{}: unknown or unsupported dtype {}", context, detail::quote(dtype)));
          e.dtype = *d;
        } else if (field == "shape") {
          once(has_shape);
          json_.expect('[', "an array of integers", where);
          if (!json_.consume(']')) {
            do {
              e.shape.push_back(json_.read_uint(where));
            } while (json_.consume(','));
            json_.expect(']', "',' or ']'", where);
          }
        } else if (field == "data_offsets") {
          once(has_offsets);
          json_.expect('[', "an array of 2 integers", where);
          e.begin = json_.read_uint(where);
          json_.expect(',', "',' (an array of 2 integers)", where);
          e.end = json_.read_uint(where);
          json_.expect(']', "']' (an array of 2 integers)", where);
        } else {
          json_.skip_value(2, where);  // the reference ignores unknown fields
        }
        if (json_.consume(',')) continue;
        json_.expect('}', "',' or '}'", context);
        break;
      }
    }
    const char* missing = !has_dtype ? "dtype" : !has_shape ? "shape" : !has_offsets ? "data_offsets" : nullptr;
    if (missing != nullptr) json_.fail(key_at, fmt::format("{} has no '{}'", context, missing));
    return e;
  }

  detail::JsonCursor json_;
};

}  // namespace

const char* dtype_name(Dtype dtype) { return info(dtype).name; }

std::size_t dtype_size(Dtype dtype) { return info(dtype).size; }

std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

std::int64_t TensorView::numel() const { return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()); }

File File::open(const std::string& path) {
  File file{MappedFile(path)};
  const std::uint8_t* base = file.mapped_.data();
  const std::size_t size = file.mapped_.size();
  auto fail = [&](const std::string& message) -> void { throw Error(path + ": " + message); };

  if (size < kLengthBytes) fail(fmt::format("file is {} bytes, too short for the 8-byte header length", size));
  std::uint64_t n = 0;
  std::memcpy(&n, base, kLengthBytes);
  if (n > kMaxHeaderBytes) {
    fail(fmt::format("header length {} at offset 0 is above the limit of {} bytes", n, kMaxHeaderBytes));
  }
  if (n > size - kLengthBytes) {
    fail(fmt::format("header length {} at offset 0 runs past the end of the file ({} bytes)", n, size));
  }
  file.data_offset_ = kLengthBytes + n;
  const std::string_view text(reinterpret_cast<const char*>(base) + kLengthBytes, n);
  if (const std::size_t bad = detail::invalid_utf8_at(text); bad != std::string_view::npos) {
    fail(fmt::format("header is not valid UTF-8 at offset {}", kLengthBytes + bad));
  }

  std::vector<Entry> entries;
  HeaderParser(path, text).parse(entries, file.metadata_);

  // Each entry on its own: byte count agrees with dtype and shape, range inside the data section.
  const std::uint64_t data_size = size - file.data_offset_;
  for (const Entry& e : entries) {
    const std::string where = fmt::format("tensor {} (at offset {})", detail::quote(e.name), e.at);
    std::uint64_t numel = 1;
    bool overflow = false;
    for (std::uint64_t d : e.shape) {
      if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail(fmt::format("{}: shape {} has a dimension above INT64_MAX", where, e.shape));
      }
      if (d != 0 && numel > std::numeric_limits<std::uint64_t>::max() / d) overflow = true;
      numel *= d;
    }
    const std::uint64_t elem = dtype_size(e.dtype);
    if (overflow || numel > std::numeric_limits<std::uint64_t>::max() / elem) {
      fail(fmt::format("{}: shape {} of {} overflows 64 bits in bytes", where, e.shape, dtype_name(e.dtype)));
    }
    if (e.end < e.begin) fail(fmt::format("{}: data_offsets [{}, {}] end before they begin", where, e.begin, e.end));
    if (e.end - e.begin != numel * elem) {
      fail(fmt::format("{}: dtype {} and shape {} need {} bytes but data_offsets [{}, {}] hold {}", where, dtype_name(e.dtype), e.shape,
                       numel * elem, e.begin, e.end, e.end - e.begin));
    }
    if (e.end > data_size) {
      fail(fmt::format("{}: data_offsets [{}, {}] end past the data section ({} bytes from offset {})", where, e.begin, e.end, data_size,
                       file.data_offset_));
    }
  }

  // Together, like the reference: sorted by offsets, each tensor starts where the previous one ends
  // and the last one ends at the end of the file, so no byte is shared or left over.
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Entry &x = entries[a], &y = entries[b];
    return std::tie(x.begin, x.end, x.name) < std::tie(y.begin, y.end, y.name);
  });
  std::uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (std::size_t i : order) {
    const Entry& e = entries[i];
    if (e.begin < covered) {
      fail(fmt::format("tensor {} (at offset {}): data_offsets [{}, {}] overlap tensor {} at [{}, {}]", detail::quote(e.name), e.at,
                       e.begin, e.end, detail::quote(prev->name), prev->begin, prev->end));
    }
    if (e.begin > covered) {
      constexpr const char* kGap =
          "tensor {} (at offset {}): data_offsets [{}, {}] leave bytes [{}, {}) of the data "
          "section unused";
      fail(fmt::format(kGap, detail::quote(e.name), e.at, e.begin, e.end, covered, e.begin));
    }
    covered = e.end;
    prev = &e;
  }
  if (covered != data_size) {
    fail(fmt::format("tensors cover {} bytes but the data section from offset {} has {}; bytes [{}, {}) are unused", covered,
                     file.data_offset_, data_size, covered, data_size));
  }

  file.tensors_.reserve(entries.size());
  for (std::size_t i : order) {
    Entry& e = entries[i];
    TensorView v;
    v.name = std::move(e.name);
    v.dtype = e.dtype;
    v.shape.assign(e.shape.begin(), e.shape.end());
    v.data = base + file.data_offset_ + e.begin;
    v.nbytes = static_cast<std::size_t>(e.end - e.begin);
    file.index_.emplace(v.name, file.tensors_.size());
    file.tensors_.push_back(std::move(v));
  }
  return file;
}

const TensorView* File::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace mo::st
