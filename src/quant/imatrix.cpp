#include "mo/quant/imatrix.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/core/file_read.h"
#include "mo/core/progress.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/io/gguf_writer.h"
#include "mo/io/output_path.h"
#include "mo/quant/layer_f32.h"

namespace mo::quant {
namespace {

using engine::LinearId;
using gguf::Value;

std::vector<std::uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> f32_values(const gguf::File& f, const gguf::TensorInfo& t) {
  if (t.type != ggml_id(GgmlType::F32)) throw Error(fmt::format("{}: imatrix tensor '{}' is not F32", f.path, t.name));
  auto bytes = f.tensor_bytes(t);
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));  // memcpy's pointers must not be null
  return v;
}

bool strip_suffix(std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  s.resize(s.size() - suffix.size());
  return true;
}

Imatrix read_gguf(const std::string& path) {
  const gguf::File f = gguf::read_metadata(path);
  if (const Value* t = f.find("general.type"); !t || t->type != gguf::ValueType::string || t->as_string() != "imatrix")
    throw Error(fmt::format("{}: not an importance matrix (general.type is not \"imatrix\")", path));
  Imatrix m;
  if (const Value* d = f.find("imatrix.datasets"); d && d->type == gguf::ValueType::array)
    for (const auto& e : d->as_array()) m.datasets.push_back(e.as_string());
  m.chunk_count = f.get_int_opt("imatrix.chunk_count").value_or(0);
  m.chunk_size = f.get_int_opt("imatrix.chunk_size").value_or(0);
  for (const auto& t : f.tensors) {
    std::string name = t.name;
    if (strip_suffix(name, ".in_sum2")) {
      m.entries[name].in_sum2 = f32_values(f, t);
    } else if (strip_suffix(name, ".counts")) {
      m.entries[name].counts = f32_values(f, t);
    }
  }
  for (const auto& [name, e] : m.entries) {
    if (e.in_sum2.empty() || e.counts.empty() || e.in_sum2.size() % e.counts.size() != 0)
      throw Error(fmt::format("{}: '{}' needs both .in_sum2 and .counts, with one count per matrix", path, name));
  }
  if (m.entries.empty()) throw Error(fmt::format("{}: the importance matrix has no entries", path));
  return m;
}

// llama.cpp's first format: i32 n_entries, then per entry {i32 name length, name, i32 ncall, i32 nval,
// f32 values[nval]} where values are already divided by the tokens and multiplied by ncall; then
// optionally i32 last_call, i32 length and the dataset name.
Imatrix read_legacy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::uint64_t bytes = std::filesystem::file_size(path);
  auto i32 = [&](const char* what) {
    std::int32_t v = 0;
    if (!in.read(reinterpret_cast<char*>(&v), 4)) throw Error(fmt::format("{}: truncated legacy imatrix (reading {})", path, what));
    return v;
  };
  Imatrix m;
  m.legacy = true;
  const std::int32_t n = i32("the entry count");
  if (n <= 0 || n > 1000000) throw Error(fmt::format("{}: not an importance matrix (entry count {})", path, n));
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t len = i32("a name length");
    if (len <= 0 || len > 4096) throw Error(fmt::format("{}: entry {}: bad name length {}", path, i, len));
    std::string name(static_cast<std::size_t>(len), '\0');
    const std::int32_t ncall = (in.read(name.data(), len), i32("ncall"));
    const std::int32_t nval = i32("nval");
    if (nval <= 0) throw Error(fmt::format("{}: entry '{}': {} values", path, name, nval));
    // Checked against what is left of the file before anything that size is allocated.
    if (4 * static_cast<std::uint64_t>(nval) > bytes - static_cast<std::uint64_t>(in.tellg()))
      throw Error(fmt::format("{}: entry '{}' is truncated ({} values announced)", path, name, nval));
    ImatrixEntry e;
    e.in_sum2.resize(static_cast<std::size_t>(nval));
    if (!in.read(reinterpret_cast<char*>(e.in_sum2.data()), 4LL * nval))
      throw Error(fmt::format("{}: entry '{}' is truncated", path, name));
    e.counts = {static_cast<float>(ncall)};
    m.entries[name] = std::move(e);
  }
  std::int32_t last_call = 0, len = 0;
  if (in.read(reinterpret_cast<char*>(&last_call), 4) && in.read(reinterpret_cast<char*>(&len), 4) && len > 0 && len < 65536) {
    std::string ds(static_cast<std::size_t>(len), '\0');
    if (in.read(ds.data(), len)) m.datasets.push_back(ds);
    m.chunk_count = last_call;
  }
  return m;
}

}  // namespace

