#include "mo/engine/weights.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>
#include <algorithm>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/model/rope.h"
#include "mo/formats/gguf_blocks.h"
#include "quantized_weights.h"

namespace mo::engine {
namespace {

Matrix matrix_of(const model::StoredTensor& t, std::int64_t rows, std::int64_t cols) {
  if (!t.ggml_type) throw Error(fmt::format("{}: tensors of type {} are not supported by the engine", t.file_name, t.dtype));
  if (t.ne.size() != 2 || static_cast<std::int64_t>(t.ne[0]) != cols || static_cast<std::int64_t>(t.ne[1]) != rows)
    throw Error(fmt::format("{}: expected shape [{}, {}] (rows, cols), found ne {}", t.file_name, rows, cols, fmt::join(t.ne, "x")));
  Matrix m;
  m.name = t.name;
  m.type = *t.ggml_type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = ggml_row_bytes(m.type, static_cast<std::uint64_t>(cols));
  m.bytes = t.bytes;
  return m;
}

std::vector<float> vector_of(const model::StoredTensor& t, std::int64_t n) {
  if (!t.ggml_type || t.n_elements() != static_cast<std::uint64_t>(n))
    throw Error(fmt::format("{}: expected {} elements of a float type, found {} of {}", t.file_name, n, t.n_elements(), t.dtype));
  std::vector<float> v(n);
  gguf::dequantize_row(*t.ggml_type, t.bytes.data(), v.data(), n);
  return v;
}

const model::StoredTensor& need(const model::ModelFiles& f, const std::string& name) {
  const auto* t = f.find(name);
  if (!t) throw Error(fmt::format("{}: tensor '{}' is missing", f.path(), name));
  return *t;
}

// Where a block type keeps its f16 scale (and min), and values that give weights of about N(0, 0.02)
// when the rest of the block is random bytes.
struct DummyBlock {
  std::uint32_t type;
  std::size_t bytes, d_at;
  float d;
  int dmin_at;  // -1: no min
  float dmin;
};

const DummyBlock* dummy_block(std::uint32_t type) {
  using namespace formats;
  static const DummyBlock blocks[] = {
      {2, sizeof(formats::BlockQ4_0), offsetof(formats::BlockQ4_0, d), 0.005f, -1, 0},
      {3, sizeof(formats::BlockQ4_1), offsetof(formats::BlockQ4_1, d), 0.005f, static_cast<int>(offsetof(formats::BlockQ4_1, m)), -0.04f},
      {6, sizeof(formats::BlockQ5_0), offsetof(formats::BlockQ5_0, d), 0.0025f, -1, 0},
      {7, sizeof(formats::BlockQ5_1), offsetof(formats::BlockQ5_1, d), 0.0025f, static_cast<int>(offsetof(formats::BlockQ5_1, m)), -0.04f},
      {8, sizeof(formats::BlockQ8_0), offsetof(formats::BlockQ8_0, d), 0.0003f, -1, 0},
      {10, sizeof(formats::BlockQ2_K), offsetof(formats::BlockQ2_K, d), 0.002f, static_cast<int>(offsetof(formats::BlockQ2_K, dmin)),
       0.001f},
      {11, sizeof(formats::BlockQ3_K), offsetof(formats::BlockQ3_K, d), 0.0002f, -1, 0},
      {12, sizeof(formats::BlockQ4_K), offsetof(formats::BlockQ4_K, d), 0.00004f, static_cast<int>(offsetof(formats::BlockQ4_K, dmin)),
       0.0003f},
      {13, sizeof(formats::BlockQ5_K), offsetof(formats::BlockQ5_K, d), 0.00002f, static_cast<int>(offsetof(formats::BlockQ5_K, dmin)),
       0.0003f},
      {14, sizeof(formats::BlockQ6_K), offsetof(formats::BlockQ6_K, d), 0.00001f, -1, 0},
  };
  for (const auto& b : blocks)
    if (b.type == type) return &b;
  return nullptr;
}

}  // namespace

std::uint64_t ModelWeights::matrix_bytes() const {
  std::uint64_t n = token_embd.bytes.size() + (output.bytes.data() != token_embd.bytes.data() ? output.bytes.size() : 0);
  for (const auto& l : layers)
    for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      if (m->type != kPackedOnlyType)
        n += m->bytes.size();
      else
        n += m->packed->qweight.size() + m->packed->qzeros.size() + m->packed->scales.size() + m->packed->g_idx.size();
    }
  return n;
}

