#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "cli.h"
#include "mo/config/commands.h"
#include "mo/core/error.h"
#include "mo/inspect/inspect.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::app {
namespace {

std::unique_ptr<tok::Tokenizer> load_tokenizer(const model::ModelFiles& m) {
  if (m.tokenizer_path().empty()) throw UsageError(fmt::format("{}: the model has no tokenizer", m.path()));
  return m.format() == "gguf" ? tok::load_tokenizer_gguf(*m.gguf()) : tok::load_tokenizer_json(m.tokenizer_path());
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
    model::ModelFiles m = model::ModelFiles::open(cfg_.model_path);
    if (!cfg_.tokenize.empty()) {
      auto ids = load_tokenizer(m)->encode(cfg_.tokenize, true, true);
      std::string line;
      for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
      std::cout << line << "\n";
      return 0;
    }
    if (!cfg_.detokenize.empty()) {
      auto t = load_tokenizer(m);
      std::cout << t->decode(parse_ids(cfg_.detokenize, *t), true) << "\n";
      return 0;
    }
    nlohmann::json d = inspect::describe(m);
    if (cfg_.json) std::cout << d.dump(2) << "\n";
    else std::cout << inspect::format_text(d);
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
