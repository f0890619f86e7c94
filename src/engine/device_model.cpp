#include "mo/engine/device_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/io/ggml_types.h"
#include "mo/model/rope.h"
#include "mo/io/gguf_dequant.h"

namespace mo::engine {
namespace {

constexpr std::uint32_t kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14;

// f16 bits of every element of a matrix of any stored type.
std::vector<std::uint16_t> to_f16(const Matrix& m) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(m.rows * m.cols));
  if (m.type == kF16) {
    std::memcpy(out.data(), m.bytes.data(), out.size() * 2);
    return out;
  }
  std::vector<float> row(m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    gguf::dequantize_row(m.type, m.row(r), row.data(), m.cols);
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const std::uint16_t h = f32_to_f16(row[c]);
      // An f32/BF16 weight past f16's range would become inf on the GPU: refuse rather than compute garbage.
      if ((h & 0x7c00) == 0x7c00 && std::isfinite(row[c]))
        throw Error(fmt::format("{}: weight {} at [{}, {}] is outside f16's range (±65504), which the GPU path stores float weights in", m.name,
                                row[c], r, c));
      out[r * m.cols + c] = h;
    }
  }
  return out;
}

}  // namespace

DeviceLinear packed_host_view(const Matrix& m) {
  if (!m.packed) throw Error(fmt::format("{}: not an AWQ / GPTQ matrix", m.name));
  const PackedIntLinear& p = *m.packed;
  DeviceLinear L;
  L.kind = p.awq ? LinearKind::awq : LinearKind::gptq;
  L.rows = m.rows;
  L.cols = m.cols;
  L.weight = p.qweight.data();
  L.qzeros = reinterpret_cast<const std::int32_t*>(p.qzeros.data());
  L.scales = reinterpret_cast<const std::uint16_t*>(p.scales.data());
  L.g_idx = p.g_idx.empty() ? nullptr : reinterpret_cast<const std::int32_t*>(p.g_idx.data());
  L.bits = p.bits;
  L.group_size = p.group_size;
  L.groups = p.groups;
  L.zero_minus_one = p.zero_minus_one;
  L.bytes = p.qweight.size() + p.qzeros.size() + p.scales.size() + p.g_idx.size();
  return L;
}

DeviceBuffer DeviceModel::upload_floats(const std::vector<float>& v) {
  DeviceBuffer buf(b_, v.size() * sizeof(float));
  if (!v.empty()) b_.upload(buf.as(), v.data(), v.size() * sizeof(float));
  weight_bytes_ += buf.bytes();
  return buf;
}

DeviceLinear DeviceModel::upload_linear(const Matrix& m) {
  auto put = [&](const void* src, std::size_t bytes) -> const void* {
    if (bytes == 0) return nullptr;
    DeviceBuffer& buf = owned_.emplace_back(b_, bytes);
    b_.upload(buf.as(), src, bytes);
    weight_bytes_ += bytes;
    return buf.as();
  };
  if (m.packed) {
    DeviceLinear L = packed_host_view(m);
    const PackedIntLinear& p = *m.packed;
    L.weight = put(p.qweight.data(), p.qweight.size());
    L.qzeros = static_cast<const std::int32_t*>(put(p.qzeros.data(), p.qzeros.size()));
    L.scales = static_cast<const std::uint16_t*>(put(p.scales.data(), p.scales.size()));
    L.g_idx = static_cast<const std::int32_t*>(put(p.g_idx.data(), p.g_idx.size()));
    return L;
  }
  DeviceLinear L;
  L.rows = m.rows;
  L.cols = m.cols;
  const bool blocks = (m.type == kQ8_0 && m.cols % 32 == 0) || ((m.type == kQ4_K || m.type == kQ6_K) && m.cols % 256 == 0);
  if (blocks) {
    L.kind = m.type == kQ8_0 ? LinearKind::q8_0 : m.type == kQ4_K ? LinearKind::q4_k : LinearKind::q6_k;
    L.row_bytes = m.row_bytes;
    L.weight = put(m.bytes.data(), m.bytes.size());
    L.bytes = m.bytes.size();
    return L;
  }
  const auto f16 = to_f16(m);  // the kernels' float form; other GGUF types are decoded once here
  L.kind = LinearKind::f16;
  L.weight = put(f16.data(), f16.size() * 2);
  L.bytes = f16.size() * 2;
  return L;
}

