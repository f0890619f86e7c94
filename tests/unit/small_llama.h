#pragma once
// A small Llama shape for engine tests on generated weights: hidden 256 is one K-quant super-block per
// row, GQA 4 query heads over 2 KV heads.
#include "mo/model/model_shape.h"

namespace mo::test {

inline model::Hparams small_llama() {
  model::Hparams hp;
  hp.vocab_size = 320;
  hp.hidden_size = 256;
  hp.intermediate_size = 512;
  hp.num_layers = 2;
  hp.num_heads = 4;
  hp.num_kv_heads = 2;
  hp.head_dim = 64;
  hp.context_length = 512;
  return hp;
}

}  // namespace mo::test
