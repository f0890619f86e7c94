#include "model_writer.h"

#include <fmt/format.h>

#include "mo/core/half.h"
#include "mo/model/tensor_names.h"
#include "mo/formats/pack.h"

namespace mo::quant {
namespace {

using engine::LinearId;

std::vector<std::uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = f32_to_f16(v[i]);
  return out;
}

// Rows of a row-major array from GGUF's interleaved Q/K order back to HF's rotate-half order.
template <typename T>
void to_hf_rows(std::vector<T>& v, std::int64_t rows, std::int64_t n_head) {
  if (v.empty()) return;
  std::vector<T> out(v.size());
  const std::size_t row_bytes = v.size() / rows * sizeof(T);
  model::permute_qk_gguf_to_hf(reinterpret_cast<const std::uint8_t*>(v.data()), reinterpret_cast<std::uint8_t*>(out.data()), rows,
                               row_bytes, n_head);
  v.swap(out);
}

void to_hf_order(QuantizedModule& m, std::int64_t rows, std::int64_t n_head) {
  to_hf_rows(m.q.q, rows, n_head);
  to_hf_rows(m.q.scales, rows, n_head);
  to_hf_rows(m.q.zeros, rows, n_head);
  to_hf_rows(m.f8.q, rows, n_head);
  if (m.f8.scales.size() == static_cast<std::size_t>(rows)) to_hf_rows(m.f8.scales, rows, n_head);
  to_hf_rows(m.f16, rows, n_head);
}

std::uint64_t write_module(ShardWriter& out, const std::string& module, const QuantizedModule& m, std::int64_t rows, std::int64_t cols,
                           OutputLayout layout) {
  const std::uint64_t before = out.bytes_written();
  if (m.plan.kind == LinearPlan::f16) {
    out.add(module + ".weight", st::Dtype::F16, {rows, cols}, to_f16(m.f16));
  } else if (m.plan.kind == LinearPlan::fp8) {
    out.add(module + ".weight", st::Dtype::F8_E4M3, {rows, cols}, m.f8.q);
    out.add(module + ".weight_scale", st::Dtype::F32, m.f8.per_channel ? std::vector<std::int64_t>{rows, 1} : std::vector<std::int64_t>{1},
            m.f8.scales);
  } else if (layout == OutputLayout::awq_gemm) {
    const formats::AwqTensors t = formats::pack_awq(m.q);
    const std::int64_t groups = cols / t.group_size;
    out.add(module + ".qweight", st::Dtype::I32, {cols, rows / 8}, t.qweight);
    out.add(module + ".qzeros", st::Dtype::I32, {groups, rows / 8}, t.qzeros);
    out.add(module + ".scales", st::Dtype::F16, {groups, rows}, t.scales);
  } else {
    const formats::GptqTensors t = formats::pack_gptq(m.q, m.q.scheme.sym);  // v1 cannot store a zero of 0: asymmetric goes v2
    out.add(module + ".qweight", st::Dtype::I32, {cols * t.bits / 32, rows}, t.qweight);
    out.add(module + ".qzeros", st::Dtype::I32, {t.groups, rows * t.bits / 32}, t.qzeros);
    out.add(module + ".scales", st::Dtype::F16, {t.groups, rows}, t.scales);
    out.add(module + ".g_idx", st::Dtype::I32, {cols}, t.g_idx);
  }
  return out.bytes_written() - before;
}

}  // namespace

void write_layer(ShardWriter& out, const SourceModel& src, int layer, LayerOutcome& outcome, OutputLayout layout) {
  const auto& hp = src.hp();
  const bool permute = src.gguf() && model::needs_qk_permute(hp.arch);
  const std::string prefix = fmt::format("model.layers.{}", layer);
  out.add(prefix + ".input_layernorm.weight", st::Dtype::F16, {hp.hidden_size}, to_f16(outcome.attn_norm));
  out.add(prefix + ".post_attention_layernorm.weight", st::Dtype::F16, {hp.hidden_size}, to_f16(outcome.ffn_norm));
  const engine::LayerWeights& lw = src.weights().layers[layer];
  const LayerF32 shape = LayerF32::dims_of(hp);
  for (std::size_t i = 0; i < outcome.modules.size(); ++i) {
    QuantizedModule& m = outcome.modules[i];
    LinearDecision& d = outcome.decisions[i];
    const std::int64_t rows = shape.rows(m.id), cols = shape.cols(m.id);
    if (permute && (m.id == LinearId::q || m.id == LinearId::k)) to_hf_order(m, rows, m.id == LinearId::q ? hp.num_heads : hp.num_kv_heads);
    d.bytes = write_module(out, d.module, m, rows, cols, layout);
    const std::vector<float>* bias = m.id == LinearId::q ? &lw.bq : m.id == LinearId::k ? &lw.bk : m.id == LinearId::v ? &lw.bv : nullptr;
    if (bias && !bias->empty()) {
      std::vector<float> b = *bias;
      if (permute && m.id != LinearId::v) to_hf_rows(b, rows, m.id == LinearId::q ? hp.num_heads : hp.num_kv_heads);
      out.add(d.module + ".bias", st::Dtype::F16, {rows}, to_f16(b));
      d.bytes += rows * 2;
    }
    m = QuantizedModule{};
  }
}

void write_non_layer_tensors(ShardWriter& out, const SourceModel& src, std::vector<LinearDecision>& decisions) {
  const auto& hp = src.hp();
  out.add("model.norm.weight", st::Dtype::F16, {hp.hidden_size}, to_f16(src.output_norm()));
  if (!hp.tied_embeddings) {
    LinearDecision d;
    d.module = "lm_head";
    d.format = "f16";
    d.reason = "output layer: kept in 16-bit (lm_head is the most sensitive linear; the formats we write keep it unquantized)";
    const std::uint64_t before = out.bytes_written();
    out.add("lm_head.weight", st::Dtype::F16, {hp.vocab_size, hp.hidden_size}, to_f16(src.output_rows()));
    d.bytes = out.bytes_written() - before;
    decisions.push_back(d);
  }
}

}  // namespace mo::quant
