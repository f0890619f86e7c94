#include "ct_rewrite.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/io/safetensors.h"
#include "mo/formats/pack.h"

namespace mo::quant {
namespace {

namespace fs = std::filesystem;

// The module and field of "<module>.<field>" for the four GPTQ tensors; empty module otherwise.
std::pair<std::string, std::string> gptq_field(const std::string& name) {
  for (const char* f : {"qweight", "qzeros", "scales", "g_idx"}) {
    const std::string suffix = std::string(".") + f;
    if (name.ends_with(suffix)) return {name.substr(0, name.size() - suffix.size()), f};
  }
  return {};
}

struct Rewritten {
  explicit Rewritten(std::map<std::string, std::int64_t>& change) : bytes_change(&change) {}
  std::vector<st::TensorData> tensors;
  std::vector<std::vector<std::uint8_t>> buffers;
  void add(std::string name, st::Dtype dtype, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes) {
    const auto& b = buffers.emplace_back(std::move(bytes));
    tensors.push_back({std::move(name), dtype, std::move(shape), b.data(), b.size()});
    const std::size_t dot = tensors.back().name.rfind('.');
    (*bytes_change)[tensors.back().name.substr(0, dot)] += static_cast<std::int64_t>(b.size());
  }
  std::map<std::string, std::int64_t>* bytes_change;
};

void check_g_idx(const st::TensorView& t, const std::string& module, int group_size) {
  const std::int64_t in = t.numel();
  const std::int64_t G = group_size <= 0 ? in : group_size;
  const auto* g = reinterpret_cast<const std::int32_t*>(t.data);
  for (std::int64_t i = 0; i < in; ++i)
    if (g[i] != i / G)
      throw Error(
          fmt::format("{}: g_idx[{}] = {} is not {} / {}: act-order groups cannot be written as compressed-tensors pack-quantized "
                      "(use checkpoint_format gptq)",
                      module, i, g[i], i, G));
}

}  // namespace

CtRewrite rewrite_gptq_as_compressed_tensors(const std::string& dir, const std::vector<LinearDecision>& decisions) {
  std::map<std::string, const LinearDecision*> quantized;
  for (const auto& d : decisions)
    if (d.bits < 16) quantized[d.module] = &d;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  std::sort(files.begin(), files.end());

  CtRewrite out;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& path : files) {
    Rewritten r(out.bytes_change);
    {
      const st::File in = st::File::open(path.string());
      for (const auto& t : in.tensors()) {
        const auto [module, field] = gptq_field(t.name);
        const auto it = quantized.find(module);
        if (module.empty() || it == quantized.end()) {
          r.tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
          continue;
        }
        const LinearDecision& d = *it->second;
        out.bytes_change[module] -= static_cast<std::int64_t>(t.nbytes);
        if (t.shape.size() != (field == "g_idx" ? 1u : 2u))
          throw Error(fmt::format("{}: {} has an unexpected shape", path.string(), t.name));
        if (field == "qweight") {  // [in*bits/32, out] -> [out, in*bits/32]
          const std::int64_t in_features = t.shape[0] * 32 / d.bits, out_features = t.shape[1];
          r.add(module + ".weight_packed", st::Dtype::I32, {t.shape[1], t.shape[0]},
                formats::transpose_elements(t.data, t.shape[0], t.shape[1], 4));
          const std::vector<std::int64_t> shape = {out_features, in_features};
          std::vector<std::uint8_t> bytes(sizeof(std::int64_t) * 2);
          std::memcpy(bytes.data(), shape.data(), bytes.size());
          r.add(module + ".weight_shape", st::Dtype::I64, {2}, std::move(bytes));
        } else if (field == "scales") {  // [groups, out] -> [out, groups]
          r.add(module + ".weight_scale", st::Dtype::F16, {t.shape[1], t.shape[0]},
                formats::transpose_elements(t.data, t.shape[0], t.shape[1], 2));
        } else if (field == "qzeros" && !d.sym) {  // v2 true zeros [groups, out*bits/32] -> [out*bits/32, groups]
          r.add(module + ".weight_zero_point", st::Dtype::I32, {t.shape[1], t.shape[0]},
                formats::transpose_elements(t.data, t.shape[0], t.shape[1], 4));
        } else if (field == "g_idx") {
          check_g_idx(t, module, d.group_size);
        }
      }
      st::write_file(path.string(), r.tensors, in.metadata());
    }
    for (const auto& t : r.tensors) {
      weight_map[t.name] = path.filename().string();
      out.total_bytes += t.nbytes;
    }
  }
  const fs::path index = fs::path(dir) / st::kIndexFileName;
  if (fs::exists(index)) {
    const nlohmann::json j = {{"metadata", {{"total_size", out.total_bytes}}}, {"weight_map", weight_map}};
    std::ofstream os(index);
    os << j.dump(2, ' ', true) << "\n";
    if (!os) throw Error(fmt::format("{}: cannot write", index.string()));
  }
  return out;
}

}  // namespace mo::quant
