#include "mo/model/model_files.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/core/file_read.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/io/safetensors.h"
#include "mo/model/model_source.h"
#include "mo/model/tensor_names.h"

namespace mo::model {
namespace {

namespace fs = std::filesystem;

std::optional<std::uint32_t> ggml_type_of(st::Dtype d) {
  switch (d) {
    case st::Dtype::F32: return 0;
    case st::Dtype::F16: return 1;
    case st::Dtype::BF16: return 30;
    default: return std::nullopt;
  }
}

std::string lower_dtype(st::Dtype d) {
  switch (d) {
    case st::Dtype::F32: return "f32";
    case st::Dtype::F16: return "f16";
    case st::Dtype::BF16: return "bf16";
    default: return st::dtype_name(d);
  }
}

}  // namespace

std::uint64_t StoredTensor::n_elements() const {
  std::uint64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}

const StoredTensor* ModelFiles::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::uint64_t ModelFiles::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& t : tensors_) n += t.bytes.size();
  return n;
}

ModelFiles ModelFiles::open(const std::string& path) {
  require_readable(path, "model");
  ModelFiles m;
  m.path_ = path;
  if (fs::is_regular_file(path)) {
    if (fs::path(path).extension() != ".gguf") throw UsageError(fmt::format("{}: expected a .gguf file or an HF model directory", path));
    m.format_ = "gguf";
    m.gguf_ = std::make_shared<gguf::File>(gguf::read_metadata(path));
    m.shape_ = shape_from_gguf(*m.gguf_);
    for (const auto& t : m.gguf_->tensors) {
      const auto* info = ggml_type_info(t.type);
      m.tensors_.push_back(
          {t.name, t.name, t.ne, info ? info->name : fmt::format("type{}", t.type), t.type, m.gguf_->tensor_bytes(t), false});
    }
    if (m.gguf_->find("tokenizer.ggml.model")) m.tokenizer_path_ = path;
    if (const auto* tmpl = m.gguf_->find("tokenizer.chat_template")) m.chat_template_ = tmpl->as_string();
    return m;
  }

  m.format_ = "safetensors";
  const fs::path dir(path);
  const fs::path config = dir / "config.json";
  if (!fs::exists(config))
    throw UsageError(fmt::format("{}: no config.json in this directory (expected an HF model directory or a .gguf file)", path));
  m.hf_config_ = io::read_json(config.string());
  m.shape_ = shape_from_hf_config(m.hf_config_, config.string());
  m.shape_.name = fs::weakly_canonical(dir).filename().string();
  if (auto q = m.hf_config_.find("quantization_config"); q != m.hf_config_.end()) {
    m.quantization_config_ = *q;
  } else {
    // Checkpoints that predate Transformers' quantization_config keep it beside config.json (vLLM reads
    // these files too), often without quant_method: AutoAWQ's keys (w_bit, zero_point) tell AWQ from GPTQ.
    for (const char* name : {"quantize_config.json", "quant_config.json"}) {
      if (!fs::exists(dir / name)) continue;
      auto file = io::read_json((dir / name).string());
      if (file.is_object() && !file.contains("quant_method"))
        file["quant_method"] = file.contains("w_bit") || file.contains("zero_point") || file.contains("q_group_size") ? "awq" : "gptq";
      m.quantization_config_ = std::move(file);
      break;
    }
  }
  m.st_ = std::make_shared<st::Model>(st::Model::open(path));
  const bool permuted = needs_qk_permute(m.shape_.hp.arch);
  for (const auto& name : m.st_->names()) {
    const st::TensorView* v = m.st_->find(name);
    StoredTensor t;
    t.file_name = name;
    t.name = hf_to_gguf_name(name).value_or(name);
    for (auto it = v->shape.rbegin(); it != v->shape.rend(); ++it) t.ne.push_back(static_cast<std::uint64_t>(*it));
    if (t.ne.empty()) t.ne.push_back(1);
    t.dtype = lower_dtype(v->dtype);
    t.ggml_type = ggml_type_of(v->dtype);
    t.bytes = {v->data, v->nbytes};
    t.hf_qk_order = permuted && is_qk_tensor(t.name);
    m.tensors_.push_back(std::move(t));
  }
  if (fs::exists(dir / "tokenizer.json")) m.tokenizer_path_ = (dir / "tokenizer.json").string();
  if (fs::exists(dir / "tokenizer_config.json")) {
    auto tc = io::read_json((dir / "tokenizer_config.json").string());
    if (auto it = tc.find("chat_template"); it != tc.end() && it->is_string()) m.chat_template_ = it->get<std::string>();
  }
  if (m.chat_template_.empty() && fs::exists(dir / "chat_template.jinja")) {
    m.chat_template_ = read_regular_file((dir / "chat_template.jinja").string(), "chat template", kMiB);
  }
  return m;
}

}  // namespace mo::model
