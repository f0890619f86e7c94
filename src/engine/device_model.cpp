#include "mo/engine/device_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/engine/ops/linear.h"
#include "mo/formats/ggml_types.h"
#include "mo/model/rope.h"
#include "mo/io/gguf_dequant.h"

namespace mo::engine {
namespace {

// f16 bits of every element of a matrix of any stored type.
std::vector<std::uint16_t> to_f16(const Matrix& m) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(m.rows * m.cols));
  if (m.type == ggml_id(GgmlType::F16)) {
    std::memcpy(out.data(), m.bytes.data(), out.size() * 2);
    return out;
  }
  std::vector<float> row(m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    ops::matrix_row(m, r, row.data());  // every CPU type, engine-internal Q4Z included
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const std::uint16_t h = f32_to_f16(row[c]);
      // An f32/BF16 weight past f16's range would become inf on the GPU: refuse rather than compute garbage.
      if ((h & 0x7c00) == 0x7c00 && std::isfinite(row[c]))
        throw Error(fmt::format("{}: weight {} at [{}, {}] is outside f16's range (±65504), which the GPU path stores float weights in",
                                m.name, row[c], r, c));
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
  DeviceBuffer buf = to_device(b_, v);
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
  const bool blocks = (m.type == ggml_id(GgmlType::Q8_0) && m.cols % 32 == 0) ||
                      ((m.type == ggml_id(GgmlType::Q4_K) || m.type == ggml_id(GgmlType::Q6_K)) && m.cols % 256 == 0);
  if (blocks) {
    L.kind = m.type == ggml_id(GgmlType::Q8_0) ? LinearKind::q8_0 : m.type == ggml_id(GgmlType::Q4_K) ? LinearKind::q4_k : LinearKind::q6_k;
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

namespace {

DeviceLinear host_linear(const Matrix& m) {
  DeviceLinear L;
  L.kind = LinearKind::host;
  L.rows = m.rows;
  L.cols = m.cols;
  L.weight = m.bytes.data();
  L.row_bytes = m.row_bytes;
  L.bytes = m.bytes.size();
  L.host = &m;
  return L;
}

const Matrix& matrix_of(const LayerWeights& l, LinearId id) {
  switch (id) {
    case LinearId::q: return l.wq;
    case LinearId::k: return l.wk;
    case LinearId::v: return l.wv;
    case LinearId::o: return l.wo;
    case LinearId::gate: return l.w_gate;
    case LinearId::up: return l.w_up;
    default: return l.w_down;
  }
}

// "q4_0", "f16", ... for a host matrix's stored type.
std::string type_label(const Matrix& m) {
  if (m.type == kPackedOnlyType) return "packed";
  const GgmlTypeInfo* info = ggml_type_info(m.type);
  return info ? info->name : fmt::format("type {}", m.type);
}

constexpr LinearId kLinears[] = {LinearId::q, LinearId::k, LinearId::v, LinearId::o, LinearId::gate, LinearId::up, LinearId::down};

}  // namespace

DeviceModel::DeviceModel(const ModelWeights& w, Backend& backend) : b_(backend), hp_(w.hp), rope_style_(w.rope_style) {
  if (hp_.num_experts > 0) throw UsageError("engine: mixture-of-experts models are not supported");
  if (b_.host_formats()) {
    rebind(w);
    return;
  }
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
    for (LinearId id : kLinears) d.lin[static_cast<int>(id)] = upload_linear(matrix_of(l, id));
    layers_.push_back(std::move(d));
  }
  b_.synchronize();
}

DeviceModel::DeviceModel(const model::Hparams& hp, RopeStyle rope_style, const std::vector<float>& rope_freq_factors, Backend& backend)
    : b_(backend), hp_(hp), rope_style_(rope_style) {
  if (b_.host_formats()) throw Error("DeviceModel: layer streaming is for device backends (the host backend reads the weights in place)");
  if (!rope_freq_factors.empty()) rope_factors_ = upload_floats(rope_freq_factors);
  layers_.resize(static_cast<std::size_t>(hp.num_layers));
}

void DeviceModel::set_layer(int layer, const LayerF32View& l) {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) throw Error(fmt::format("set_layer: no layer {}", layer));
  const std::int64_t h = hp_.hidden_size, qd = hp_.num_heads * hp_.head_dim, kvd = hp_.num_kv_heads * hp_.head_dim,
                     ffn = hp_.intermediate_size;
  const std::int64_t shape[7][2] = {{qd, h}, {kvd, h}, {kvd, h}, {h, qd}, {ffn, h}, {ffn, h}, {h, ffn}};
  Layer& d = layers_[layer];
  auto floats = [&](const std::vector<float>* v) { return v && !v->empty() ? upload_floats(*v) : DeviceBuffer(); };
  d.attn_norm = floats(l.attn_norm);
  d.ffn_norm = floats(l.ffn_norm);
  d.bq = floats(l.bq);
  d.bk = floats(l.bk);
  d.bv = floats(l.bv);
  for (int i = 0; i < 7; ++i) {
    const std::size_t bytes = static_cast<std::size_t>(shape[i][0] * shape[i][1]) * sizeof(float);
    d.streamed[i] = DeviceBuffer(b_, bytes);
    b_.upload(d.streamed[i].as(), l.linear[i], bytes);
    DeviceLinear& L = d.lin[i];
    L = DeviceLinear{};
    L.kind = LinearKind::f32;
    L.rows = shape[i][0];
    L.cols = shape[i][1];
    L.weight = d.streamed[i].as();
    L.bytes = bytes;
  }
}

void DeviceModel::drop_layer(int layer) {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) return;
  layers_[layer] = Layer{};
}

