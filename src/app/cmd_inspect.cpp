#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "mo/config/commands.h"
#include "mo/core/error.h"
#include "mo/inspect/inspect.h"
#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::app {
namespace {

// --tokenize / --detokenize read the tokenizer alone, so a vocab-only GGUF (no tensors, any
// general.architecture) or a directory with just tokenizer.json works as well as a model we can run.
std::unique_ptr<tok::Tokenizer> load_tokenizer(const std::string& path) {
  require_readable(path, "model");
  if (std::filesystem::is_directory(path)) {
    if (!std::filesystem::exists(std::filesystem::path(path) / "tokenizer.json"))
      throw UsageError(fmt::format("{}: no tokenizer.json in this directory", path));
    return tok::load_tokenizer_json(path);
  }
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") return tok::load_tokenizer_json(path);
  if (ext != ".gguf") throw UsageError(fmt::format("{}: expected a .gguf file, a tokenizer.json or a model directory", path));
  const gguf::File file = gguf::read_metadata(path);
  if (!file.find("tokenizer.ggml.model")) throw UsageError(fmt::format("{}: the model has no tokenizer (no tokenizer.ggml.model)", path));
  return tok::load_tokenizer_gguf(file);
}

std::vector<std::int32_t> parse_ids(const std::string& text, const tok::Tokenizer& t) {
  std::vector<std::int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0 || id >= t.vocab_size())
      throw UsageError(fmt::format("detokenize: '{}' is not a token id in [0, {})", word, t.vocab_size()));
    ids.push_back(static_cast<std::int32_t>(id));
  }
  return ids;
}

class InspectCommand : public Command {
 public:
  const char* name() const override { return "inspect"; }
  const char* summary() const override {
    return "show a model's architecture, parameters, bytes per type, quantization, tokenizer and chat template";
  }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    if (cfg_.model_path.empty()) throw UsageError("model_path: no model given (inspect MODEL)");
    if (!cfg_.tokenize.empty()) {
      auto ids = load_tokenizer(cfg_.model_path)->encode(cfg_.tokenize, true, true);
      std::string line;
      for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
      std::cout << line << "\n";
      return 0;
    }
    if (!cfg_.detokenize.empty()) {
      auto t = load_tokenizer(cfg_.model_path);
      std::cout << t->decode(parse_ids(cfg_.detokenize, *t), true) << "\n";
      return 0;
    }
    nlohmann::json d = inspect::describe(model::ModelFiles::open(cfg_.model_path));
    if (cfg_.json)
      std::cout << d.dump(2) << "\n";
    else
      std::cout << inspect::format_text(d);
    if (d["load_error"].is_null()) return 0;
    std::cerr << "error: " << d["load_error"].get<std::string>() << "\n";
    return kExitRuntime;
  }

 private:
  config::InspectConfig cfg_;
};

}  // namespace

std::unique_ptr<Command> make_inspect_command() { return std::make_unique<InspectCommand>(); }

}  // namespace mo::app
