#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "mo/core/error.h"
#include "mo/io/safetensors.h"
#include "safetensors_json.h"

namespace mo::st {

namespace fs = std::filesystem;

namespace {

// Position of each dtype in the reference's `enum Dtype`, which is in increasing alignment order;
// the reference lays tensors out by this rank, largest first, then by name.
int layout_rank(Dtype dtype) {
  switch (dtype) {
    case Dtype::BOOL: return 0;
    case Dtype::U8: return 4;
    case Dtype::I8: return 5;
    case Dtype::F8_E5M2: return 6;
    case Dtype::F8_E4M3: return 7;
    case Dtype::I16: return 11;
    case Dtype::U16: return 12;
    case Dtype::F16: return 13;
    case Dtype::BF16: return 14;
    case Dtype::I32: return 15;
    case Dtype::U32: return 16;
    case Dtype::F32: return 17;
    case Dtype::F64: return 19;
    case Dtype::I64: return 20;
    case Dtype::U64: return 21;
  }
  return 0;
}

// A JSON string exactly as serde_json writes it: only '"', '\\' and control characters escaped,
// short forms where JSON has them, lowercase hex otherwise; everything else (UTF-8) verbatim.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Bytes written to `<path>.tmp-<pid>`, renamed to `path` by commit(); removed if never committed.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)), tmp_(fmt::format("{}.tmp-{}", path_, ::getpid())) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw UsageError(fmt::format("{}: cannot create: {}", tmp_, std::strerror(errno)));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw Error(fmt::format("{}: write failed: {}", tmp_, std::strerror(errno)));
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) throw Error(fmt::format("{}: fsync failed: {}", tmp_, std::strerror(errno)));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(fmt::format("{}: close failed: {}", tmp_, std::strerror(errno)));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      throw Error(fmt::format("{}: cannot rename to {}: {}", tmp_, path_, std::strerror(errno)));
    }
    committed_ = true;
  }

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

void check_utf8(const std::string& path, std::string_view what, const std::string& s) {
  if (detail::invalid_utf8_at(s) != std::string_view::npos) {
    throw Error(fmt::format("{}: {} is not valid UTF-8", path, what));
  }
}

void check_tensor(const std::string& path, const TensorData& t) {
  if (t.name == "__metadata__") throw Error(fmt::format("{}: '__metadata__' cannot be a tensor name", path));
  check_utf8(path, fmt::format("tensor name {}", detail::quote(t.name)), t.name);
  std::uint64_t numel = 1;
  bool overflow = false;
  for (std::int64_t d : t.shape) {
    if (d < 0) throw Error(fmt::format("{}: tensor {} has a negative dimension in shape {}", path, detail::quote(t.name), t.shape));
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && numel > std::numeric_limits<std::uint64_t>::max() / u) overflow = true;
    numel *= u;
  }
  const std::size_t elem = dtype_size(t.dtype);
  if (overflow || numel > std::numeric_limits<std::size_t>::max() / elem || numel * elem != t.nbytes) {
    throw Error(fmt::format("{}: tensor {} of dtype {} and shape {} has {} bytes of data, expected numel * {}", path, detail::quote(t.name),
                            dtype_name(t.dtype), t.shape, t.nbytes, elem));
  }
  if (t.data == nullptr && t.nbytes != 0) throw Error(fmt::format("{}: tensor {} has no data", path, detail::quote(t.name)));
}

void check_names_unique(const std::string& path, const std::vector<TensorData>& tensors) {
  std::set<std::string_view> names;
  for (const TensorData& t : tensors) {
    if (!names.insert(t.name).second) throw Error(fmt::format("{}: duplicate tensor {}", path, detail::quote(t.name)));
  }
}

}  // namespace

std::string shard_file_name(std::size_t index, std::size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

void write_file(const std::string& path, const std::vector<TensorData>& tensors, const std::map<std::string, std::string>& metadata) {
  check_names_unique(path, tensors);
  for (const TensorData& t : tensors) check_tensor(path, t);
  for (const auto& [key, value] : metadata) {
    check_utf8(path, fmt::format("metadata key {}", detail::quote(key)), key);
    check_utf8(path, fmt::format("metadata value of {}", detail::quote(key)), value);
  }

  std::vector<const TensorData*> order;
  order.reserve(tensors.size());
  for (const TensorData& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorData* a, const TensorData* b) {
    const int ra = layout_rank(a->dtype), rb = layout_rank(b->dtype);
    return ra != rb ? ra > rb : a->name < b->name;
  });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (const TensorData* t : order) {
    if (header.size() > 1) header += ',';
    append_json_string(header, t->name);
    header += fmt::format(R"(:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", dtype_name(t->dtype), fmt::join(t->shape, ","),
                          offset, offset + t->nbytes);
    offset += t->nbytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  TempFile out(path);
  const std::uint64_t n = header.size();
  out.write(&n, sizeof n);
  out.write(header.data(), header.size());
  for (const TensorData* t : order) out.write(t->data, t->nbytes);
  out.commit();
}

void write_sharded(const std::string& dir, const std::vector<TensorData>& tensors, std::size_t max_shard_bytes,
                   const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("output directory not found: " + dir);
  if (max_shard_bytes == 0) throw UsageError(dir + ": the maximum shard size must be above 0 bytes");
  check_names_unique(dir, tensors);

  // huggingface_hub split_state_dict_into_shards_factory, in input order.
  std::vector<std::vector<TensorData>> shards;
  std::vector<TensorData> current;
  std::size_t current_bytes = 0, total_bytes = 0;
  for (const TensorData& t : tensors) {
    total_bytes += t.nbytes;
    if (t.nbytes > max_shard_bytes) {
      shards.push_back({t});
      continue;
    }
    if (current_bytes + t.nbytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(t);
    current_bytes += t.nbytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));

  const fs::path single = fs::path(dir) / kSingleFileName;
  const fs::path index_path = fs::path(dir) / kIndexFileName;
  if (shards.size() <= 1) {
    write_file(single.string(), tensors, metadata);
    // A stale index would describe shards that are not ours.
    fs::remove(index_path, ec);
    return;
  }

  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_file_name(i, shards.size());
    write_file((fs::path(dir) / name).string(), shards[i], metadata);
    for (const TensorData& t : shards[i]) weight_map[t.name] = name;
  }
  // Transformers: json.dumps(index, indent=2, sort_keys=True) + "\n"; nlohmann sorts keys by byte,
  // which for UTF-8 is code point order, like Python's sort.
  const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
  TempFile out(index_path.string());
  out.write(text.data(), text.size());
  out.commit();
  // Model::open prefers model.safetensors, so a stale one would hide the shards just written.
  fs::remove(single, ec);
}

}  // namespace mo::st