void DeviceModel::rebind(const ModelWeights& w) {
  if (!b_.host_formats()) return;  // uploaded copies do not move
  w_ = &w;
  head_ = host_linear(w.output);
  weight_bytes_ = w.matrix_bytes();
}

DeviceLinear DeviceModel::linear_of(int layer, LinearId id) const {
  if (host()) return host_linear(matrix_of(w_->layers[layer], id));
  return layers_[layer].lin[static_cast<int>(id)];
}

DeviceLinear DeviceModel::head() const { return host() ? host_linear(w_->output) : head_; }

const float* DeviceModel::floats_of(int layer, int which) const {
  if (host()) {
    const LayerWeights& l = w_->layers[layer];
    const std::vector<float>* v[] = {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv};
    return v[which]->empty() ? nullptr : v[which]->data();
  }
  const Layer& l = layers_[layer];
  const DeviceBuffer* v[] = {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv};
  return v[which]->bytes() ? v[which]->as<float>() : nullptr;
}

std::size_t DeviceModel::layer_linear_bytes() const {
  std::size_t n = 0;
  const int layers = host() ? static_cast<int>(w_->layers.size()) : static_cast<int>(layers_.size());
  for (int li = 0; li < layers; ++li)
    for (LinearId id : kLinears) n += linear_of(li, id).bytes;
  return n;
}

std::string DeviceModel::summary() const {
  std::map<std::string, int> counts;
  const int layers = host() ? static_cast<int>(w_->layers.size()) : static_cast<int>(layers_.size());
  for (int li = 0; li < layers; ++li)
    for (LinearId id : kLinears) {
      const DeviceLinear L = linear_of(li, id);
      std::string k = L.kind == LinearKind::host ? type_label(*L.host) : linear_kind_name(L.kind);
      if (L.kind == LinearKind::awq || L.kind == LinearKind::gptq)
        k += fmt::format(" {}-bit g{}{}", L.bits, L.group_size == L.cols ? std::string("-1") : std::to_string(L.group_size),
                         L.g_idx ? " act-order" : "");
      ++counts[k];
    }
  std::vector<std::string> parts;
  for (const auto& [k, n] : counts) parts.push_back(fmt::format("{} {}", n, k));
  const DeviceLinear h = head();
  return fmt::format("{} on {}: layer linears {}; head {}; {:.1f} MiB of weights", hp_.arch, b_.describe(), fmt::join(parts, ", "),
                     h.kind == LinearKind::host ? type_label(*h.host) : linear_kind_name(h.kind), weight_bytes_ / double(1 << 20));
}

