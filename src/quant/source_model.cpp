#include "source_model.h"

#include <fmt/format.h>

#include <filesystem>

#include "mo/model/model_presets.h"
#include "mo/core/error.h"
#include "mo/engine/ops/linear.h"
#include "mo/io/json_file.h"
#include "mo/model/model_check.h"
#include "mo/tokenizer/chat_template.h"

namespace mo::quant {
namespace {

using engine::LinearId;

engine::Matrix f32_view(const std::string& name, const std::vector<float>& w, std::int64_t rows, std::int64_t cols) {
  engine::Matrix m;
  m.name = name;
  m.type = 0;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
  m.bytes = {reinterpret_cast<const std::uint8_t*>(w.data()), w.size() * sizeof(float)};
  return m;
}

std::vector<float> decode(const engine::Matrix& m) {
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) ops::matrix_row(m, r, out.data() + r * m.cols);
  return out;
}

engine::Matrix* matrix_of(engine::LayerWeights& l, LinearId id) {
  switch (id) {
    case LinearId::q: return &l.wq;
    case LinearId::k: return &l.wk;
    case LinearId::v: return &l.wv;
    case LinearId::o: return &l.wo;
    case LinearId::gate: return &l.w_gate;
    case LinearId::up: return &l.w_up;
    case LinearId::down: return &l.w_down;
  }
  return nullptr;
}

// Uniform weights with the standard deviation of the engine's dummy weights (0.02): cheap to make
// for 7B-sized layers, and what is measured (time, memory) does not depend on the distribution.
void fill_random(std::vector<float>& w, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const float a = 0.02f * 1.7320508f;
  for (float& v : w) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = (static_cast<float>(s >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * a;
  }
}

}  // namespace

SourceModel::SourceModel(const std::string& path, bool dummy, std::shared_ptr<ThreadPool> pool, ops::Batching batching)
    : path_(path), dummy_(dummy) {
  if (dummy) {
    model::Hparams hp = model::load_model_shape(path).hp;
    model::Hparams no_layers = hp;
    no_layers.num_layers = 0;
    engine::ModelWeights w = engine::dummy_weights(no_layers, 1);
    w.hp = hp;
    w.layers.resize(hp.num_layers);
    for (auto& l : w.layers) {
      l.attn_norm.assign(hp.hidden_size, 1.0f);
      l.ffn_norm.assign(hp.hidden_size, 1.0f);
    }
    original_ = w;
    engine_ = std::make_unique<engine::Engine>(std::move(w), pool, Device::cpu, batching);
    return;
  }
  files_ = std::make_unique<model::ModelFiles>(model::ModelFiles::open(path));
  if (!files_->quantization_config().is_null())
    throw UsageError(
        fmt::format("{}: already quantized (config.json has a quantization_config with quant_method '{}'); "
                    "quantize the original 16-bit model instead",
                    path, files_->quantization_config().value("quant_method", "?")));
  tokenizer_ = model::check_model(*files_, model::TokenizerUse::optional);
  engine::ModelWeights w = engine::bind_weights(*files_);
  // A GGUF without output.weight reuses the embedding as lm_head: tied, whatever the metadata says.
  if (w.output.bytes.data() == w.token_embd.bytes.data()) w.hp.tied_embeddings = true;
  original_ = w;
  engine_ = std::make_unique<engine::Engine>(std::move(w), pool, Device::cpu, batching);
  chat_template_ = tok::chat_template_of_model(files_->gguf(), path).tmpl;
}

SourceModel::~SourceModel() = default;

LayerF32 SourceModel::decode_layer(int layer) const {
  const auto& hp = engine_->hparams();
  LayerF32 w = LayerF32::dims_of(hp);
  engine::LayerWeights l = original_.layers[layer];
  w.attn_norm = l.attn_norm;
  w.ffn_norm = l.ffn_norm;
  for (LinearId id : kAllLinears) {
    if (dummy_) {
      w.weight(id).resize(static_cast<std::size_t>(w.rows(id) * w.cols(id)));
      fill_random(w.weight(id), static_cast<std::uint64_t>(layer) * 8 + static_cast<int>(id) + 1);
    } else {
      w.weight(id) = decode(*matrix_of(l, id));
    }
  }
  return w;
}

void SourceModel::install_layer(int layer, const LayerF32& w) {
  engine::LayerWeights& l = engine_->mutable_weights().layers[layer];
  l.attn_norm = w.attn_norm;
  l.ffn_norm = w.ffn_norm;
  for (LinearId id : kAllLinears)
    *matrix_of(l, id) = f32_view(fmt::format("layer {} {}", layer, engine::linear_name(id)), w.weight(id), w.rows(id), w.cols(id));
}

void SourceModel::release_layer(int layer) { engine_->mutable_weights().layers[layer] = original_.layers[layer]; }

std::vector<float> SourceModel::embedding_rows() const { return decode(engine_->weights().token_embd); }
std::vector<float> SourceModel::output_rows() const { return decode(engine_->weights().output); }

}  // namespace mo::quant
