#pragma once
// One side of a diagnosis: the model's files, engine and tokenizer, and what each decoder linear is
// stored as (type and bytes on disk) — for any format the engine loads (float or quantized HF
// directories, GGUF files).
#include <cstdint>
#include <memory>
#include <string>

#include "mo/engine/engine.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::diagnose {

struct DiagModel {
  std::string path;
  std::unique_ptr<model::ModelFiles> files;
  std::unique_ptr<tok::Tokenizer> tok;  // null when the model ships none
  std::unique_ptr<engine::Engine> engine;

  // Bytes on disk of the linear (its weight, or qweight + scales + qzeros + g_idx) and its type.
  std::uint64_t linear_bytes(int layer, engine::LinearId id) const;
  std::string linear_type(int layer, engine::LinearId id) const;
  // "gguf", or "safetensors" with the quantization method ("safetensors awq int4 g128").
  std::string format() const;
};

DiagModel load_diag_model(const std::string& path);

// Q/K rows are ordered for rotate-half RoPE in HF checkpoints and interleaved in GGUF; when the two
// models differ, a quantized q/k output row [n, rows] is permuted into the original's order.
void align_qk_output(float* y, std::int64_t n, std::int64_t rows, std::int64_t head_dim, engine::RopeStyle from, engine::RopeStyle to);

}  // namespace mo::diagnose
