#include "mo/inspect/inspect.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "mo/io/output_path.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/engine/weights.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/model/model_check.h"
#include "mo/formats/hf_quant_config.h"
#include "mo/tokenizer/chat_template.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::inspect {
namespace {

nlohmann::json tokenizer_summary(const std::unique_ptr<tok::Tokenizer>& t) {
  if (!t) return nullptr;
  const tok::SpecialTokens& sp = t->special();
  auto token = [&](const std::optional<std::int32_t>& id) -> nlohmann::json {
    if (!id) return nullptr;
    return {{"id", *id}, {"text", t->token_text(*id)}};
  };
  return {{"kind", t->kind()},    {"pre", t->pre()},      {"vocab_size", t->vocab_size()}, {"bos", token(sp.bos)}, {"eos", token(sp.eos)},
          {"unk", token(sp.unk)}, {"pad", token(sp.pad)}, {"add_bos", sp.add_bos},         {"add_eos", sp.add_eos}};
}

nlohmann::json quantization(const model::ModelFiles& m) {
  if (m.gguf()) {
    auto ft = m.gguf()->get_int_opt("general.file_type");
    if (!ft) return nullptr;
    return {{"format", "gguf"}, {"file_type", *ft}, {"name", gguf_file_type_name(*ft)}};
  }
  if (m.quantization_config().is_null()) return nullptr;
  nlohmann::json q = m.quantization_config();
  try {
    q["description"] = formats::parse_quantization_config(m.quantization_config()).describe();
  } catch (const Error& e) {
    q["description"] = fmt::format("{} (not loadable here: {})", m.quantization_config().value("quant_method", "?"), e.what());
  }
  return q;
}

}  // namespace

