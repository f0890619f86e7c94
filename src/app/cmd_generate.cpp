#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "mo/model/model_presets.h"
#include "mo/config/commands.h"
#include "mo/core/device.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/strings.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/device_model.h"
#include "mo/engine/generator.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/json_file.h"
#include "mo/model/model_check.h"
#include "mo/tokenizer/chat_template.h"

namespace mo::app {
namespace {

engine::SamplingParams sampling_of(const config::GenerateConfig& c) {
  engine::SamplingParams p;
  p.temperature = c.temperature;
  p.top_k = static_cast<int>(c.top_k);
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repetition_penalty = c.repetition_penalty;
  p.presence_penalty = c.presence_penalty;
  p.frequency_penalty = c.frequency_penalty;
  p.seed = static_cast<std::uint64_t>(c.seed);
  p.max_tokens = static_cast<int>(c.max_tokens);
  p.stop = c.stop;
  p.ignore_eos = c.ignore_eos;
  return p;
}

void print_stats(const engine::GenerationStats& s, const engine::Engine& e) {
  const engine::Backend* gpu = e.kv_device();
  std::cerr << fmt::format(
      "\n\nprompt tokens: {} · generated tokens: {} ({}) · TTFT {:.1f} ms · prefill {:.1f} tokens/s · decode {:.1f} tokens/s · peak memory "
      "{}{}\n",
      s.prompt_tokens, s.generated_tokens, s.finish_reason, s.ttft_ms, s.prefill_tokens_per_s, s.decode_tokens_per_s,
      format_bytes(static_cast<double>(s.peak_rss_bytes)),
      gpu ? fmt::format(" · peak GPU memory {} on {}", format_bytes(static_cast<double>(gpu->peak_allocated_bytes())), gpu->describe())
          : "");
}

class GenerateCommand : public Command {
 public:
  const char* name() const override { return "generate"; }
  const char* summary() const override { return "generate text from a prompt (or --chat), streaming, with TTFT and tokens/s"; }
  void bind(config::Schema& s) override { config::bind(s, cfg_); }
  int run() override {
    if (cfg_.model_path.empty()) throw UsageError("model_path: no model given (generate MODEL --prompt TEXT)");
    set_default_threads(static_cast<int>(cfg_.threads));
    engine::GenerationOptions opt;
    opt.block_size = static_cast<int>(cfg_.block_size);
    opt.kv_dtype = cfg_.kv_cache_dtype == "f32" ? engine::KvDtype::f32 : engine::KvDtype::f16;
    opt.seed = static_cast<std::uint64_t>(cfg_.seed);
    const engine::SamplingParams params = sampling_of(cfg_);

    if (cfg_.load_format == "dummy") return run_dummy(params, opt);
    model::ModelFiles files = model::ModelFiles::open(cfg_.model_path);
    auto tokenizer = model::check_model(files, model::TokenizerUse::required);
    engine::Engine engine(engine::bind_weights(files), default_pool(), parse_device(cfg_.device));
    if (const auto* dm = engine.device_model()) log::info("{}", dm->summary());

    std::vector<std::int32_t> prompt;
    if (cfg_.chat) {
      tok::ModelChatTemplate t = tok::chat_template_of_model(files.gguf(), files.path());
      tok::check_chat_template(t.tmpl, files.path());
      std::vector<tok::ChatMessage> msgs;
      if (!cfg_.system.empty()) msgs.push_back({"system", cfg_.system});
      msgs.push_back({"user", cfg_.prompt});
      tok::ChatTemplateOptions o;
      o.bos_token = t.bos_token;
      o.eos_token = t.eos_token;
      prompt = tokenizer->encode(tok::render_chat(t.tmpl, msgs, o), false, true);
    } else if (cfg_.prompt.empty()) {
      if (!tokenizer->special().bos) throw UsageError("prompt: empty, and the model has no BOS token to start from");
      prompt = {*tokenizer->special().bos};
    } else {
      prompt = tok::encode_prompt(*tokenizer, cfg_.prompt);
    }
    std::vector<std::int32_t> eos;
    for (auto id : engine.hparams().eos_token_ids) eos.push_back(static_cast<std::int32_t>(id));
    if (tokenizer->special().eos) eos.push_back(*tokenizer->special().eos);
    auto stats = engine::generate(
        engine, *tokenizer, prompt, params, eos, [](std::string_view text) { std::cout << text << std::flush; }, opt);
    print_stats(stats, engine);
    return 0;
  }

 private:
  int run_dummy(const engine::SamplingParams& params, const engine::GenerationOptions& opt);
  config::GenerateConfig cfg_;
};

// Random weights have no tokenizer: the prompt is BOS and the output is printed as token ids.
int GenerateCommand::run_dummy(const engine::SamplingParams& params, const engine::GenerationOptions& opt) {
  const auto* preset = model::find_model_preset(cfg_.model_path);
  if (!preset) throw UsageError(fmt::format("model_path: load_format dummy needs a preset ({})", join(model::model_preset_names())));
  const auto type = ggml_type_from_name(cfg_.dummy_type);
  engine::Engine engine(cfg_.dummy_type == "awq" ? engine::dummy_awq_weights(preset->hp) : engine::dummy_weights(preset->hp, *type),
                        default_pool(), parse_device(cfg_.device));
  if (const auto* dm = engine.device_model()) log::info("{}", dm->summary());
  struct Ids : tok::Tokenizer {
    std::vector<std::int32_t> encode(std::string_view, bool, bool) const override { return {}; }
    std::string decode(const std::vector<std::int32_t>& ids, bool) const override {
      std::string s;
      for (auto id : ids) s += fmt::format("{} ", id);
      return s;
    }
    std::string token_bytes(std::int32_t id) const override { return fmt::format("{} ", id); }
    const std::string& token_text(std::int32_t) const override { return empty; }
    std::optional<std::int32_t> token_id(std::string_view) const override { return std::nullopt; }
    bool is_special(std::int32_t) const override { return false; }
    std::int32_t vocab_size() const override { return vocab; }
    const tok::SpecialTokens& special() const override { return sp; }
    std::string kind() const override { return "ids"; }
    std::string pre() const override { return ""; }
    std::string empty;
    tok::SpecialTokens sp;
    std::int32_t vocab = 0;
  } ids;
  ids.vocab = static_cast<std::int32_t>(preset->hp.vocab_size);
  std::vector<std::int32_t> prompt = {1};
  auto stats = engine::generate(
      engine, ids, prompt, params, {}, [](std::string_view text) { std::cout << text << std::flush; }, opt);
  print_stats(stats, engine);
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_generate_command() { return std::make_unique<GenerateCommand>(); }

}  // namespace mo::app