ModelWeights bind_weights(const model::ModelFiles& f) {
  ModelWeights w;
  w.hp = f.shape().hp;
  const auto& hp = w.hp;
  const std::int64_t h = hp.hidden_size, q = hp.num_heads * hp.head_dim, kv = hp.num_kv_heads * hp.head_dim, ffn = hp.intermediate_size;
  // Quantized HF checkpoints: their linears are decoded into w.owned (quantized_weights.h says how).
  std::optional<detail::QuantizedLinears> quantized;
  if (f.format() == "safetensors" && !f.quantization_config().is_null()) quantized.emplace(f);
  auto linear = [&](const std::string& base, std::int64_t rows, std::int64_t cols) {
    if (quantized)
      if (auto m = quantized->load(base, rows, cols, w.owned)) return *m;
    return matrix_of(need(f, base + ".weight"), rows, cols);
  };
  w.token_embd = matrix_of(need(f, "token_embd.weight"), hp.vocab_size, h);
  if (auto m = quantized ? quantized->load("output", hp.vocab_size, h, w.owned) : std::nullopt)
    w.output = *m;
  else
    w.output = f.find("output.weight") ? matrix_of(*f.find("output.weight"), hp.vocab_size, h) : w.token_embd;
  w.output_norm = vector_of(need(f, "output_norm.weight"), h);
  for (int i = 0; i < hp.num_layers; ++i) {
    auto n = [i](const char* part) { return fmt::format("blk.{}.{}", i, part); };
    LayerWeights l;
    l.attn_norm = vector_of(need(f, n("attn_norm.weight")), h);
    l.ffn_norm = vector_of(need(f, n("ffn_norm.weight")), h);
    l.wq = linear(n("attn_q"), q, h);
    l.wk = linear(n("attn_k"), kv, h);
    l.wv = linear(n("attn_v"), kv, h);
    l.wo = linear(n("attn_output"), h, q);
    l.w_gate = linear(n("ffn_gate"), ffn, h);
    l.w_up = linear(n("ffn_up"), ffn, h);
    l.w_down = linear(n("ffn_down"), h, ffn);
    if (const auto* b = f.find(n("attn_q.bias"))) l.bq = vector_of(*b, q);
    if (const auto* b = f.find(n("attn_k.bias"))) l.bk = vector_of(*b, kv);
    if (const auto* b = f.find(n("attn_v.bias"))) l.bv = vector_of(*b, kv);
    w.layers.push_back(std::move(l));
  }
  if (quantized) quantized->log_summary();
  // HF checkpoints keep Q/K rows in rotate-half order (quantized ones too); GGUF Llama files were permuted to pairs.
  w.rope_style = (f.format() == "safetensors" || hp.arch == "qwen2") ? RopeStyle::neox : RopeStyle::normal;
  if (const auto* rf = f.find("rope_freqs.weight"))
    w.rope_freq_factors = vector_of(*rf, hp.head_dim / 2);
  else if (hp.rope_scaling.type == "llama3")
    w.rope_freq_factors = model::llama3_rope_factors(hp);
  return w;
}