std::optional<std::string> manifest_summary(const std::string& model_path) {
  const auto path = std::filesystem::path(model_path) / io::kMarkerFile;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  try {
    const nlohmann::json j = io::read_json(path.string());
    if (j.contains("summary") && j["summary"].is_string()) return j["summary"].get<std::string>();
    return fmt::format("written by model-optimizer {} ({})", j.value("version", "?"), j.value("command", "?"));
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string gguf_file_type_name(std::int64_t ft) {
  static const std::map<std::int64_t, const char*> names = {{0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
                                                            {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
                                                            {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
                                                            {18, "Q6_K"},   {21, "Q2_K_S"}, {32, "BF16"}};
  auto it = names.find(ft);
  return it != names.end() ? it->second : fmt::format("file type {}", ft);
}

nlohmann::json describe(const model::ModelFiles& m) {
  const model::Hparams& hp = m.shape().hp;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_type;  // dtype -> (tensors, bytes)
  std::uint64_t params = 0;
  for (const auto& t : m.tensors()) {
    by_type[t.dtype].first += 1;
    by_type[t.dtype].second += t.bytes.size();
    params += t.n_elements();
  }
  nlohmann::json types = nlohmann::json::array();
  for (const auto& [type, v] : by_type) types.push_back({{"type", type}, {"tensors", v.first}, {"bytes", v.second}});
  // What generate/serve would refuse (the model check, what the engine cannot bind, a chat template that
  // cannot be used): the first such error, checked in the order they load.
  std::optional<std::string> problem;
  auto check = [&](auto&& load) {
    try {
      load();
    } catch (const Error& e) {
      if (!problem) problem = e.what();
    }
  };
  std::unique_ptr<tok::Tokenizer> loaded;
  check([&] { loaded = model::check_model(m, model::TokenizerUse::required); });
  check([&] { engine::bind_weights(m); });
  check([&] { tok::check_chat_template(tok::chat_template_of_model(m.gguf(), m.path()).tmpl, m.path()); });
  // The tokenizer is still described when the check stopped before it (a bad tensor) or refused its ids.
  if (!loaded) {
    try {
      loaded = model::load_tokenizer(m);
    } catch (const Error&) {}
  }
  const nlohmann::json tokenizer = tokenizer_summary(loaded);
  nlohmann::json rope = {{"theta", hp.rope_theta}, {"scaling", hp.rope_scaling.type}};
  if (hp.rope_scaling.type != "none") rope["factor"] = hp.rope_scaling.factor;
  return {
      {"path", m.path()},
      {"format", m.format()},
      {"name", m.shape().name},
      {"architecture",
       {{"arch", hp.arch},
        {"layers", hp.num_layers},
        {"hidden_size", hp.hidden_size},
        {"intermediate_size", hp.intermediate_size},
        {"heads", hp.num_heads},
        {"kv_heads", hp.num_kv_heads},
        {"head_dim", hp.head_dim},
        {"vocab_size", hp.vocab_size},
        {"context_length", hp.context_length},
        {"rms_norm_eps", hp.rms_norm_eps},
        {"rope", rope},
        {"tied_embeddings", hp.tied_embeddings},
        {"qkv_bias", hp.qkv_bias},
        {"experts", hp.num_experts}}},
      {"parameters", m.quantization_config().is_null() ? params : m.shape().n_params()},
      {"tensors", m.tensors().size()},
      {"bytes", m.total_bytes()},
      {"types", types},
      {"quantization", quantization(m)},
      {"manifest", manifest_summary(m.path()) ? nlohmann::json(*manifest_summary(m.path())) : nlohmann::json(nullptr)},
      {"tokenizer", tokenizer},
      {"chat_template", m.chat_template().empty() ? nlohmann::json(nullptr) : nlohmann::json({{"chars", m.chat_template().size()}})},
      {"load_error", problem ? nlohmann::json(*problem) : nlohmann::json(nullptr)},
  };
}

std::string format_text(const nlohmann::json& d) {
  const auto& a = d["architecture"];
  std::string out;
  out += fmt::format("model:         {} ({})\n", d["path"].get<std::string>(), d["format"].get<std::string>());
  out +=
      fmt::format("architecture:  {} · {} layers · hidden {} · ffn {} · heads {} / {} KV · head_dim {}{}\n", a["arch"].get<std::string>(),
                  a["layers"].get<std::int64_t>(), a["hidden_size"].get<std::int64_t>(), a["intermediate_size"].get<std::int64_t>(),
                  a["heads"].get<std::int64_t>(), a["kv_heads"].get<std::int64_t>(), a["head_dim"].get<std::int64_t>(),
                  a["experts"].get<std::int64_t>() > 0 ? fmt::format(" · {} experts", a["experts"].get<std::int64_t>()) : "");
  out += fmt::format("               vocab {} · context {} · rms_norm_eps {:g} · rope theta {:g}, scaling {}{}{}\n",
                     a["vocab_size"].get<std::int64_t>(), a["context_length"].get<std::int64_t>(), a["rms_norm_eps"].get<double>(),
                     a["rope"]["theta"].get<double>(), a["rope"]["scaling"].get<std::string>(),
                     a["tied_embeddings"].get<bool>() ? " · tied embeddings" : "", a["qkv_bias"].get<bool>() ? " · q/k/v bias" : "");
  out += fmt::format("parameters:    {}\n", format_count(d["parameters"].get<long long>()));
  out += fmt::format("tensors:       {} · {}\n", d["tensors"].get<long long>(), format_bytes(d["bytes"].get<double>()));
  for (const auto& t : d["types"])
    out += fmt::format("  {:<10} {:>5} tensors  {:>12}\n", t["type"].get<std::string>(), t["tensors"].get<long long>(),
                       format_bytes(t["bytes"].get<double>()));
  const auto& q = d["quantization"];
  if (q.is_null())
    out += "quantization:  none\n";
  else if (q.contains("name"))
    out += fmt::format("quantization:  GGUF file type {}\n", q["name"].get<std::string>());
  else
    out += fmt::format("quantization:  {}\n", q.value("description", q.dump()));
  if (d.contains("manifest") && d["manifest"].is_string()) out += fmt::format("manifest:      {}\n", d["manifest"].get<std::string>());
  const auto& t = d["tokenizer"];
  if (t.is_null()) {
    out += "tokenizer:     none\n";
  } else {
    auto tok = [](const nlohmann::json& j) {
      return j.is_null() ? std::string("-") : fmt::format("{} {}", j["id"].get<long long>(), j["text"].dump());
    };
    out += fmt::format("tokenizer:     {} (pre {}) · vocab {} · bos {} · eos {} · add_bos {}\n", t["kind"].get<std::string>(),
                       t["pre"].get<std::string>(), t["vocab_size"].get<long long>(), tok(t["bos"]), tok(t["eos"]),
                       t["add_bos"].get<bool>() ? "yes" : "no");
  }
  out += d["chat_template"].is_null()
             ? "chat template: none\n"
             : fmt::format("chat template: present ({} characters)\n", d["chat_template"]["chars"].get<long long>());
  out += d["load_error"].is_null() ? "loads:         yes (the checks generate and serve make pass)\n"
                                   : fmt::format("loads:         NO: {}\n", d["load_error"].get<std::string>());
  return out;
}

}  // namespace mo::inspect
