// make_bpe_from_json: an HF tokenizer.json with a byte-level BPE model, plus tokenizer_config.json.
#include <fmt/format.h>

#include <limits>
#include <type_traits>

#include "bpe_pre_types.h"
#include "bpe_tokenizer.h"
#include "factories.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/io/json_file.h"

namespace mo::tok {

namespace {

using json = nlohmann::json;

const json& require(const json& obj, const char* key, const std::string& where, const std::string& source) {
  if (!obj.is_object() || !obj.contains(key)) throw Error(fmt::format("{}: key '{}{}' is missing", source, where, key));
  return obj[key];
}

template <typename T>
T get_as(const json& v, const std::string& key, const std::string& source) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return json_int<T>(v, source, key);
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("{}: key '{}' has the wrong type ({})", source, key, v.type_name()));
  }
}

bool flag(const json& obj, const char* key, bool fallback) {
  const auto it = obj.find(key);
  return it == obj.end() || !it->is_boolean() ? fallback : it->get<bool>();
}

bool parse_normalizer(const json& n, const std::string& source) {
  if (n.is_null()) return false;
  const std::string type = get_as<std::string>(require(n, "type", "normalizer.", source), "normalizer.type", source);
  if (type == "NFC") return true;
  if (type == "Sequence") {
    bool nfc = false;
    for (const auto& sub : require(n, "normalizers", "normalizer.", source)) nfc = parse_normalizer(sub, source) || nfc;
    return nfc;
  }
  throw Error(source + ": normalizer type '" + type + "' is not supported for byte-level BPE");
}

void parse_post_processor(const json& pp, const std::string& source, std::vector<std::int32_t>& prefix, std::vector<std::int32_t>& suffix) {
  if (pp.is_null()) return;
  const std::string type = get_as<std::string>(require(pp, "type", "post_processor.", source), "post_processor.type", source);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    for (const auto& sub : require(pp, "processors", "post_processor.", source)) parse_post_processor(sub, source, prefix, suffix);
    return;
  }
  if (type == "TemplateProcessing") {
    const json& specials = require(pp, "special_tokens", "post_processor.", source);
    bool after_sequence = false;
    for (const auto& item : require(pp, "single", "post_processor.", source)) {
      if (item.contains("Sequence")) {
        after_sequence = true;
        continue;
      }
      const std::string name = get_as<std::string>(
          require(require(item, "SpecialToken", "post_processor.single[].", source), "id", "post_processor.single[].SpecialToken.", source),
          "post_processor.single[].SpecialToken.id", source);
      const json& ids = require(require(specials, name.c_str(), "post_processor.special_tokens.", source), "ids",
                                "post_processor.special_tokens." + name + ".", source);
      for (const auto& id : ids)
        (after_sequence ? suffix : prefix).push_back(get_as<std::int32_t>(id, "post_processor.special_tokens", source));
    }
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix.push_back(get_as<std::int32_t>(require(pp, "cls", "post_processor.", source).at(1), "post_processor.cls", source));
    suffix.push_back(get_as<std::int32_t>(require(pp, "sep", "post_processor.", source).at(1), "post_processor.sep", source));
    return;
  }
  throw Error(source + ": post_processor type '" + type + "' is not supported");
}

void check_decoder(const json& d, const std::string& source) {
  if (d.is_null()) return;
  const std::string type = d.value("type", std::string());
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const auto& sub : d.value("decoders", json::array())) check_decoder(sub, source);
    return;
  }
  throw Error(source + ": decoder type '" + type + "' is not supported for byte-level BPE");
}

// A tokenizer_config.json token entry: "text", {"content": "text", ...} or null.
std::optional<std::string> config_token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