float* DeviceModel::scratch(int index, std::size_t floats) {
  if (scratch_.size() <= static_cast<std::size_t>(index)) scratch_.resize(index + 1);
  DeviceBuffer& s = scratch_[index];
  if (s.bytes() < floats * sizeof(float)) s = DeviceBuffer(b_, std::max<std::size_t>(floats, 1) * sizeof(float));
  return s.as<float>();
}

DeviceModel::Step DeviceModel::prepare(std::span<const SeqChunk> chunks, const KvStorage& kv) {
  const KvLayout& L = kv.layout();
  if (L.num_kv_heads != hp_.num_kv_heads || L.head_dim != hp_.head_dim)
    throw Error("forward: the KV cache layout does not match the model");
  // Per-token metadata, built on the host and uploaded once per step.
  Step s;
  std::vector<std::int32_t> tokens, pos, row_seq, row_ctx;
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
      throw Error(
          fmt::format("forward: the block table covers {} positions, the chunk ends at {}", c.block_table.size() * L.block_size, end));
    for (const int b : c.block_table)
      if (b < 0 || b >= kv.num_blocks()) throw Error(fmt::format("forward: block {} is out of range [0, {})", b, kv.num_blocks()));
    std::copy(c.block_table.begin(), c.block_table.end(), tables.begin() + static_cast<std::ptrdiff_t>(ci * max_blocks));
    for (std::size_t i = 0; i < c.tokens.size(); ++i) {
      if (c.tokens[i] < 0 || c.tokens[i] >= hp_.vocab_size)
        throw Error(fmt::format("token id {} is outside the vocabulary [0, {})", c.tokens[i], hp_.vocab_size));
      if (c.slots[i] < 0 || c.slots[i] >= kv.num_slots())
        throw Error(fmt::format("forward: slot {} is out of range [0, {})", c.slots[i], kv.num_slots()));
      const int p = c.start_pos + static_cast<int>(i);
      if (c.all_logits || i + 1 == c.tokens.size()) s.rows.push_back(static_cast<std::int32_t>(tokens.size()));
      tokens.push_back(c.tokens[i]);
      pos.push_back(p);
      s.host_slots.push_back(c.slots[i]);
      row_seq.push_back(static_cast<std::int32_t>(ci));
      row_ctx.push_back(p + 1);
      max_ctx = std::max(max_ctx, p + 1);
    }
    first_row.push_back(static_cast<std::int32_t>(tokens.size()));
    max_rows = std::max(max_rows, static_cast<int>(c.tokens.size()));
  }
  s.n = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int32_t> meta;
  auto section = [&](const std::vector<std::int32_t>& v) {
    const std::size_t at = meta.size();
    meta.insert(meta.end(), v.begin(), v.end());
    return at;
  };
  const std::size_t o_tok = section(tokens), o_pos = section(pos), o_slot = section(s.host_slots), o_seq = section(row_seq),
                    o_ctx = section(row_ctx), o_tab = section(tables), o_first = section(first_row);
  if (meta_.bytes() < meta.size() * 4) meta_ = DeviceBuffer(b_, meta.size() * 4 * 2);
  b_.upload(meta_.as(), meta.data(), meta.size() * 4);
  const std::int32_t* dm = meta_.as<std::int32_t>();
  s.tokens = dm + o_tok;
  s.pos = dm + o_pos;
  s.slots = dm + o_slot;
  AttentionArgs& a = s.att;
  a.block_tables = dm + o_tab;
  a.row_seq = dm + o_seq;
  a.row_ctx = dm + o_ctx;
  a.n_rows = static_cast<int>(s.n);
  a.num_heads = static_cast<int>(hp_.num_heads);
  a.num_kv_heads = static_cast<int>(hp_.num_kv_heads);
  a.head_dim = static_cast<int>(hp_.head_dim);
  a.block_size = L.block_size;
  a.max_blocks_per_seq = static_cast<int>(max_blocks);
  a.max_ctx = max_ctx;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hp_.head_dim)));
  a.seq_first_row = dm + o_first;
  a.num_seqs = static_cast<int>(chunks.size());
  a.max_rows_per_seq = max_rows;
  return s;
}

