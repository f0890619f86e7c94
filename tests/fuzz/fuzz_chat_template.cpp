// A model's chat template (Jinja subset): parse, then render a conversation as generate and serve do.
#include "fuzz_util.h"
#include "mo/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string tmpl(reinterpret_cast<const char*>(data), size);
  mo::fuzz::refusals_are_errors([&] {
    mo::tok::check_chat_template(tmpl, "fuzz");
    const std::vector<mo::tok::ChatMessage> messages = {
        {"system", "You are brief."}, {"user", "Hi {{ there }}"}, {"assistant", "Hello!"}, {"user", "Bye"}};
    mo::tok::ChatTemplateOptions opt;
    opt.bos_token = "<s>";
    opt.eos_token = "</s>";
    mo::tok::render_chat_template(tmpl, messages, opt);
  });
  return 0;
}
