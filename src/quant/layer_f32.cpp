#include "mo/quant/layer_f32.h"

namespace mo::quant {

using engine::LinearId;

std::vector<float>& LayerF32::weight(LinearId id) {
  return const_cast<std::vector<float>&>(static_cast<const LayerF32*>(this)->weight(id));
}

const std::vector<float>& LayerF32::weight(LinearId id) const {
  switch (id) {
    case LinearId::q: return q;
    case LinearId::k: return k;
    case LinearId::v: return v;
    case LinearId::o: return o;
    case LinearId::gate: return gate;
    case LinearId::up: return up;
    case LinearId::down: return down;
  }
  return q;
}

std::int64_t LayerF32::rows(LinearId id) const {
  switch (id) {
    case LinearId::q: return q_dim;
    case LinearId::k:
    case LinearId::v: return kv_dim;
    case LinearId::o:
    case LinearId::down: return hidden;
    case LinearId::gate:
    case LinearId::up: return ffn;
  }
  return 0;
}

std::int64_t LayerF32::cols(LinearId id) const {
  switch (id) {
    case LinearId::o: return q_dim;
    case LinearId::down: return ffn;
    default: return hidden;
  }
}

LayerF32 LayerF32::dims_of(const model::Hparams& hp) {
  LayerF32 w;
  w.hidden = hp.hidden_size;
  w.q_dim = hp.num_heads * hp.head_dim;
  w.kv_dim = hp.num_kv_heads * hp.head_dim;
  w.ffn = hp.intermediate_size;
  return w;
}

std::vector<float>& LayerInputs::of(LinearId id) { return const_cast<std::vector<float>&>(static_cast<const LayerInputs*>(this)->of(id)); }

const std::vector<float>& LayerInputs::of(LinearId id) const {
  switch (id) {
    case LinearId::o: return o_in;
    case LinearId::gate:
    case LinearId::up: return mlp_in;
    case LinearId::down: return down_in;
    default: return attn_in;
  }
}

}  // namespace mo::quant