void DeviceModel::self_attention_f32(const float* q, const float* k, const float* v, std::int64_t n, float scale, float* out) {
  const std::int64_t hd = hp_.head_dim, nh = hp_.num_heads, nkv = hp_.num_kv_heads, qd = nh * hd, kvd = nkv * hd;
  float* w = scratch(10, static_cast<std::size_t>(n * n));
  for (std::int64_t head = 0; head < nh; ++head) {
    const std::int64_t kvh = head / (nh / nkv);
    b_.gemm(false, true, n, n, hd, scale, q + head * hd, qd, k + kvh * hd, kvd, 0.0f, w, n);
    b_.causal_softmax(w, n, n);
    b_.gemm(false, false, n, hd, n, 1.0f, w, n, v + kvh * hd, kvd, 0.0f, out + head * hd, qd);
  }
}

void DeviceModel::layer_step(int li, int kv_layer, const Step& s, KvStorage& kv, float* hidden, const LinearObserver* observer,
                             bool exact_self) {
  const std::int64_t n = s.n, h = hp_.hidden_size, hd = hp_.head_dim, nh = hp_.num_heads, nkv = hp_.num_kv_heads;
  const std::int64_t qd = nh * hd, kvd = nkv * hd, ffn = hp_.intermediate_size;
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  // Every kernel is batch-invariant and rows are independent outside attention, so a long prompt's projections run
  // in token chunks on the host: the same results, with k/v/gate/up/normed rows sized for a chunk instead of the
  // prompt (the peak memory of a prefill). Observers see whole layers, so they get one chunk.
  const std::int64_t chunk = (observer != nullptr || !host()) ? n : std::min(n, kHostChunk);
  float* xn = scratch(1, chunk * h);  // also each linear's output before it is added to the residual
  float* q = scratch(2, n * qd);
  float* att = scratch(3, n * qd);
  float* work = scratch(4, chunk * std::max(2 * kvd, 2 * ffn));  // k, v; later gate, up
  float* k = work;
  float* v = work + chunk * kvd;
  // Observers see the backend's buffers (host memory for the host backend).
  auto observe = [&](LinearId id, const float* x, std::int64_t dim) {
    if (observer) (*observer)(li, id, x, n, dim);
  };
  const float* factors = host() ? (w_->rope_freq_factors.empty() ? nullptr : w_->rope_freq_factors.data())
                                : (rope_factors_.bytes() ? rope_factors_.as<float>() : nullptr);
  const float theta = static_cast<float>(hp_.rope_theta), fscale = model::rope_freq_scale(hp_);
  const DeviceLinear wq = linear_of(li, LinearId::q), wk = linear_of(li, LinearId::k), wv = linear_of(li, LinearId::v);
  const DeviceLinear* qkv[] = {&wq, &wk, &wv};
  const bool f32_kv = kv.layout().dtype == KvDtype::f32;  // host memory only (KvStorage refuses an f32 device cache)
  // The storage is this model's to write; its accessors are const for the readers.
  auto* kc = f32_kv ? nullptr : const_cast<std::uint16_t*>(kv.k_block<std::uint16_t>(kv_layer, 0));
  auto* vc = f32_kv ? nullptr : const_cast<std::uint16_t*>(kv.v_block<std::uint16_t>(kv_layer, 0));
  for (std::int64_t t0 = 0; t0 < n; t0 += chunk) {
    const std::int64_t m = std::min(chunk, n - t0);
    float* qc = q + t0 * qd;
    b_.rms_norm(hidden + t0 * h, floats_of(li, 0), xn, m, h, eps);
    observe(LinearId::q, xn, h);
    observe(LinearId::k, xn, h);
    observe(LinearId::v, xn, h);
    float* qkv_out[] = {qc, k, v};
    b_.linear_multi(xn, m, qkv, qkv_out, 3);
    if (const float* b = floats_of(li, 2)) b_.add_bias(qc, b, m, qd);
    if (const float* b = floats_of(li, 3)) b_.add_bias(k, b, m, kvd);
    if (const float* b = floats_of(li, 4)) b_.add_bias(v, b, m, kvd);
    b_.rope(qc, s.pos + t0, m, nh, hd, theta, fscale, factors, rope_style_);
    b_.rope(k, s.pos + t0, m, nkv, hd, theta, fscale, factors, rope_style_);
    if (exact_self) continue;  // attention reads k and v where they are (every row: chunk == n off the host)
    if (f32_kv)
      kv.write(kv_layer, std::span<const int>(s.host_slots.data() + t0, static_cast<std::size_t>(m)), k, v);
    else
      b_.kv_write(kc, vc, k, v, s.slots + t0, m, kvd);
  }
  AttentionArgs a = s.att;
  a.q = q;
  a.out = att;
  if (f32_kv) {
    a.k_cache_f32 = kv.k_block<float>(kv_layer, 0);
    a.v_cache_f32 = kv.v_block<float>(kv_layer, 0);
  } else {
    a.k_cache = kc;
    a.v_cache = vc;
  }
  if (exact_self)
    self_attention_f32(q, k, v, n, a.scale, att);
  else
    b_.attention(a);
  observe(LinearId::o, att, qd);
  const DeviceLinear wo = linear_of(li, LinearId::o), wg = linear_of(li, LinearId::gate), wu = linear_of(li, LinearId::up),
                     wd = linear_of(li, LinearId::down);
  const DeviceLinear* gu[] = {&wg, &wu};
  float* gate = work;
  float* up = work + chunk * ffn;
  for (std::int64_t t0 = 0; t0 < n; t0 += chunk) {
    const std::int64_t m = std::min(chunk, n - t0);
    float* hc = hidden + t0 * h;
    b_.linear(att + t0 * qd, m, wo, xn);
    b_.add(hc, xn, m * h);
    b_.rms_norm(hc, floats_of(li, 1), xn, m, h, eps);
    observe(LinearId::gate, xn, h);
    observe(LinearId::up, xn, h);
    float* gu_out[] = {gate, up};
    b_.linear_multi(xn, m, gu, gu_out, 2);
    b_.silu_mul(gate, up, m * ffn);
    observe(LinearId::down, gate, ffn);
    b_.linear(gate, m, wd, xn);
    b_.add(hc, xn, m * h);
  }
}

