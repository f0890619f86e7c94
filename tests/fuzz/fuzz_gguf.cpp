// A GGUF model file: metadata, tensor table, tokenizer, hyperparameters, the model check and the tensors the engine binds.
#include "fuzz_util.h"
#include "mo/engine/weights.h"
#include "mo/io/gguf.h"
#include "mo/model/model_check.h"
#include "mo/model/model_files.h"
#include "mo/tokenizer/chat_template.h"
#include "mo/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = mo::fuzz::write_input(data, size, "model.gguf");
  mo::fuzz::refusals_are_errors([&] {
    const mo::gguf::File f = mo::gguf::read_metadata(path);
    mo::fuzz::refusals_are_errors([&] {
      auto t = mo::tok::load_tokenizer_gguf(f);
      t->decode(t->encode("Hello world! <|im_start|> ünï 123", true, true), true);
    });
    mo::fuzz::refusals_are_errors([&] { mo::tok::check_chat_template(mo::tok::chat_template_from_gguf(f).tmpl, path); });
  });
  mo::fuzz::refusals_are_errors([&] {
    const auto m = mo::model::ModelFiles::open(path);
    mo::model::check_model(m, mo::model::TokenizerUse::required);
    mo::engine::bind_weights(m);
  });
  return 0;
}
