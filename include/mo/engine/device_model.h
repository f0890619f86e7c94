#pragma once
// The model on a device backend: weights uploaded in the form the backend's kernels read, and the
// forward pass of Engine::forward written over Backend ops, with K/V in a KvStorage of the same
// backend. Over the CPU backend it is checked against the CPU engine; over CUDA it is the fast path.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mo/engine/backend.h"
#include "mo/engine/engine.h"
#include "mo/engine/kv_storage.h"
#include "mo/engine/weights.h"

namespace mo::engine {

// A host view of a packed AWQ / GPTQ matrix in the device layout (pointers into the host spans).
DeviceLinear packed_host_view(const Matrix& m);

class DeviceModel {
 public:
  // Uploads `w` (which must outlive nothing: the device keeps its own copies). Float and other GGUF
  // matrices become f16; Q8_0, Q4_K and Q6_K stay blocks; AWQ / GPTQ stay packed.
  DeviceModel(const ModelWeights& w, Backend& backend);

  // Same contract as Engine::forward; `kv` must live in this backend (KvStorage(layout, n, &backend)).
  std::vector<float> forward(std::span<const SeqChunk> chunks, KvStorage& kv);

  std::size_t weight_bytes() const { return weight_bytes_; }  // device bytes of all weights
  std::size_t layer_linear_bytes() const;                     // bytes the layers' linears read per token
  std::size_t head_bytes() const { return head_.bytes; }      // LM head bytes (read per forward)
  // "q/k/v/o/gate/up/down: 210 awq g128; head f16" and the like, for start-up logs.
  std::string summary() const;

 private:
  struct Layer {
    DeviceBuffer attn_norm, ffn_norm, bq, bk, bv;
    DeviceLinear wq, wk, wv, wo, gate, up, down;
    std::array<const DeviceLinear*, 7> linears() const { return {&wq, &wk, &wv, &wo, &gate, &up, &down}; }
  };
  DeviceLinear upload_linear(const Matrix& m);
  DeviceBuffer upload_floats(const std::vector<float>& v);
  float* scratch(int index, std::size_t floats);

  Backend& b_;
  model::Hparams hp_;
  RopeStyle rope_style_;
  std::vector<DeviceBuffer> owned_;  // every weight buffer
  DeviceBuffer embd_, out_norm_, rope_factors_;
  DeviceLinear head_;
  std::vector<Layer> layers_;
  std::vector<DeviceBuffer> scratch_;
  DeviceBuffer meta_;
  std::size_t weight_bytes_ = 0;
};

}  // namespace mo::engine
