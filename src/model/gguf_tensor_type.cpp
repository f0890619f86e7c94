#include "mo/model/gguf_tensor_type.h"

#include "mo/formats/gguf_file_types.h"

namespace mo::model {
namespace {

formats::KQuantRole kquant_role(const WeightTensor& t, const Hparams& hp) {
  using formats::KQuantRole;
  // llama.cpp quantizes every matrix but norms, biases and routers.
  if (t.rows <= 1 || t.role == Role::norm || t.role == Role::bias || t.role == Role::router || t.role == Role::other)
    return KQuantRole::not_quantized;
  switch (t.role) {
    case Role::output: return KQuantRole::output_head;
    case Role::token_embd: return hp.tied_embeddings ? KQuantRole::output_head : KQuantRole::other_matrix;
    case Role::attn_v: return KQuantRole::attn_v;
    case Role::attn_k: return KQuantRole::attn_k;
    case Role::attn_output: return KQuantRole::attn_output;
    case Role::ffn_down: return KQuantRole::ffn_down;
    default: return KQuantRole::other_matrix;
  }
}

}  // namespace

std::uint32_t gguf_tensor_type(const std::string& format, const WeightTensor& t, const Hparams& hp, bool has_imatrix) {
  formats::KQuantModel m;
  m.n_layers = static_cast<int>(hp.num_layers);
  m.n_gqa = hp.num_kv_heads > 0 ? hp.num_heads / hp.num_kv_heads : 1;
  m.n_experts = hp.num_experts;
  m.llama_arch = hp.arch == "llama";
  return formats::gguf_tensor_type(format, {kquant_role(t, hp), t.layer, t.cols}, m, has_imatrix);
}

}  // namespace mo::model