DeviceModel::DeviceModel(const ModelWeights& w, Backend& backend) : b_(backend), hp_(w.hp), rope_style_(w.rope_style) {
  if (hp_.num_experts > 0) throw UsageError("device: mixture-of-experts models are not supported by the engine");
  if (w.token_embd.type == kPackedOnlyType) throw Error("device: the token embedding cannot be a packed matrix");
  const auto embd = to_f16(w.token_embd);
  embd_ = DeviceBuffer(b_, embd.size() * 2);
  b_.upload(embd_.as(), embd.data(), embd.size() * 2);
  weight_bytes_ += embd_.bytes();
  const bool tied = w.output.bytes.data() == w.token_embd.bytes.data() && !w.output.packed;
  if (tied) {  // the head reads the embedding table itself, as f16
    head_.kind = LinearKind::f16;
    head_.rows = w.output.rows;
    head_.cols = w.output.cols;
    head_.weight = embd_.as();
    head_.bytes = embd_.bytes();
  } else {
    head_ = upload_linear(w.output);
  }
  out_norm_ = upload_floats(w.output_norm);
  if (!w.rope_freq_factors.empty()) rope_factors_ = upload_floats(w.rope_freq_factors);
  for (const LayerWeights& l : w.layers) {
    Layer d;
    d.attn_norm = upload_floats(l.attn_norm);
    d.ffn_norm = upload_floats(l.ffn_norm);
    d.bq = upload_floats(l.bq);
    d.bk = upload_floats(l.bk);
    d.bv = upload_floats(l.bv);
    d.wq = upload_linear(l.wq);
    d.wk = upload_linear(l.wk);
    d.wv = upload_linear(l.wv);
    d.wo = upload_linear(l.wo);
    d.gate = upload_linear(l.w_gate);
    d.up = upload_linear(l.w_up);
    d.down = upload_linear(l.w_down);
    layers_.push_back(std::move(d));
  }
  b_.synchronize();
}

std::size_t DeviceModel::layer_linear_bytes() const {
  std::size_t n = 0;
  for (const Layer& l : layers_)
    for (const DeviceLinear* L : l.linears()) n += L->bytes;
  return n;
}

std::string DeviceModel::summary() const {
  std::map<std::string, int> counts;
  for (const Layer& l : layers_)
    for (const DeviceLinear* L : l.linears()) {
      std::string k = linear_kind_name(L->kind);
      if (L->kind == LinearKind::awq || L->kind == LinearKind::gptq)
        k += fmt::format(" {}-bit g{}{}", L->bits, L->group_size == L->cols ? std::string("-1") : std::to_string(L->group_size), L->g_idx ? " act-order" : "");
      ++counts[k];
    }
  std::vector<std::string> parts;
  for (const auto& [k, n] : counts) parts.push_back(fmt::format("{} {}", n, k));
  return fmt::format("{} on {}: layer linears {}; head {}; {:.1f} MiB of weights", hp_.arch, b_.describe(), fmt::join(parts, ", "),
                     linear_kind_name(head_.kind), weight_bytes_ / double(1 << 20));
}

float* DeviceModel::scratch(int index, std::size_t floats) {
  if (scratch_.size() <= static_cast<std::size_t>(index)) scratch_.resize(index + 1);
  DeviceBuffer& s = scratch_[index];
  if (s.bytes() < floats * sizeof(float)) s = DeviceBuffer(b_, std::max<std::size_t>(floats, 1) * sizeof(float));
  return s.as<float>();
}