std::vector<float> Imatrix::importance(const std::string& tensor) const {
  auto it = entries.find(tensor);
  if (it == entries.end() || it->second.counts.empty() || it->second.counts[0] <= 0) return {};
  const ImatrixEntry& e = it->second;
  const std::size_t cols = e.in_sum2.size() / e.counts.size();
  std::vector<float> out(cols);
  for (std::size_t j = 0; j < cols; ++j) out[j] = e.in_sum2[j] / e.counts[0];
  return out;
}

std::string gguf_linear_tensor(int layer, LinearId id) {
  const char* n = "";
  switch (id) {
    case LinearId::q: n = "attn_q"; break;
    case LinearId::k: n = "attn_k"; break;
    case LinearId::v: n = "attn_v"; break;
    case LinearId::o: n = "attn_output"; break;
    case LinearId::gate: n = "ffn_gate"; break;
    case LinearId::up: n = "ffn_up"; break;
    case LinearId::down: n = "ffn_down"; break;
  }
  return fmt::format("blk.{}.{}.weight", layer, n);
}

Imatrix collect_imatrix(engine::Engine& engine, const std::vector<std::vector<std::int32_t>>& samples, const std::string& dataset) {
  const auto& hp = engine.hparams();
  constexpr int kLinears = 7;
  // Sums in double: a 512-token sample times hundreds of samples loses digits in float.
  std::vector<std::vector<double>> sum2(static_cast<std::size_t>(hp.num_layers) * kLinears);
  std::vector<std::int64_t> tokens(sum2.size(), 0);
  engine::LinearObserver observe = [&](int layer, LinearId id, const float* x, std::int64_t n, std::int64_t dim) {
    const std::size_t slot = static_cast<std::size_t>(layer) * kLinears + static_cast<int>(id);
    auto& s = sum2[slot];
    if (s.empty()) s.assign(static_cast<std::size_t>(dim), 0.0);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t j = 0; j < dim; ++j) s[j] += static_cast<double>(x[t * dim + j]) * x[t * dim + j];
    tokens[slot] += n;
  };
  Imatrix m;
  m.datasets = {dataset};
  Progress progress("imatrix", static_cast<std::int64_t>(samples.size()), "sample");
  std::vector<float> hidden;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto n = static_cast<std::int64_t>(samples[i].size());
    if (n == 0) continue;
    hidden.resize(static_cast<std::size_t>(n * hp.hidden_size));
    engine.embed(samples[i], hidden.data());
    for (int layer = 0; layer < hp.num_layers; ++layer) engine.run_layer(layer, hidden.data(), n, 0, &observe);
    m.chunk_count += 1;
    m.chunk_size = std::max(m.chunk_size, n);
    progress.update(static_cast<std::int64_t>(i + 1));
  }
  progress.finish();
  for (int layer = 0; layer < hp.num_layers; ++layer) {
    for (LinearId id : kAllLinears) {
      const std::size_t slot = static_cast<std::size_t>(layer) * kLinears + static_cast<int>(id);
      if (tokens[slot] == 0) continue;
      ImatrixEntry e;
      e.in_sum2.assign(sum2[slot].begin(), sum2[slot].end());
      e.counts = {static_cast<float>(tokens[slot])};
      m.entries[gguf_linear_tensor(layer, id)] = std::move(e);
    }
  }
  return m;
}

void write_imatrix(const Imatrix& m, const std::string& path) {
  gguf::Writer w(path);
  w.set("general.type", Value::str("imatrix"));
  w.set(io::kMarkerKey, Value::str("imatrix"));  // ours: --force may replace it
  w.set("imatrix.datasets", Value::array_of_strings(m.datasets));
  w.set("imatrix.chunk_count", Value::u32(static_cast<std::uint32_t>(m.chunk_count)));
  w.set("imatrix.chunk_size", Value::u32(static_cast<std::uint32_t>(m.chunk_size)));
  for (const auto& [name, e] : m.entries) {
    const std::uint64_t n_mat = e.counts.size(), cols = e.in_sum2.size() / std::max<std::uint64_t>(n_mat, 1);
    w.add_tensor(name + ".in_sum2", {cols, n_mat}, ggml_id(GgmlType::F32), f32_bytes(e.in_sum2));
    w.add_tensor(name + ".counts", {1, n_mat}, ggml_id(GgmlType::F32), f32_bytes(e.counts));
  }
  w.write();
}

Imatrix read_imatrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ::close(open_regular_file(path, "imatrix file"));  // not a FIFO, a device or a directory
  if (!in) throw UsageError(fmt::format("imatrix: cannot open '{}'", path));
  char magic[4] = {};
  in.read(magic, 4);
  return std::memcmp(magic, "GGUF", 4) == 0 ? read_gguf(path) : read_legacy(path);
}

}  // namespace mo::quant
