#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "directions.h"
#include "mo/convert/gguf_metadata.h"
#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/io/gguf_writer.h"
#include "mo/model/rope.h"
#include "mo/model/tensor_names.h"
#include "mo/io/output_path.h"
#include "mo/convert/tensor_convert.h"

namespace mo::convert {
namespace {

namespace fs = std::filesystem;
using gguf::Value;

// llama.cpp's file types for float models: ALL_F32, MOSTLY_F16, MOSTLY_BF16.
std::uint32_t file_type_for(std::uint32_t type) { return type == ggml_id(GgmlType::F32) ? 0 : type == ggml_id(GgmlType::F16) ? 1 : 32; }

}  // namespace

void write_gguf(const model::ModelFiles& in, const std::string& path, const ConvertOptions& opt, ConvertReport& report) {
  const model::Hparams& hp = in.shape().hp;
  if (hp.num_experts > 0) throw UsageError(fmt::format("{}: converting MoE (Mixtral) checkpoints to GGUF is not supported yet", in.path()));
  if (!in.quantization_config().is_null())
    throw UsageError(fmt::format("{}: a quantized HF checkpoint cannot be converted to GGUF; convert the original model", in.path()));
  const std::string arch = gguf_arch_name(hp);
  gguf::Writer w(path);
  w.set("general.architecture", Value::str(arch));
  w.set("general.name", Value::str(in.shape().name));

  std::map<std::uint32_t, std::uint64_t> bytes_by_type;
  for (const auto& t : in.tensors()) {
    if (t.name == t.file_name && !model::gguf_to_hf_name(t.name)) {
      report.notes.push_back(fmt::format("{}: no GGUF counterpart, not written", t.file_name));
      continue;
    }
    // llama.cpp keeps one-dimensional tensors (norms, biases) in F32.
    const bool one_dim = t.ne.size() == 1;
    const std::uint32_t target = one_dim               ? ggml_id(GgmlType::F32)
                                 : opt.dtype != "auto" ? float_type_from_name(opt.dtype)
                                                       : t.ggml_type.value_or(ggml_id(GgmlType::F16));
    std::vector<std::uint8_t> bytes = to_float_type(t, target);
    if (t.hf_qk_order) {
      std::vector<std::uint8_t> permuted(bytes.size());
      const std::int64_t rows = one_dim ? static_cast<std::int64_t>(t.ne[0]) : static_cast<std::int64_t>(t.ne[1]);
      const std::int64_t heads = t.name.find("attn_q") != std::string::npos ? hp.num_heads : hp.num_kv_heads;
      model::permute_qk_hf_to_gguf(bytes.data(), permuted.data(), rows, bytes.size() / rows, heads);
      bytes.swap(permuted);
    }
    if (!one_dim) bytes_by_type[target] += bytes.size();
    report.bytes_written += bytes.size();
    w.add_tensor(t.name, t.ne, target, std::move(bytes));
  }
  if (hp.rope_scaling.type == "llama3") {
    std::vector<float> f = model::llama3_rope_factors(hp);
    std::vector<std::uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    w.add_tensor("rope_freqs.weight", {f.size()}, ggml_id(GgmlType::F32), std::move(bytes));
  }
  std::uint32_t main_type = ggml_id(GgmlType::F32);
  std::uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type)
    if (bytes > most) most = bytes, main_type = type;
  w.set("general.file_type", Value::u32(file_type_for(main_type)));
  set_model_keys(w, in, report.notes);
  w.set(io::kMarkerKey, Value::str(fs::absolute(in.path()).string()));
  w.set("model-optimizer.version", Value::str(build_info().version));
  report.tensors = w.tensor_count();
  w.write();
}

}  // namespace mo::convert
