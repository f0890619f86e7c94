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

Engine::Engine(ModelWeights weights, ThreadPool& pool, Device device, ops::Batching batching)
    : w_(std::move(weights)),
      host_backend_(make_host_backend(pool, batching)),
      host_model_(std::make_unique<DeviceModel>(w_, *host_backend_)) {
  if (device == Device::cuda) use_backend(make_cuda_backend(0));
}

Engine::Engine(ModelWeights weights, std::shared_ptr<ThreadPool> pool, Device device, ops::Batching batching)
    : Engine(std::move(weights), *pool, device, batching) {
  pool_owner_ = std::move(pool);
}

Engine::~Engine() = default;

Engine::Engine(Engine&& o) noexcept
    : pool_owner_(std::move(o.pool_owner_)),
      w_(std::move(o.w_)),
      host_backend_(std::move(o.host_backend_)),
      host_model_(std::move(o.host_model_)),
      backend_(std::move(o.backend_)),
      device_model_(std::move(o.device_model_)) {
  // The host models read the weights in place: point them at their new home.
  if (host_model_) host_model_->rebind(w_);
  if (device_model_) device_model_->rebind(w_);
}

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

void Engine::embed(std::span<const std::int32_t> tokens, float* hidden) const { host_model_->embed(tokens, hidden); }

std::vector<float> Engine::forward(std::span<const SeqChunk> chunks, KvStorage& kv) {
  if (!device_model_ && kv.device() == nullptr) return host_model_->forward(chunks, kv);
  if (!device_model_ || kv.device() != backend_.get())
    throw Error("forward: the KV cache and the engine are on different devices (make it with Engine::kv_device())");
  return device_model_->forward(chunks, kv);
}

void Engine::run_layer(int layer, float* hidden, std::int64_t n, std::int32_t start_pos, const LinearObserver* observer) {
  host_model_->run_layer(layer, hidden, n, start_pos, observer);
}

void Engine::logits(const float* hidden, std::int64_t n, float* out) { host_model_->logits(hidden, n, out); }

}  // namespace mo::engine