std::string name_pre(const PreTokenizer& p) {
  const auto patterns = p.patterns();
  if (patterns.size() == 1) {
    if (patterns[0] == kLlama3Regex) return "llama3";
    if (patterns[0] == kQwen2Regex) return "qwen2";
    if (patterns[0] == kGpt2Regex) return "gpt-2";
  }
  return "custom";
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_from_json(const json& tj, const json& config, const std::string& source) {
  BpeSetup s;
  s.source = source;
  const json& model = require(tj, "model", "", source);
  const std::string type = get_as<std::string>(require(model, "type", "model.", source), "model.type", source);
  if (type != "BPE") throw Error(source + ": model.type is '" + type + "', not 'BPE'");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      throw Error(fmt::format("{}: model.{} is not supported for byte-level BPE", source, key));
    }
  }
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0) {
    throw Error(source + ": model.dropout is not supported (encoding would not be deterministic)");
  }

  const json& vocab = require(model, "vocab", "model.", source);
  if (!vocab.is_object()) throw Error(source + ": key 'model.vocab' has the wrong type (" + std::string(vocab.type_name()) + ")");
  s.model_vocab.reserve(vocab.size());
  const auto place = [&](std::int32_t id, const std::string& text, std::uint8_t form, bool special) {
    if (id < 0) throw Error(fmt::format("{}: token '{}' has a negative id {}", source, text, id));
    if (static_cast<std::size_t>(id) >= s.text.size()) {
      s.text.resize(id + 1);
      s.form.resize(id + 1, BpeSetup::mapped);
      s.special.resize(id + 1, 0);
    }
    s.text[id] = text;
    s.form[id] = form;
    s.special[id] = special;
  };
  // Two tokens on one id: decoding it could give either, and the model's embedding row means only one.
  std::vector<bool> named;
  for (const auto& [text, id] : vocab.items()) {
    const auto i = get_as<std::int32_t>(id, "model.vocab." + text, source);
    if (i >= 0 && static_cast<std::size_t>(i) < named.size() && named[i])
      throw Error(fmt::format("{}: model.vocab: tokens '{}' and '{}' both have id {}", source, shown_name(s.text[i]), shown_name(text), i));
    s.model_vocab.emplace(text, i);
    place(i, text, BpeSetup::mapped, false);
    named.resize(s.text.size());
    named[i] = true;
  }

  const json& merges = require(model, "merges", "model.", source);
  s.merges.reserve(merges.size());
  for (const auto& m : merges) {
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const std::size_t space = line.find(' ', 1);
      if (space == std::string::npos) throw Error(source + ": model.merges entry '" + line + "' is not 'left right'");
      s.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      s.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw Error(source + ": model.merges entry " + m.dump() + " is neither 'left right' nor [left, right]");
    }
  }

  s.model_options.ignore_merges = flag(model, "ignore_merges", false);
  s.model_options.fuse_unk = flag(model, "fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = s.model_vocab.find(model["unk_token"].get<std::string>());
    if (it != s.model_vocab.end()) s.model_options.unk = it->second;
  }

  if (tj.contains("added_tokens")) {
    for (const auto& a : tj["added_tokens"]) {
      AddedToken t;
      t.id = get_as<std::int32_t>(require(a, "id", "added_tokens[].", source), "added_tokens[].id", source);
      t.content = get_as<std::string>(require(a, "content", "added_tokens[].", source), "added_tokens[].content", source);
      t.special = flag(a, "special", false);
      t.single_word = flag(a, "single_word", false);
      t.lstrip = flag(a, "lstrip", false);
      t.rstrip = flag(a, "rstrip", false);
      t.normalized = flag(a, "normalized", !t.special);
      place(t.id, t.content, BpeSetup::raw, t.special);
      s.added.push_back(std::move(t));
    }
  }

  s.nfc = parse_normalizer(tj.value("normalizer", json()), source);
  s.pre_tokenizer = std::make_unique<PreTokenizer>(PreTokenizer::from_json(tj.value("pre_tokenizer", json()), source));
  s.pre_name = name_pre(*s.pre_tokenizer);
  parse_post_processor(tj.value("post_processor", json()), source, s.prefix, s.suffix);
  check_decoder(tj.value("decoder", json()), source);

  // Special tokens: tokenizer_config.json names them; otherwise the post-processor template does.
  const auto lookup = [&](const std::string& key) -> std::optional<std::int32_t> {
    if (!config.is_object() || !config.contains(key)) return std::nullopt;
    const auto text = config_token_text(config[key]);
    if (!text) return std::nullopt;
    for (const auto& t : s.added)
      if (t.content == *text) return t.id;
    const auto it = s.model_vocab.find(*text);
    if (it != s.model_vocab.end()) return it->second;
    throw Error(fmt::format("{}: tokenizer_config.json {} '{}' is not a token of the vocabulary", source, key, *text));
  };
  SpecialTokens& st = s.special_tokens;
  st.bos = lookup("bos_token");
  st.eos = lookup("eos_token");
  st.pad = lookup("pad_token");
  st.unk = lookup("unk_token");
  if (!st.unk) st.unk = s.model_options.unk;
  if (!st.bos && !s.prefix.empty() && !(config.is_object() && config.contains("bos_token"))) st.bos = s.prefix.front();
  if (config.is_object() && config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
    s.prefix.clear();
    if (config["add_bos_token"].get<bool>()) {
      if (!st.bos) throw Error(source + ": tokenizer_config.json add_bos_token is true, but bos_token is not set");
      s.prefix.push_back(*st.bos);
    }
  }
  if (config.is_object() && config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
    s.suffix.clear();
    if (config["add_eos_token"].get<bool>()) {
      if (!st.eos) throw Error(source + ": tokenizer_config.json add_eos_token is true, but eos_token is not set");
      s.suffix.push_back(*st.eos);
    }
  }
  st.add_bos = !s.prefix.empty() && st.bos && s.prefix.front() == *st.bos;
  st.add_eos = !s.suffix.empty() && st.eos && s.suffix.back() == *st.eos;
  s.model_options.duplicate_merge_keeps_first = false;  // HF builds its merge map last-wins
  return std::make_unique<BpeTokenizer>(std::move(s));
}

}  // namespace mo::tok
