#pragma once
// The model math, written once: a forward step over a flat, ragged batch of tokens from many
// sequences (some prefilling, some decoding), each with its own positions and paged KV blocks.
// Quantizers use the per-layer entry points; evaluators and the server use forward().
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "mo/core/thread_pool.h"
#include "mo/core/device.h"
#include "mo/engine/backend.h"
#include "mo/engine/kv_layout.h"
#include "mo/engine/kv_storage.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"

namespace mo::engine {

// One sequence's share of a forward step.
struct SeqChunk {
  std::span<const std::int32_t> tokens;  // the new tokens of this step
  std::int32_t start_pos = 0;            // position of tokens[0] in the sequence
  std::span<const int> slots;            // KV slot of each new token (KvCacheManager::append)
  std::span<const int> block_table;      // the sequence's blocks, covering start_pos + tokens.size() positions
  bool all_logits = false;               // logits for every new token (perplexity), else only the last
};

enum class LinearId { q, k, v, o, gate, up, down };
const char* linear_name(LinearId id);  // "q_proj", ..., "down_proj" (HF names)

// Called with the input of each linear sub-layer: x is [n, dim] f32.
using LinearObserver = std::function<void(int layer, LinearId which, const float* x, std::int64_t n, std::int64_t dim)>;

class DeviceModel;

class Engine {
 public:
  // The CPU runs the model through the host backend (stored formats in place, fast CPU kernels).
  // device cuda also uploads the weights to the GPU and runs forward() there (with a KvStorage made with
  // kv_device()); the per-layer entry points below always run on the CPU. Both run one Llama block
  // implementation (DeviceModel).
  // `pool` must outlive the engine. `batching`: how the CPU's linear layers may treat a many-token call
  // (ops::Batching; blas only for whole-dataset passes such as quantize).
  Engine(ModelWeights weights, ThreadPool& pool, Device device = Device::cpu, ops::Batching batching = ops::Batching::invariant);
  // Shares ownership of `pool` (the default pool: set_default_threads may install another meanwhile).
  Engine(ModelWeights weights, std::shared_ptr<ThreadPool> pool, Device device = Device::cpu,
         ops::Batching batching = ops::Batching::invariant);
  ~Engine();
  Engine(Engine&&) noexcept;

  // Runs forward() through `backend` from now on (the CPU backend in device layouts in tests; CUDA via the
  // constructor).
  void use_backend(std::unique_ptr<Backend> backend);
  // Where a KvStorage for forward() must live: the device backend, or nullptr for host memory.
  Backend* kv_device() const { return backend_.get(); }
  const DeviceModel* device_model() const { return device_model_.get(); }

  const model::Hparams& hparams() const { return w_.hp; }
  const ModelWeights& weights() const { return w_; }
  ModelWeights& mutable_weights() { return w_; }
  KvLayout kv_layout(int block_size = 16, KvDtype dtype = KvDtype::f16) const;

  // Runs all layers over the chunks' tokens, writing their K/V into `kv`, and returns the logits
  // [rows, vocab] of the tokens asked for, in chunk order. A `kv` in device memory runs on the device.
  std::vector<float> forward(std::span<const SeqChunk> chunks, KvStorage& kv);

  // Per-layer access (no KV cache): one causal sequence of n tokens at positions 0..n-1 (start_pos
  // must be 0: the block attends only to itself).
  void embed(std::span<const std::int32_t> tokens, float* hidden) const;  // hidden: [n, hidden_size]
  void run_layer(int layer, float* hidden, std::int64_t n, std::int32_t start_pos, const LinearObserver* observer = nullptr);
  void logits(const float* hidden, std::int64_t n, float* out);  // out: [n, vocab]

 private:
  std::shared_ptr<ThreadPool> pool_owner_;  // null when the caller owns the pool; destroyed last
  ModelWeights w_;
  std::unique_ptr<Backend> host_backend_;
  std::unique_ptr<DeviceModel> host_model_;  // reads w_ in place
  std::unique_ptr<Backend> backend_;         // a device backend, or null
  std::unique_ptr<DeviceModel> device_model_;
};

}  // namespace mo::engine