namespace {

// splitmix64: a fast counter-based generator, so 13B dummy weights take seconds, not minutes.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// fn(begin, end) over [0, n) on all hardware threads (large dummy models: seconds instead of minutes).
template <class Fn>
void parallel_ranges(std::int64_t n, Fn&& fn) {
  const std::int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  if (n < (1 << 20) || threads == 1) return fn(0, n);
  std::vector<std::thread> pool;
  const std::int64_t step = (n + threads - 1) / threads;
  for (std::int64_t b = 0; b < n; b += step) pool.emplace_back([&fn, b, e = std::min(n, b + step)] { fn(b, e); });
  for (auto& t : pool) t.join();
}

// About N(0, sd) from four random bytes (Irwin-Hall: sum of 4 uniforms has sd 147.8 in byte units).
float normal_of(std::uint32_t r, float sd) {
  const int sum =
      static_cast<int>(r & 255) + static_cast<int>((r >> 8) & 255) + static_cast<int>((r >> 16) & 255) + static_cast<int>(r >> 24);
  return static_cast<float>(sum - 510) * (sd / 147.8f);
}

void random_bytes(std::uint8_t* p, std::size_t n, std::uint64_t stream) {
  std::size_t i = 0;
  for (std::uint64_t c = 0; i + 8 <= n; i += 8, ++c) {
    const std::uint64_t r = mix(stream ^ (c * 0x100000001b3ull));
    std::memcpy(p + i, &r, 8);
  }
  const std::uint64_t r = mix(stream ^ 0xabcdefull);
  for (int k = 0; i < n; ++i, ++k) p[i] = static_cast<std::uint8_t>(r >> (8 * k));
}

// The layer structure shared by the dummy builders; `make(name, rows, cols)` makes one matrix.
template <class Make>
void dummy_layers(ModelWeights& w, Make&& make) {
  const auto& hp = w.hp;
  const std::int64_t h = hp.hidden_size, q = hp.num_heads * hp.head_dim, kv = hp.num_kv_heads * hp.head_dim, ffn = hp.intermediate_size;
  w.output_norm.assign(h, 1.0f);
  for (int i = 0; i < hp.num_layers; ++i) {
    LayerWeights l;
    l.attn_norm.assign(h, 1.0f);
    l.ffn_norm.assign(h, 1.0f);
    l.wq = make(fmt::format("blk.{}.attn_q.weight", i), q, h);
    l.wk = make(fmt::format("blk.{}.attn_k.weight", i), kv, h);
    l.wv = make(fmt::format("blk.{}.attn_v.weight", i), kv, h);
    l.wo = make(fmt::format("blk.{}.attn_output.weight", i), h, q);
    l.w_gate = make(fmt::format("blk.{}.ffn_gate.weight", i), ffn, h);
    l.w_up = make(fmt::format("blk.{}.ffn_up.weight", i), ffn, h);
    l.w_down = make(fmt::format("blk.{}.ffn_down.weight", i), h, ffn);
    if (hp.qkv_bias) {
      l.bq.assign(q, 0.0f);
      l.bk.assign(kv, 0.0f);
      l.bv.assign(kv, 0.0f);
    }
    w.layers.push_back(std::move(l));
  }
  w.rope_style = hp.arch == "qwen2" ? RopeStyle::neox : RopeStyle::normal;
  if (hp.rope_scaling.type == "llama3") w.rope_freq_factors = model::llama3_rope_factors(hp);
}

}  // namespace

