#include "mo/engine/engine.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/engine/device_model.h"
#include "mo/engine/ops/basic.h"
#include "mo/engine/ops/linear.h"
#include "mo/model/rope.h"

namespace mo::engine {
namespace {

void add_bias(float* y, const std::vector<float>& b, std::int64_t n, std::int64_t d) {
  if (b.empty()) return;
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) y[t * d + i] += b[i];
}

// One chunk's K or V for one KV head over positions [0, ctx), decoded to f32: out is [ctx, head_dim].
void gather_kv(const KvStorage& kv, int layer, bool values, std::span<const int> blocks, int ctx, int kv_head, float* out) {
  const KvLayout& L = kv.layout();
  const std::int64_t hd = L.head_dim, row = static_cast<std::int64_t>(L.num_kv_heads) * hd;
  for (int p = 0; p < ctx; ++p) {
    const int block = blocks[p / L.block_size], off = p % L.block_size;
    const std::int64_t at = off * row + kv_head * hd;
    if (L.dtype == KvDtype::f32) {
      const float* src = (values ? kv.v_block<float>(layer, block) : kv.k_block<float>(layer, block)) + at;
      std::memcpy(out + p * hd, src, hd * sizeof(float));
    } else {
      const std::uint16_t* src = (values ? kv.v_block<std::uint16_t>(layer, block) : kv.k_block<std::uint16_t>(layer, block)) + at;
      for (std::int64_t i = 0; i < hd; ++i) out[p * hd + i] = f16_to_f32(src[i]);
    }
  }
}

}  // namespace

const char* linear_name(LinearId id) {
  switch (id) {
    case LinearId::q: return "q_proj";
    case LinearId::k: return "k_proj";
    case LinearId::v: return "v_proj";
    case LinearId::o: return "o_proj";
    case LinearId::gate: return "gate_proj";
    case LinearId::up: return "up_proj";
    case LinearId::down: return "down_proj";
  }
  return "?";
}

Engine::Engine(ModelWeights weights, ThreadPool& pool, Device device) : w_(std::move(weights)), pool_(pool) {
  if (device == Device::cuda) use_backend(make_cuda_backend(0));
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;

void Engine::use_backend(std::unique_ptr<Backend> backend) {
  device_model_.reset();
  backend_ = std::move(backend);
  if (backend_) device_model_ = std::make_unique<DeviceModel>(w_, *backend_);
}

KvLayout Engine::kv_layout(int block_size, KvDtype dtype) const {
  KvLayout L;
  L.num_layers = static_cast<int>(w_.hp.num_layers);
  L.num_kv_heads = static_cast<int>(w_.hp.num_kv_heads);
  L.head_dim = static_cast<int>(w_.hp.head_dim);
  L.block_size = block_size;
  L.dtype = dtype;
  L.validate();
  return L;
}

void Engine::embed(std::span<const std::int32_t> tokens, float* hidden) const {
  const std::int64_t h = w_.hp.hidden_size;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= w_.hp.vocab_size)
      throw Error(fmt::format("token id {} is outside the vocabulary [0, {})", tokens[t], w_.hp.vocab_size));
    ops::matrix_row(w_.token_embd, tokens[t], hidden + t * h);
  }
}

