#pragma once
// The model being quantized, as the pipeline sees it: an engine to run decoder layers on calibration
// tokens, and each layer's weights decoded to f32 one layer at a time (the input stays memory-mapped;
// with --load-format dummy the layers are generated on demand), so memory holds about one layer.
#include <memory>
#include <optional>
#include <string>

#include "mo/engine/engine.h"
#include "mo/model/model_files.h"
#include "mo/quant/layer_f32.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::quant {

class SourceModel {
 public:
  // path: HF directory or .gguf; dummy: `path` names a preset / config.json and weights are random.
  // batching: of the engine's linear layers (blas: faster on calibration batches, not batch-invariant).
  SourceModel(const std::string& path, bool dummy, std::shared_ptr<ThreadPool> pool, ops::Batching batching);
  ~SourceModel();

  const model::Hparams& hp() const { return engine_->hparams(); }
  engine::Engine& engine() { return *engine_; }
  const engine::ModelWeights& weights() const { return engine_->weights(); }
  const model::ModelFiles* files() const { return files_.get(); }
  const tok::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const std::string& chat_template() const { return chat_template_; }
  bool dummy() const { return dummy_; }
  bool gguf() const { return files_ && files_->gguf(); }
  const std::string& path() const { return path_; }

  LayerF32 decode_layer(int layer) const;
  // Points the engine's layer at `w` (kept alive by the caller until release_layer).
  void install_layer(int layer, const LayerF32& w);
  void release_layer(int layer);

  std::vector<float> embedding_rows() const;  // [vocab, hidden] f32
  std::vector<float> output_rows() const;     // [vocab, hidden] f32 (lm_head; the embedding when tied)
  const std::vector<float>& output_norm() const { return engine_->weights().output_norm; }

 private:
  std::string path_;
  bool dummy_ = false;
  std::unique_ptr<model::ModelFiles> files_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::string chat_template_;
  engine::ModelWeights original_;  // the engine's layer matrices before install_layer (views into the file)
};

}  // namespace mo::quant
