#include "diag_model.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "mo/core/thread_pool.h"
#include "mo/model/model_check.h"
#include "mo/model/tensor_names.h"
#include "mo/quant/layer_select.h"

namespace mo::diagnose {
namespace {

const char* gguf_base(engine::LinearId id) {
  switch (id) {
    case engine::LinearId::q: return "attn_q";
    case engine::LinearId::k: return "attn_k";
    case engine::LinearId::v: return "attn_v";
    case engine::LinearId::o: return "attn_output";
    case engine::LinearId::gate: return "ffn_gate";
    case engine::LinearId::up: return "ffn_up";
    case engine::LinearId::down: return "ffn_down";
  }
  return "";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The tensors that make up one linear: "<module>.*" in HF names, "blk.L.<base>.*" in GGUF names.
template <typename F>
void for_each_part(const model::ModelFiles& files, int layer, engine::LinearId id, F&& f) {
  const std::string hf = quant::hf_linear_module(layer, engine::linear_name(id)) + ".";
  const std::string gg = fmt::format("blk.{}.{}.", layer, gguf_base(id));
  for (const auto& t : files.tensors())
    if (starts_with(t.file_name, hf) || starts_with(t.file_name, gg) || starts_with(t.name, gg)) f(t);
}

std::string quant_label(const nlohmann::json& qc) {
  const std::string method = qc.value("quant_method", "?");
  if (method == "compressed-tensors" || method == "fp8") return "fp8";
  std::string s = method;
  if (qc.contains("bits") && qc["bits"].is_number_integer()) s += fmt::format(" int{}", qc["bits"].dump());
  if (qc.contains("group_size") && qc["group_size"].is_number_integer()) {
    const auto g = qc["group_size"].get<std::int64_t>();
    s += g > 0 ? fmt::format(" g{}", g) : std::string(" per-channel");
  }
  return s;
}

}  // namespace

std::uint64_t DiagModel::linear_bytes(int layer, engine::LinearId id) const {
  std::uint64_t n = 0;
  for_each_part(*files, layer, id, [&](const model::StoredTensor& t) {
    if (!starts_with(t.file_name, "blk.") || t.file_name.find("bias") == std::string::npos) n += t.bytes.size();
  });
  return n;
}

std::string DiagModel::linear_type(int layer, engine::LinearId id) const {
  std::string weight_type;
  bool quantized_parts = false;
  for_each_part(*files, layer, id, [&](const model::StoredTensor& t) {
    const auto dot = t.file_name.rfind('.');
    const std::string leaf = dot == std::string::npos ? t.file_name : t.file_name.substr(dot + 1);
    if (leaf == "weight") weight_type = t.dtype;
    if (leaf == "qweight" || leaf == "weight_packed" || leaf == "weight_scale") quantized_parts = true;
  });
  const auto& qc = files->quantization_config();
  if (!qc.is_null() && (quantized_parts || (weight_type == "F8_E4M3"))) return quant_label(qc);
  return weight_type.empty() ? "?" : weight_type;
}

std::string DiagModel::format() const {
  if (files->gguf()) return "gguf";
  const auto& qc = files->quantization_config();
  return qc.is_null() ? "safetensors" : "safetensors " + quant_label(qc);
}

DiagModel load_diag_model(const std::string& path) {
  DiagModel m;
  m.path = path;
  m.files = std::make_unique<model::ModelFiles>(model::ModelFiles::open(path));
  m.tok = model::check_model(*m.files, model::TokenizerUse::optional);
  m.engine = std::make_unique<engine::Engine>(engine::bind_weights(*m.files), default_pool());
  return m;
}

void align_qk_output(float* y, std::int64_t n, std::int64_t rows, std::int64_t head_dim, engine::RopeStyle from, engine::RopeStyle to) {
  if (from == to) return;
  const std::int64_t n_head = rows / head_dim;
  std::vector<float> tmp(static_cast<std::size_t>(rows));
  for (std::int64_t t = 0; t < n; ++t) {
    auto* row = reinterpret_cast<std::uint8_t*>(y + t * rows);
    auto* dst = reinterpret_cast<std::uint8_t*>(tmp.data());
    if (from == engine::RopeStyle::neox)
      model::permute_qk_hf_to_gguf(row, dst, rows, sizeof(float), n_head);
    else
      model::permute_qk_gguf_to_hf(row, dst, rows, sizeof(float), n_head);
    std::memcpy(row, dst, static_cast<std::size_t>(rows) * sizeof(float));
  }
}

}  // namespace mo::diagnose