void DeviceModel::head_rows(const float* hidden, const std::vector<std::int32_t>& rows, float* out_host) {
  const std::int64_t h = hp_.hidden_size, nr = static_cast<std::int64_t>(rows.size());
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  // Only the rows asked for go through the head: gather them (contiguous runs in one copy each).
  float* picked = scratch(1, static_cast<std::size_t>(std::max<std::int64_t>(nr, 1) * h));
  for (std::int64_t r = 0; r < nr;) {
    std::int64_t e = r + 1;
    while (e < nr && rows[e] == rows[e - 1] + 1) ++e;
    b_.copy(picked + r * h, hidden + static_cast<std::int64_t>(rows[r]) * h, static_cast<std::size_t>((e - r) * h) * sizeof(float));
    r = e;
  }
  const float* norm = host() ? w_->output_norm.data() : out_norm_.as<float>();
  b_.rms_norm(picked, norm, picked, nr, h, eps);
  const DeviceLinear hd = head();
  if (host()) return b_.linear(picked, nr, hd, out_host);
  float* logits = scratch(9, static_cast<std::size_t>(nr * hp_.vocab_size));
  b_.linear(picked, nr, hd, logits);
  b_.download(out_host, logits, static_cast<std::size_t>(nr * hp_.vocab_size) * sizeof(float));
}

std::vector<float> DeviceModel::forward(std::span<const SeqChunk> chunks, KvStorage& kv) {
  if (kv.device() != &b_ && !(host() && kv.device() == nullptr))
    throw Error("DeviceModel::forward: the KV cache is not in this backend's memory");
  if (kv.layout().num_layers != static_cast<int>(hp_.num_layers)) throw Error("forward: the KV cache layout does not match the model");
  const Step s = prepare(chunks, kv);
  const std::int64_t h = hp_.hidden_size;
  float* hidden = scratch(0, s.n * h);
  if (host()) {
    embed(std::span<const std::int32_t>(chunks.empty() ? nullptr : s.tokens, static_cast<std::size_t>(s.n)), hidden);
  } else {
    b_.embedding(embd_.as<std::uint16_t>(), h, s.tokens, s.n, hidden);
  }
  for (int li = 0; li < static_cast<int>(hp_.num_layers); ++li) layer_step(li, li, s, kv, hidden, nullptr);
  std::vector<float> out(s.rows.size() * static_cast<std::size_t>(hp_.vocab_size));
  head_rows(hidden, s.rows, out.data());
  return out;
}