std::vector<float> DeviceModel::forward(std::span<const SeqChunk> chunks, KvStorage& kv) {
  if (kv.device() != &b_) throw Error("DeviceModel::forward: the KV cache is not in this backend's memory");
  const KvLayout& L = kv.layout();
  if (L.num_layers != static_cast<int>(layers_.size()) || L.num_kv_heads != hp_.num_kv_heads || L.head_dim != hp_.head_dim)
    throw Error("DeviceModel::forward: the KV cache layout does not match the model");
  // Per-token metadata, built on the host and uploaded once per step.
  std::vector<std::int32_t> tokens, pos, slots, row_seq, row_ctx, rows;
  std::size_t max_blocks = 1;
  for (const auto& c : chunks) max_blocks = std::max(max_blocks, c.block_table.size());
  std::vector<std::int32_t> tables(chunks.size() * max_blocks, 0), first_row = {0};
  int max_ctx = 0, max_rows = 0;
  for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
    const SeqChunk& c = chunks[ci];
    if (c.tokens.empty()) throw Error("forward: a sequence chunk has no tokens");
    if (c.slots.size() != c.tokens.size()) throw Error("forward: a chunk needs one KV slot per token");
    const std::int64_t end = c.start_pos + static_cast<std::int64_t>(c.tokens.size());
    if (static_cast<std::int64_t>(c.block_table.size()) * L.block_size < end)
      throw Error(fmt::format("forward: the block table covers {} positions, the chunk ends at {}", c.block_table.size() * L.block_size, end));
    std::copy(c.block_table.begin(), c.block_table.end(), tables.begin() + static_cast<std::ptrdiff_t>(ci * max_blocks));
    for (std::size_t i = 0; i < c.tokens.size(); ++i) {
      if (c.tokens[i] < 0 || c.tokens[i] >= hp_.vocab_size)
        throw Error(fmt::format("token id {} is outside the vocabulary [0, {})", c.tokens[i], hp_.vocab_size));
      if (c.slots[i] < 0 || c.slots[i] >= kv.num_slots()) throw Error(fmt::format("forward: slot {} is out of range [0, {})", c.slots[i], kv.num_slots()));
      const int p = c.start_pos + static_cast<int>(i);
      if (c.all_logits || i + 1 == c.tokens.size()) rows.push_back(static_cast<std::int32_t>(tokens.size()));
      tokens.push_back(c.tokens[i]);
      pos.push_back(p);
      slots.push_back(c.slots[i]);
      row_seq.push_back(static_cast<std::int32_t>(ci));
      row_ctx.push_back(p + 1);
      max_ctx = std::max(max_ctx, p + 1);
    }
    first_row.push_back(static_cast<std::int32_t>(tokens.size()));
    max_rows = std::max(max_rows, static_cast<int>(c.tokens.size()));
  }
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int32_t> meta;
  auto section = [&](const std::vector<std::int32_t>& v) {
    const std::size_t at = meta.size();
    meta.insert(meta.end(), v.begin(), v.end());
    return at;
  };
  const std::size_t o_tok = section(tokens), o_pos = section(pos), o_slot = section(slots), o_seq = section(row_seq),
                    o_ctx = section(row_ctx), o_tab = section(tables), o_first = section(first_row);
  if (meta_.bytes() < meta.size() * 4) meta_ = DeviceBuffer(b_, meta.size() * 4 * 2);
  b_.upload(meta_.as(), meta.data(), meta.size() * 4);
  const std::int32_t* dm = meta_.as<std::int32_t>();

  const std::int64_t h = hp_.hidden_size, hd = hp_.head_dim, nh = hp_.num_heads, nkv = hp_.num_kv_heads;
  const std::int64_t qd = nh * hd, kvd = nkv * hd, ffn = hp_.intermediate_size;
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  float* hidden = scratch(0, n * h);
  float* xn = scratch(1, n * h);
  float* q = scratch(2, n * qd);
  float* k = scratch(3, n * kvd);
  float* v = scratch(4, n * kvd);
  float* att = scratch(5, n * qd);
  float* tmp = scratch(6, n * h);
  float* gate = scratch(7, n * ffn);
  float* up = scratch(8, n * ffn);
  const float* factors = rope_factors_.bytes() ? rope_factors_.as<float>() : nullptr;
  const float theta = static_cast<float>(hp_.rope_theta), fscale = model::rope_freq_scale(hp_);

  b_.embedding(embd_.as<std::uint16_t>(), h, dm + o_tok, n, hidden);
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    const Layer& l = layers_[li];
    b_.rms_norm(hidden, l.attn_norm.as<float>(), xn, n, h, eps);
    b_.linear(xn, n, l.wq, q);
    b_.linear(xn, n, l.wk, k);
    b_.linear(xn, n, l.wv, v);
    if (l.bq.bytes()) b_.add_bias(q, l.bq.as<float>(), n, qd);
    if (l.bk.bytes()) b_.add_bias(k, l.bk.as<float>(), n, kvd);
    if (l.bv.bytes()) b_.add_bias(v, l.bv.as<float>(), n, kvd);
    b_.rope(q, dm + o_pos, n, nh, hd, theta, fscale, factors, rope_style_);
    b_.rope(k, dm + o_pos, n, nkv, hd, theta, fscale, factors, rope_style_);
    // The storage is this model's to write; its accessors are const for the CPU engine's readers.
    auto* kc = const_cast<std::uint16_t*>(kv.k_block<std::uint16_t>(static_cast<int>(li), 0));
    auto* vc = const_cast<std::uint16_t*>(kv.v_block<std::uint16_t>(static_cast<int>(li), 0));
    b_.kv_write(kc, vc, k, v, dm + o_slot, n, kvd);
    AttentionArgs a;
    a.q = q;
    a.out = att;
    a.k_cache = kc;
    a.v_cache = vc;
    a.block_tables = dm + o_tab;
    a.row_seq = dm + o_seq;
    a.row_ctx = dm + o_ctx;
    a.n_rows = static_cast<int>(n);
    a.num_heads = static_cast<int>(nh);
    a.num_kv_heads = static_cast<int>(nkv);
    a.head_dim = static_cast<int>(hd);
    a.block_size = L.block_size;
    a.max_blocks_per_seq = static_cast<int>(max_blocks);
    a.max_ctx = max_ctx;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    a.seq_first_row = dm + o_first;
    a.num_seqs = static_cast<int>(chunks.size());
    a.max_rows_per_seq = max_rows;
    b_.attention(a);
    b_.linear(att, n, l.wo, tmp);
    b_.add(hidden, tmp, n * h);
    b_.rms_norm(hidden, l.ffn_norm.as<float>(), xn, n, h, eps);
    b_.linear(xn, n, l.gate, gate);
    b_.linear(xn, n, l.up, up);
    b_.silu_mul(gate, up, n * ffn);
    b_.linear(gate, n, l.down, tmp);
    b_.add(hidden, tmp, n * h);
  }
  // Only the rows asked for go through the head: gather them (contiguous runs in one copy each).
  const std::int64_t nr = static_cast<std::int64_t>(rows.size());
  float* picked = xn;
  for (std::int64_t r = 0; r < nr;) {
    std::int64_t e = r + 1;
    while (e < nr && rows[e] == rows[e - 1] + 1) ++e;
    b_.copy(picked + r * h, hidden + static_cast<std::int64_t>(rows[r]) * h, static_cast<std::size_t>((e - r) * h) * sizeof(float));
    r = e;
  }
  b_.rms_norm(picked, out_norm_.as<float>(), picked, nr, h, eps);
  float* logits = scratch(9, static_cast<std::size_t>(nr * hp_.vocab_size));
  b_.linear(picked, nr, head_, logits);
  std::vector<float> out(static_cast<std::size_t>(nr * hp_.vocab_size));
  b_.download(out.data(), logits, out.size() * sizeof(float));
  return out;
}

}  // namespace mo::engine