void Engine::layer_step(int li, int kv_layer, float* hidden, std::int64_t n, std::span<const SeqChunk> chunks, KvStorage& kv,
                        const LinearObserver* observer) {
  const auto& hp = w_.hp;
  const LayerWeights& l = w_.layers[li];
  const std::int64_t h = hp.hidden_size, hd = hp.head_dim, nh = hp.num_heads, nkv = hp.num_kv_heads;
  const std::int64_t qd = nh * hd, kvd = nkv * hd, ffn = hp.intermediate_size;
  const float eps = static_cast<float>(hp.rms_norm_eps);
  auto observe = [&](LinearId id, const float* x, std::int64_t dim) {
    if (observer) (*observer)(li, id, x, n, dim);
  };

  std::vector<float> xn(n * h), q(n * qd), k(n * kvd), v(n * kvd), att(n * qd), tmp(n * h);
  ops::rms_norm(hidden, l.attn_norm.data(), xn.data(), n, h, eps);
  observe(LinearId::q, xn.data(), h);
  observe(LinearId::k, xn.data(), h);
  observe(LinearId::v, xn.data(), h);
  ops::linear(xn.data(), n, l.wq, q.data(), pool_);
  ops::linear(xn.data(), n, l.wk, k.data(), pool_);
  ops::linear(xn.data(), n, l.wv, v.data(), pool_);
  add_bias(q.data(), l.bq, n, qd);
  add_bias(k.data(), l.bk, n, kvd);
  add_bias(v.data(), l.bv, n, kvd);

  // RoPE at each token's position, then store K/V at its slot.
  std::vector<int> slots;
  slots.reserve(n);
  std::int64_t t = 0;
  for (const auto& c : chunks) {
    for (std::size_t i = 0; i < c.tokens.size(); ++i, ++t) {
      const std::int64_t pos = c.start_pos + static_cast<std::int64_t>(i);
      ops::rope(q.data() + t * qd, nh, hd, pos, static_cast<float>(hp.rope_theta), model::rope_freq_scale(hp), w_.rope_freq_factors, w_.rope_style);
      ops::rope(k.data() + t * kvd, nkv, hd, pos, static_cast<float>(hp.rope_theta), model::rope_freq_scale(hp), w_.rope_freq_factors, w_.rope_style);
      slots.push_back(c.slots[i]);
    }
  }
  kv.write(kv_layer, slots, k.data(), v.data());

  // Attention: one task per (chunk, KV head); each decodes the chunk's context once and serves the
  // query heads that share that KV head (GQA).
  std::vector<std::int64_t> first_token(chunks.size());
  for (std::size_t c = 0, acc = 0; c < chunks.size(); ++c) {
    first_token[c] = static_cast<std::int64_t>(acc);
    acc += chunks[c].tokens.size();
  }
  const std::int64_t group = nh / nkv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  pool_.parallel_for(0, static_cast<std::int64_t>(chunks.size()) * nkv, [&](std::int64_t b, std::int64_t e, int) {
    std::vector<float> keys, vals, scores;
    for (std::int64_t task = b; task < e; ++task) {
      const SeqChunk& c = chunks[task / nkv];
      const int kvh = static_cast<int>(task % nkv);
      const int ctx = c.start_pos + static_cast<int>(c.tokens.size());
      keys.resize(static_cast<std::size_t>(ctx) * hd);
      vals.resize(static_cast<std::size_t>(ctx) * hd);
      scores.resize(ctx);
      gather_kv(kv, kv_layer, false, c.block_table, ctx, kvh, keys.data());
      gather_kv(kv, kv_layer, true, c.block_table, ctx, kvh, vals.data());
      for (std::size_t i = 0; i < c.tokens.size(); ++i) {
        const std::int64_t tok = first_token[task / nkv] + static_cast<std::int64_t>(i);
        const int visible = c.start_pos + static_cast<int>(i) + 1;  // causal: positions up to its own
        for (std::int64_t g = 0; g < group; ++g) {
          const std::int64_t head = kvh * group + g;
          const float* qh = q.data() + tok * qd + head * hd;
          for (int p = 0; p < visible; ++p) scores[p] = ops::dot_f32(qh, keys.data() + p * hd, hd) * scale;
          ops::softmax(scores.data(), visible);
          float* out = att.data() + tok * qd + head * hd;
          std::fill(out, out + hd, 0.0f);
          for (int p = 0; p < visible; ++p) {
            const float s = scores[p];
            const float* vp = vals.data() + p * hd;
            for (std::int64_t d = 0; d < hd; ++d) out[d] += s * vp[d];
          }
        }
      }
    }
  });

  observe(LinearId::o, att.data(), qd);
  ops::linear(att.data(), n, l.wo, tmp.data(), pool_);
  for (std::int64_t i = 0; i < n * h; ++i) hidden[i] += tmp[i];

  std::vector<float> gate(n * ffn), up(n * ffn);
  ops::rms_norm(hidden, l.ffn_norm.data(), xn.data(), n, h, eps);
  observe(LinearId::gate, xn.data(), h);
  observe(LinearId::up, xn.data(), h);
  ops::linear(xn.data(), n, l.w_gate, gate.data(), pool_);
  ops::linear(xn.data(), n, l.w_up, up.data(), pool_);
  ops::silu_mul(gate.data(), up.data(), n * ffn);
  observe(LinearId::down, gate.data(), ffn);
  ops::linear(gate.data(), n, l.w_down, tmp.data(), pool_);
  for (std::int64_t i = 0; i < n * h; ++i) hidden[i] += tmp[i];
}

