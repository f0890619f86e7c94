#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "directions.h"
#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/core/log.h"
#include "mo/io/safetensors.h"
#include "mo/model/tensor_names.h"
#include "mo/tokenizer/tokenizer_export.h"
#include "mo/io/output_path.h"
#include "mo/convert/tensor_convert.h"

namespace mo::convert {
namespace {

namespace fs = std::filesystem;

st::Dtype st_dtype(std::uint32_t type) {
  return type == ggml_id(GgmlType::F32) ? st::Dtype::F32 : type == ggml_id(GgmlType::F16) ? st::Dtype::F16 : st::Dtype::BF16;
}

}  // namespace

void write_hf(const model::ModelFiles& in, const std::string& dir, const ConvertOptions& opt, ConvertReport& report) {
  const model::Hparams& hp = in.shape().hp;
  const bool permute = model::needs_qk_permute(hp.arch);
  std::map<std::uint32_t, std::uint64_t> bytes_by_type;
  std::map<std::string, int> dequantized;          // "q4_1 to float16" -> tensors
  std::vector<std::vector<std::uint8_t>> buffers;  // owns converted bytes until written
  std::vector<st::TensorData> out;
  buffers.reserve(in.tensors().size());
  for (const auto& t : in.tensors()) {
    auto hf_name = model::gguf_to_hf_name(t.name);
    if (!hf_name) {
      report.notes.push_back(fmt::format("{}: no HF counterpart, not written", t.name));
      continue;
    }
    const bool is_float = t.ggml_type && (*t.ggml_type == ggml_id(GgmlType::F32) || *t.ggml_type == ggml_id(GgmlType::F16) ||
                                          *t.ggml_type == ggml_id(GgmlType::BF16));
    const std::uint32_t target = opt.dtype != "auto" ? float_type_from_name(opt.dtype) : is_float ? *t.ggml_type : ggml_id(GgmlType::F16);
    if (!is_float) dequantized[fmt::format("{} to {}", t.dtype, torch_dtype_name(target))] += 1;
    std::vector<std::uint8_t> bytes = to_float_type(t, target);
    if (permute && model::is_qk_tensor(t.name)) {
      std::vector<std::uint8_t> permuted(bytes.size());
      const std::int64_t rows = t.ne.size() > 1 ? static_cast<std::int64_t>(t.ne[1]) : static_cast<std::int64_t>(t.ne[0]);
      const std::size_t row_bytes = bytes.size() / rows;
      const std::int64_t heads = t.name.find("attn_q") != std::string::npos ? hp.num_heads : hp.num_kv_heads;
      model::permute_qk_gguf_to_hf(bytes.data(), permuted.data(), rows, row_bytes, heads);
      bytes.swap(permuted);
    }
    st::TensorData d;
    d.name = *hf_name;
    d.dtype = st_dtype(target);
    for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) d.shape.push_back(static_cast<std::int64_t>(*it));
    buffers.push_back(std::move(bytes));
    d.data = buffers.back().data();
    d.nbytes = buffers.back().size();
    bytes_by_type[target] += d.nbytes;
    report.bytes_written += d.nbytes;
    out.push_back(std::move(d));
  }
  if (out.empty()) throw Error(fmt::format("{}: no tensors to write", in.path()));
  for (const auto& [what, count] : dequantized) report.notes.push_back(fmt::format("{} tensors dequantized from {}", count, what));

  fs::create_directories(dir);
  st::write_sharded(dir, out, opt.max_shard_bytes, {{"format", "pt"}});
  report.tensors = out.size();

  // torch_dtype: the type holding most of the bytes.
  std::uint32_t main_type = bytes_by_type.begin()->first;
  for (const auto& [type, bytes] : bytes_by_type)
    if (bytes > bytes_by_type[main_type]) main_type = type;
  model::Hparams hp_out = hp;
  if (hp.rope_scaling.type == "llama3") {
    report.notes.push_back(
        "rope_freqs.weight holds llama3 RoPE factors whose parameters GGUF does not keep: config.json has no rope_scaling");
  }
  io::write_json((fs::path(dir) / "config.json").string(), hf_config_json(hp_out, torch_dtype_name(main_type)));
  io::write_json((fs::path(dir) / "generation_config.json").string(), hf_generation_config_json(hp));

  if (in.gguf() && in.gguf()->find("tokenizer.ggml.model")) {
    tok::write_hf_tokenizer_files(tok::hf_tokenizer_from_gguf(*in.gguf()), dir);
  } else {
    report.notes.push_back("the input has no tokenizer: no tokenizer files written");
  }
  io::write_json((fs::path(dir) / io::kMarkerFile).string(), {{"tool", "model-optimizer"},
                                                              {"version", build_info().version},
                                                              {"command", "convert"},
                                                              {"source", fs::absolute(in.path()).string()}});
}

}  // namespace mo::convert