ModelWeights dummy_weights(const model::Hparams& hp, std::uint32_t type, std::uint64_t seed) {
  const DummyBlock* block = dummy_block(type);
  if (type != 0 && type != 1 && type != 30 && !block)
    throw UsageError(
        fmt::format("load-format dummy: weight type {} is not one of f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
                    "q2_K, q3_K, q4_K, q5_K, q6_K",
                    type));
  ModelWeights w;
  w.hp = hp;
  std::uint64_t stream = mix(seed);
  // Fills one matrix with ~N(0, 0.02) weights (block types: random quants with a matching scale).
  auto make = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    Matrix m;
    m.name = std::move(name);
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = ggml_row_bytes(type, static_cast<std::uint64_t>(cols));
    auto& buf = w.owned.emplace_back(m.row_bytes * rows);
    stream = mix(stream);
    if (block) {
      random_bytes(buf.data(), buf.size(), stream);
      const std::uint16_t d = f32_to_f16(block->d), dmin = f32_to_f16(block->dmin);
      for (std::size_t off = 0; off < buf.size(); off += block->bytes) {
        std::memcpy(&buf[off + block->d_at], &d, 2);
        if (block->dmin_at >= 0) std::memcpy(&buf[off + block->dmin_at], &dmin, 2);
      }
    } else {
      // Counter-based values, so threads fill disjoint ranges with the result a single thread gives.
      const std::uint64_t st = stream;
      parallel_ranges(rows * cols, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          const float v = normal_of(static_cast<std::uint32_t>(mix(st + static_cast<std::uint64_t>(i))), 0.02f);
          if (type == 0)
            std::memcpy(&buf[4 * i], &v, 4);
          else {
            std::uint16_t bits = type == 1 ? f32_to_f16(v) : f32_to_bf16(v);
            std::memcpy(&buf[2 * i], &bits, 2);
          }
        }
      });
    }
    m.bytes = {buf.data(), buf.size()};
    return m;
  };
  const std::int64_t h = hp.hidden_size;
  w.token_embd = make("token_embd.weight", hp.vocab_size, h);
  w.output = hp.tied_embeddings ? w.token_embd : make("output.weight", hp.vocab_size, h);
  dummy_layers(w, make);
  return w;
}

ModelWeights dummy_awq_weights(const model::Hparams& hp, std::int64_t group_size, std::uint64_t seed) {
  ModelWeights w = dummy_weights(
      [&] {
        model::Hparams none = hp;  // embeddings and head only: f16, as AutoAWQ keeps them
        none.num_layers = 0;
        return none;
      }(),
      1, seed);
  w.hp = hp;
  std::uint64_t stream = mix(seed ^ 0xa3a3ull);
  auto make = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    if (rows % 8 != 0 || cols % group_size != 0)
      throw UsageError(fmt::format("dummy awq: {} [{}, {}] needs out % 8 == 0 and in % {} == 0", name, rows, cols, group_size));
    auto p = std::make_shared<PackedIntLinear>();
    p->awq = true;
    p->bits = 4;
    p->group_size = group_size;
    p->groups = cols / group_size;
    // References taken after all three: an emplace_back may move the earlier elements (their buffers stay).
    w.owned.emplace_back(static_cast<std::size_t>(cols * rows / 8) * 4);
    w.owned.emplace_back(static_cast<std::size_t>(p->groups * rows / 8) * 4);
    w.owned.emplace_back(static_cast<std::size_t>(p->groups * rows) * 2);
    auto& qw = w.owned[w.owned.size() - 3];
    auto& qz = w.owned[w.owned.size() - 2];
    auto& sc = w.owned[w.owned.size() - 1];
    random_bytes(qw.data(), qw.size(), stream = mix(stream));
    std::fill(qz.begin(), qz.end(), std::uint8_t{0x88});  // every zero = 8, the middle of 0..15
    const std::uint16_t s = f32_to_f16(0.02f / 4.6f);     // codes uniform in 0..15 -> sd about 0.02
    for (std::size_t i = 0; i < sc.size(); i += 2) std::memcpy(&sc[i], &s, 2);
    p->qweight = {qw.data(), qw.size()};
    p->qzeros = {qz.data(), qz.size()};
    p->scales = {sc.data(), sc.size()};
    Matrix m;
    m.name = std::move(name);
    m.type = kPackedOnlyType;
    m.rows = rows;
    m.cols = cols;
    m.packed = std::move(p);
    return m;
  };
  dummy_layers(w, make);
  return w;
}

}  // namespace mo::engine
