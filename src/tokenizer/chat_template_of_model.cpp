#include <filesystem>

#include "mo/io/json_file.h"
#include "mo/tokenizer/chat_template.h"

namespace mo::tok {

ModelChatTemplate chat_template_of_model(const gguf::File* gguf, const std::string& model_dir) {
  if (gguf) return chat_template_from_gguf(*gguf);
  const auto cfg = std::filesystem::path(model_dir) / "tokenizer_config.json";
  if (std::filesystem::exists(cfg)) return chat_template_from_tokenizer_config(io::read_json(cfg.string()));
  return {};
}

}  // namespace mo::tok
