#pragma once
// The Llama block, written once over Backend ops. On the host backend (the engine's CPU path) the
// weights are read in place in their stored formats by the fast CPU kernels; on a device backend
// (CUDA, or the CPU backend in device layouts, which tests use as the CUDA kernels' reference) they are
// uploaded in the layouts the kernels read. K/V live in a KvStorage of the same backend (host memory,
// f16 or f32, for the host backend).
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
  // Device layouts: uploads `w` (the device keeps its own copies). Float and other GGUF matrices become
  // f16; Q8_0, Q4_K and Q6_K stay blocks; AWQ / GPTQ stay packed. Host formats (backend.host_formats()):
  // reads `w` in place on every call, so `w` must outlive the model (rebind() when it moves) and changes
  // to it (the quantizers swap layers) are seen at once.
  DeviceModel(const ModelWeights& w, Backend& backend);
  void rebind(const ModelWeights& w);  // host formats: the weights moved

  // Layer streaming for the quantizers on a device backend: the model's shape and no weights yet.
  // set_layer uploads one layer in f32 (LinearKind::f32: the values being quantized, unrounded) and
  // drop_layer frees it; run_layer runs a layer that is set. forward, embed and logits need a model.
  DeviceModel(const model::Hparams& hp, RopeStyle rope_style, const std::vector<float>& rope_freq_factors, Backend& backend);
  struct LayerF32View {
    const std::vector<float>*attn_norm = nullptr, *ffn_norm = nullptr;
    const std::vector<float>*bq = nullptr, *bk = nullptr, *bv = nullptr;  // null or empty: no bias
    std::array<const float*, 7> linear{};                                 // LinearId order, row-major [out, in], host memory
  };
  void set_layer(int layer, const LayerF32View& l);
  void drop_layer(int layer);

  // Same contract as Engine::forward; `kv` must live in this backend (or host memory for the host backend).
  std::vector<float> forward(std::span<const SeqChunk> chunks, KvStorage& kv);

  // The quantizers' and diagnose's entry points (Engine's per-layer access); hidden, x, y and the
  // observer's inputs are in the backend's memory, logits' out in host memory. run_layer's attention
  // reads the block's K/V in f32 (an f32 cache on the host, the rows themselves on a device). embed and logits need the whole model (not
  // layer streaming); linear runs one of a layer's seven linears.
  void embed(std::span<const std::int32_t> tokens, float* hidden);
  void run_layer(int layer, float* hidden, std::int64_t n, std::int32_t start_pos, const LinearObserver* observer);
  void linear(int layer, LinearId id, const float* x, std::int64_t n, float* y);
  void logits(const float* hidden, std::int64_t n, float* out);

  std::size_t weight_bytes() const { return weight_bytes_; }  // device bytes of all weights
  std::size_t layer_linear_bytes() const;                     // bytes the layers' linears read per token
  std::size_t head_bytes() const { return head_.bytes; }      // LM head bytes (read per forward)
  // "q/k/v/o/gate/up/down: 210 awq g128; head f16" and the like, for start-up logs.
  std::string summary() const;

 private:
  static constexpr std::int64_t kHostChunk = 128;  // tokens per projection call of a long host prefill
  struct Layer {
    DeviceBuffer attn_norm, ffn_norm, bq, bk, bv;
    std::array<DeviceLinear, 7> lin;       // in LinearId order
    std::array<DeviceBuffer, 7> streamed;  // set_layer's f32 weights (the others live in owned_)
  };
  // One step's per-token metadata, in backend memory (host copies where the host needs them).
  struct Step {
    std::int64_t n = 0;
    const std::int32_t *tokens = nullptr, *pos = nullptr, *slots = nullptr;
    std::vector<std::int32_t> host_slots, rows;  // rows: the tokens whose logits are returned
    AttentionArgs att;                           // everything but the layer's caches
  };
  DeviceLinear upload_linear(const Matrix& m);
  DeviceBuffer upload_floats(const std::vector<float>& v);
  float* scratch(int index, std::size_t floats);
  bool host() const { return w_ != nullptr; }
  DeviceLinear linear_of(int layer, LinearId id) const;
  DeviceLinear head() const;
  const float* floats_of(int layer, int which) const;  // 0 attn_norm, 1 ffn_norm, 2 bq, 3 bk, 4 bv; null when absent
  Step prepare(std::span<const SeqChunk> chunks, const KvStorage& kv);
  // exact_self: attention over the step's own K/V in f32 (gemms and causal_softmax), no cache written;
  // run_layer on a device, whose caches are f16, so that calibration inputs match the CPU's f32 K/V.
  void layer_step(int layer, int kv_layer, const Step& s, KvStorage& kv, float* hidden, const LinearObserver* observer,
                  bool exact_self = false);
  void self_attention_f32(const float* q, const float* k, const float* v, std::int64_t n, float scale, float* out);
  void head_rows(const float* hidden, const std::vector<std::int32_t>& rows, float* out);

  Backend& b_;
  const ModelWeights* w_ = nullptr;  // host formats: the weights read in place
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