std::vector<float> Engine::forward(std::span<const SeqChunk> chunks, KvStorage& kv) {
  if (kv.device() || device_model_) {
    if (!device_model_ || kv.device() != backend_.get())
      throw Error("forward: the KV cache and the engine are on different devices (make it with Engine::kv_device())");
    return device_model_->forward(chunks, kv);
  }
  std::vector<std::int32_t> tokens;
  std::vector<std::int64_t> rows;  // token indices whose logits are returned
  for (const auto& c : chunks) {
    if (c.tokens.empty()) throw Error("forward: a sequence chunk has no tokens");
    if (c.slots.size() != c.tokens.size()) throw Error("forward: a chunk needs one KV slot per token");
    const std::int64_t first = static_cast<std::int64_t>(tokens.size());
    tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
    if (c.all_logits) {
      for (std::size_t i = 0; i < c.tokens.size(); ++i) rows.push_back(first + static_cast<std::int64_t>(i));
    } else {
      rows.push_back(static_cast<std::int64_t>(tokens.size()) - 1);
    }
  }
  const std::int64_t n = static_cast<std::int64_t>(tokens.size()), h = w_.hp.hidden_size;
  std::vector<float> hidden(n * h);
  embed(tokens, hidden.data());
  for (int li = 0; li < static_cast<int>(w_.layers.size()); ++li) layer_step(li, li, hidden.data(), n, chunks, kv, nullptr);
  std::vector<float> picked(rows.size() * h);
  for (std::size_t r = 0; r < rows.size(); ++r) std::memcpy(&picked[r * h], &hidden[rows[r] * h], h * sizeof(float));
  std::vector<float> out(rows.size() * w_.hp.vocab_size);
  logits(picked.data(), static_cast<std::int64_t>(rows.size()), out.data());
  return out;
}

void Engine::run_layer(int layer, float* hidden, std::int64_t n, std::int32_t start_pos, const LinearObserver* observer) {
  // The same layer code as forward(), over a private one-layer KV cache holding just this block.
  if (start_pos != 0) throw Error("run_layer: the block must start at position 0 (it attends only to itself)");
  KvLayout L = kv_layout(16, KvDtype::f32);
  L.num_layers = 1;
  const int blocks = static_cast<int>((start_pos + n + L.block_size - 1) / L.block_size);
  KvStorage kv(L, blocks);
  std::vector<int> table(blocks), slots(n);
  for (int b = 0; b < blocks; ++b) table[b] = b;
  for (std::int64_t i = 0; i < n; ++i) slots[i] = static_cast<int>(start_pos + i);
  std::vector<std::int32_t> dummy_tokens(n, 0);
  SeqChunk c{dummy_tokens, start_pos, slots, table, false};
  layer_step(layer, 0, hidden, n, std::span<const SeqChunk>(&c, 1), kv, observer);
}

void Engine::logits(const float* hidden, std::int64_t n, float* out) {
  const std::int64_t h = w_.hp.hidden_size;
  std::vector<float> xn(n * h);
  ops::rms_norm(hidden, w_.output_norm.data(), xn.data(), n, h, static_cast<float>(w_.hp.rms_norm_eps));
  ops::linear(xn.data(), n, w_.output, out, pool_);
}

}  // namespace mo::engine
