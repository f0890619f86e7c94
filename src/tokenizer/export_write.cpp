// Writes the three Hugging Face tokenizer files into a directory.
#include <filesystem>
#include <fstream>
#include <string>

#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/tokenizer/tokenizer_export.h"

namespace mo::tok {

namespace {}  // namespace

void write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create directory: " + ec.message());
  const std::filesystem::path base(dir);
  io::write_json((base / "tokenizer.json").string(), files.tokenizer_json);
  io::write_json((base / "tokenizer_config.json").string(), files.tokenizer_config);
  if (!files.special_tokens_map.is_null()) io::write_json((base / "special_tokens_map.json").string(), files.special_tokens_map);
}

}  // namespace mo::tok