void DeviceModel::embed(std::span<const std::int32_t> tokens, float* hidden) {
  const std::int64_t h = hp_.hidden_size;
  for (std::size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= hp_.vocab_size)
      throw Error(fmt::format("token id {} is outside the vocabulary [0, {})", tokens[t], hp_.vocab_size));
  if (host()) {
    for (std::size_t t = 0; t < tokens.size(); ++t) ops::matrix_row(w_->token_embd, tokens[t], hidden + static_cast<std::int64_t>(t) * h);
    return;
  }
  if (embd_.as() == nullptr) throw Error("embed: this device model streams layers and has no embedding table");
  if (tokens.empty()) return;
  DeviceBuffer ids(b_, tokens.size() * sizeof(std::int32_t));
  b_.upload(ids.as(), tokens.data(), ids.bytes());
  b_.embedding(embd_.as<std::uint16_t>(), h, ids.as<std::int32_t>(), static_cast<std::int64_t>(tokens.size()), hidden);
}

void DeviceModel::linear(int layer, LinearId id, const float* x, std::int64_t n, float* y) {
  if (!host() && (layer < 0 || layer >= static_cast<int>(layers_.size()) || layers_[layer].lin[0].weight == nullptr))
    throw Error(fmt::format("linear: layer {} has no weights on the device", layer));
  if (n > 0) b_.linear(x, n, linear_of(layer, id), y);
}

void DeviceModel::run_layer(int layer, float* hidden, std::int64_t n, std::int32_t start_pos, const LinearObserver* observer) {
  // The block over a private one-layer KV cache holding just this block, f32 (exact K/V for the quantizers) on
  // the host; a device keeps f16 caches only, so there attention runs in f32 over the block's own K/V instead.
  if (start_pos != 0) throw Error("run_layer: the block must start at position 0 (it attends only to itself)");
  const int layers = host() ? static_cast<int>(w_->layers.size()) : static_cast<int>(layers_.size());
  if (layer < 0 || layer >= layers) throw Error(fmt::format("run_layer: no layer {}", layer));
  if (!host() && layers_[layer].lin[0].weight == nullptr)
    throw Error(fmt::format("run_layer: layer {} has no weights on the device", layer));
  if (n <= 0) return;
  KvLayout L;
  L.num_layers = 1;
  L.num_kv_heads = static_cast<int>(hp_.num_kv_heads);
  L.head_dim = static_cast<int>(hp_.head_dim);
  L.block_size = 16;
  L.dtype = host() ? KvDtype::f32 : KvDtype::f16;
  const int blocks = static_cast<int>((n + L.block_size - 1) / L.block_size);
  KvStorage kv(L, blocks, host() ? nullptr : &b_);
  std::vector<int> table(blocks), slots(n);
  for (int b = 0; b < blocks; ++b) table[b] = b;
  for (std::int64_t i = 0; i < n; ++i) slots[i] = static_cast<int>(i);
  std::vector<std::int32_t> dummy_tokens(n, 0);
  SeqChunk c{dummy_tokens, 0, slots, table, false};
  const Step s = prepare(std::span<const SeqChunk>(&c, 1), kv);
  layer_step(layer, 0, s, kv, hidden, observer, !host());
}

void DeviceModel::logits(const float* hidden, std::int64_t n, float* out) {
  if (!host() && head_.weight == nullptr) throw Error("logits: this device model streams layers and has no output head");
  std::vector<std::int32_t> rows(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) rows[i] = static_cast<std::int32_t>(i);
  head_rows(hidden, rows, out);
}

}  // namespace mo::engine
