// Writes the three Hugging Face tokenizer files into a directory.
#include <filesystem>
#include <fstream>
#include <string>

#include "mo/core/error.h"
#include "mo/tokenizer/tokenizer_export.h"

namespace mo::tok {

namespace {

void write_json(const nlohmann::json& j, const std::filesystem::path& path) {
  std::string text;
  try {
    // As transformers writes them: indent 2, UTF-8 kept as is.
    text = j.dump(2, ' ', false) + "\n";
  } catch (const nlohmann::json::type_error& e) {
    throw Error(path.string() + ": cannot write JSON: " + e.what());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw Error(path.string() + ": cannot write file");
}

}  // namespace

void write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create directory: " + ec.message());
  const std::filesystem::path base(dir);
  write_json(files.tokenizer_json, base / "tokenizer.json");
  write_json(files.tokenizer_config, base / "tokenizer_config.json");
  write_json(files.special_tokens_map, base / "special_tokens_map.json");
}

}  // namespace mo::tok
