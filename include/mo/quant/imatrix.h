#pragma once
// Importance matrices as llama.cpp's llama-imatrix tool makes them: for every linear weight, the sum
// of x^2 per input column over the calibration tokens that went through it, and the token count. The
// quantizers weight their scale search by sum/count (gguf_quantize_row's `importance`). Files
// exchange with llama.cpp: the GGUF form (`<tensor>.in_sum2`, `<tensor>.counts`, general.type
// "imatrix", imatrix.datasets / chunk_count / chunk_size) is read and written, the legacy .dat form
// is read.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mo/engine/engine.h"

namespace mo::quant {

struct ImatrixEntry {
  std::vector<float> in_sum2;  // [n_mat, cols]: sum of x^2 per input column (one row per expert; 1 for dense)
  std::vector<float> counts;   // [n_mat]: tokens seen
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight name: "blk.0.attn_q.weight"
  std::vector<std::string> datasets;            // where the calibration text came from
  std::int64_t chunk_count = 0;                 // samples (llama.cpp: chunks) accumulated
  std::int64_t chunk_size = 0;                  // tokens per sample (the longest)
  bool legacy = false;                          // read from the .dat form

  // Mean of x^2 per input column of `tensor`'s first matrix; empty when it has no entry or saw no tokens.
  std::vector<float> importance(const std::string& tensor) const;
};

// "blk.{layer}.attn_q.weight" ... "blk.{layer}.ffn_down.weight": the GGUF name of a decoder linear.
std::string gguf_linear_tensor(int layer, engine::LinearId id);

// Runs each sample through the model one layer at a time and accumulates the inputs of every linear.
// `dataset` is recorded in imatrix.datasets.
Imatrix collect_imatrix(engine::Engine& engine, const std::vector<std::vector<std::int32_t>>& samples, const std::string& dataset);

// Writes the GGUF form, tensors in name order as llama-imatrix does. Throws Error naming the path.
void write_imatrix(const Imatrix& m, const std::string& path);
// Reads either form (GGUF when the file starts with "GGUF"). Throws UsageError for a missing file and
// Error naming the file for one that is neither form or is inconsistent.
Imatrix read_imatrix(const std::string& path);

}  // namespace mo::quant
