// make_spm_from_json: a tokenizer.json whose model is BPE with byte_fallback and whose spaces become
// "▁" (Llama 2, Mistral, TinyLlama), run the way Hugging Face tokenizers runs it.
#include <algorithm>
#include <string_view>

#include "factories.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/io/json_file.h"
#include "spm_text.h"
#include "spm_tokenizer.h"

namespace mo::tok {

using namespace spm;

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw Error(source + ": " + key + ": " + what);
}

std::string get_string(const json& j, const std::string& field, const std::string& source, const std::string& key) {
  if (!j.contains(field) || !j[field].is_string()) fail(source, key + "." + field, "expected a string");
  return j[field].get<std::string>();
}

bool get_bool(const json& j, const std::string& field, bool fallback) {
  if (!j.is_object() || !j.contains(field) || j[field].is_null()) return fallback;
  return j[field].get<bool>();
}

// A tokenizer_config.json token entry: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> config_token(const json& config, const char* field) {
  if (!config.is_object() || !config.contains(field)) return std::nullopt;
  const json& v = config[field];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

// A Replace pattern must be {"String": "..."}; regex patterns are not supported.
std::string replace_pattern(const json& step, const std::string& source, const std::string& key) {
  if (!step.contains("pattern") || !step["pattern"].is_object() || !step["pattern"].contains("String")) {
    fail(source, key + ".pattern", "only {\"String\": ...} patterns are supported");
  }
  return step["pattern"]["String"].get<std::string>();
}

PrependScheme prepend_scheme(const json& step, const std::string& source, const std::string& key) {
  if (step.contains("prepend_scheme") && step["prepend_scheme"].is_string()) {
    const std::string s = step["prepend_scheme"].get<std::string>();
    if (s == "always") return PrependScheme::always;
    if (s == "first") return PrependScheme::first;
    if (s == "never") return PrependScheme::never;
    fail(source, key + ".prepend_scheme", "'" + s + "' is not one of always, first, never");
  }
  // Files written before prepend_scheme existed only say add_prefix_space.
  return get_bool(step, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
}

void read_normalizer(const json& j, const std::string& source, const std::string& key, std::vector<HfNormalizeStep>& out) {
  if (j.is_null()) return;
  const std::string type = get_string(j, "type", source, key);
  if (type == "Sequence") {
    const json& list = j.value("normalizers", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) read_normalizer(list[i], source, key + ".normalizers[" + std::to_string(i) + "]", out);
  } else if (type == "Prepend") {
    out.push_back({HfNormalizeStep::prepend, get_string(j, "prepend", source, key), ""});
  } else if (type == "Replace") {
    out.push_back({HfNormalizeStep::replace, replace_pattern(j, source, key), get_string(j, "content", source, key)});
  } else {
    fail(source, key,
         "normalizer type '" + type + "' is not supported for SentencePiece-style BPE (supported: Sequence, Prepend, Replace)");
  }
}

void read_decoder(const json& j, const std::string& source, const std::string& key, std::vector<HfDecodeStep>& out) {
  const std::string type = get_string(j, "type", source, key);
  HfDecodeStep step;
  if (type == "Sequence") {
    const json& list = j.value("decoders", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) read_decoder(list[i], source, key + ".decoders[" + std::to_string(i) + "]", out);
    return;
  } else if (type == "Replace") {
    step.kind = HfDecodeStep::replace;
    step.pattern = replace_pattern(j, source, key);
    step.content = get_string(j, "content", source, key);
  } else if (type == "ByteFallback") {
    step.kind = HfDecodeStep::byte_fallback;
  } else if (type == "Fuse") {
    step.kind = HfDecodeStep::fuse;
  } else if (type == "Strip") {
    step.kind = HfDecodeStep::strip;
    step.content = get_string(j, "content", source, key);
    step.start = j.value("start", 0);
    step.stop = j.value("stop", 0);
  } else if (type == "Metaspace") {
    step.kind = HfDecodeStep::metaspace;
    step.replacement = get_string(j, "replacement", source, key);
    step.scheme = prepend_scheme(j, source, key);
  } else {
    fail(source, key,
         "decoder type '" + type +
             "' is not supported for SentencePiece-style BPE (supported: Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace)");
  }
  out.push_back(std::move(step));
}

void read_pre_tokenizer(const json& j, const std::string& source, const std::string& key, SpmConfig& cfg) {
  if (j.is_null()) return;
  const std::string type = get_string(j, "type", source, key);
  if (type == "Sequence" && j.contains("pretokenizers") && j["pretokenizers"].size() == 1) {
    read_pre_tokenizer(j["pretokenizers"][0], source, key + ".pretokenizers[0]", cfg);
    return;
  }
  if (type != "Metaspace") {
    fail(source, key, "pre-tokenizer type '" + type + "' is not supported for SentencePiece-style BPE (supported: none, Metaspace)");
  }
  HfMetaspace ms;
  ms.replacement = get_string(j, "replacement", source, key);
  ms.scheme = prepend_scheme(j, source, key);
  ms.split = get_bool(j, "split", true);
  cfg.metaspace = ms;
}

// TemplateProcessing "single": special tokens before $A go in front, those after it at the end.
void read_post_processor(const json& j, const std::string& source, SpmConfig& cfg) {
  const std::string key = "post_processor";
  const std::string type = get_string(j, "type", source, key);
  if (type != "TemplateProcessing") fail(source, key, "type '" + type + "' is not supported (supported: TemplateProcessing)");
  bool after = false;
  const json& single = j.value("single", json::array());
  for (std::size_t i = 0; i < single.size(); ++i) {
    const json& item = single[i];
    if (item.contains("Sequence")) {
      after = true;
      continue;
    }
    if (!item.contains("SpecialToken")) fail(source, key + ".single[" + std::to_string(i) + "]", "expected SpecialToken or Sequence");
    const std::string name = get_string(item["SpecialToken"], "id", source, key + ".single[" + std::to_string(i) + "].SpecialToken");
    if (!j.contains("special_tokens") || !j["special_tokens"].contains(name)) {
      fail(source, key + ".special_tokens", "'" + name + "' is used in single but not defined");
    }
    for (const json& id : j["special_tokens"][name].value("ids", json::array())) {
      (after ? cfg.suffix_ids : cfg.prefix_ids).push_back(json_int<std::int32_t>(id, source, key + ".special_tokens." + name + ".ids"));
    }
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_from_json(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& source) {
  SpmConfig cfg;
  cfg.source = source;
  cfg.algorithm = SpmAlgorithm::hf_bpe;
  try {
    if (!tokenizer.contains("model") || !tokenizer["model"].is_object()) fail(source, "model", "missing");
    const json& model = tokenizer["model"];
    const std::string type = model.value("type", "BPE");
    if (type != "BPE") fail(source, "model.type", "'" + type + "' is not BPE");
    if (!model.contains("vocab") || !model["vocab"].is_object()) fail(source, "model.vocab", "expected an object of token -> id");
    if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0.0) {
      fail(source, "model.dropout", "BPE dropout is not supported");
    }

    // Ids index a table: bounded so a hostile id cannot ask for gigabytes (the largest real vocabularies are ~256k).
    constexpr std::int32_t kMaxId = (1 << 24) - 1;
    auto token_id = [&](const json& id, const std::string& key) {
      const auto v = json_int<std::int32_t>(id, source, key);
      if (v < 0 || v > kMaxId) fail(source, key, fmt::format("id {} is outside [0, {}]", v, kMaxId));
      return v;
    };
    std::int32_t max_id = -1;
    cfg.model_vocab.reserve(model["vocab"].size());
    for (const auto& [text, id] : model["vocab"].items()) {
      const std::int32_t v = token_id(id, "model.vocab." + text);
      cfg.model_vocab.emplace(text, v);
      max_id = std::max(max_id, v);
    }
    static const json kEmpty = json::array();
    const json& added = tokenizer.contains("added_tokens") ? tokenizer["added_tokens"] : kEmpty;
    if (!added.is_array()) fail(source, "added_tokens", "expected an array");
    for (std::size_t i = 0; i < added.size(); ++i) {
      if (!added[i].is_object() || !added[i].contains("id"))
        fail(source, "added_tokens[" + std::to_string(i) + "]", "expected an object with an id");
      max_id = std::max(max_id, token_id(added[i]["id"], "added_tokens[" + std::to_string(i) + "].id"));
    }
    cfg.tokens.resize(static_cast<std::size_t>(max_id + 1));
    for (auto& t : cfg.tokens) t.attr = kAttrUnused;  // ids no entry names
    for (const auto& [text, id] : cfg.model_vocab) {
      // Two tokens on one id: decoding it could give either, and the model's embedding row means only one.
      if (cfg.tokens[id].attr != kAttrUnused) {
        // minmax returns references: its arguments must outlive the pair.
        const std::string_view old_text = cfg.tokens[id].text, new_text = text;
        const auto [a, b] = std::minmax(old_text, new_text);
        fail(source, "model.vocab", fmt::format("tokens '{}' and '{}' both have id {}", shown_name(a), shown_name(b), id));
      }
      cfg.tokens[id].text = text;
      const bool byte = text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>';
      cfg.tokens[id].attr = byte ? kAttrByte : kAttrNormal;
    }
    for (std::size_t i = 0; i < added.size(); ++i) {
      const json& a = added[i];
      const std::string key = "added_tokens[" + std::to_string(i) + "]";
      SpmAddedToken t;
      t.id = token_id(a["id"], key + ".id");
      t.special = get_bool(a, "special", false);
      t.lstrip = get_bool(a, "lstrip", false);
      t.rstrip = get_bool(a, "rstrip", false);
      t.single_word = get_bool(a, "single_word", false);
      cfg.tokens[t.id].text = get_string(a, "content", source, key);
      cfg.tokens[t.id].attr = t.special ? kAttrControl : kAttrUserDefined;
      cfg.added.push_back(t);
    }

    cfg.byte_fallback = get_bool(model, "byte_fallback", false);
    cfg.fuse_unk = get_bool(model, "fuse_unk", false);
    cfg.ignore_merges = get_bool(model, "ignore_merges", false);
    if (model.contains("continuing_subword_prefix") && model["continuing_subword_prefix"].is_string()) {
      cfg.continuing_subword_prefix = model["continuing_subword_prefix"].get<std::string>();
    }
    if (model.contains("end_of_word_suffix") && model["end_of_word_suffix"].is_string()) {
      cfg.end_of_word_suffix = model["end_of_word_suffix"].get<std::string>();
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      const std::string unk = model["unk_token"].get<std::string>();
      auto it = cfg.model_vocab.find(unk);
      if (it == cfg.model_vocab.end()) fail(source, "model.unk_token", "'" + unk + "' is not in model.vocab");
      cfg.model_unk = it->second;
      cfg.special.unk = it->second;
    }

    const json& merges = model.contains("merges") ? model["merges"] : kEmpty;
    cfg.merges.reserve(merges.size());
    const std::size_t prefix_len = cfg.continuing_subword_prefix.size();
    for (std::size_t i = 0; i < merges.size(); ++i) {
      const auto key = [i] { return "model.merges[" + std::to_string(i) + "]"; };
      std::string a, b;
      if (merges[i].is_string()) {
        const std::string m = merges[i].get<std::string>();
        const std::size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) fail(source, key(), "'" + m + "' is not two tokens separated by a space");
        a = m.substr(0, sp);
        b = m.substr(sp + 1);
      } else if (merges[i].is_array() && merges[i].size() == 2) {
        a = merges[i][0].get<std::string>();
        b = merges[i][1].get<std::string>();
      } else {
        fail(source, key(), "expected \"a b\" or [a, b]");
      }
      auto ia = cfg.model_vocab.find(a), ib = cfg.model_vocab.find(b);
      if (ia == cfg.model_vocab.end()) fail(source, key(), "'" + a + "' is not in model.vocab");
      if (ib == cfg.model_vocab.end()) fail(source, key(), "'" + b + "' is not in model.vocab");
      const std::string merged = a + b.substr(std::min(prefix_len, b.size()));
      auto im = cfg.model_vocab.find(merged);
      if (im == cfg.model_vocab.end()) fail(source, key(), "the merged token '" + merged + "' is not in model.vocab");
      const std::uint64_t k =
          (static_cast<std::uint64_t>(static_cast<std::uint32_t>(ia->second)) << 32) | static_cast<std::uint32_t>(ib->second);
      cfg.merges[k] = {static_cast<std::int32_t>(i), im->second};
    }

    read_normalizer(tokenizer.value("normalizer", json()), source, "normalizer", cfg.normalizer);
    read_pre_tokenizer(tokenizer.value("pre_tokenizer", json()), source, "pre_tokenizer", cfg);
    const json decoder = tokenizer.value("decoder", json());
    cfg.has_decoder = !decoder.is_null();
    if (cfg.has_decoder) read_decoder(decoder, source, "decoder", cfg.decoder);

    // Special tokens: names from tokenizer_config.json, what encode adds from the post-processor (or,
    // without one, from add_bos_token / add_eos_token as transformers would set it up).
    auto id_of = [&](const std::optional<std::string>& text) -> std::optional<std::int32_t> {
      if (!text) return std::nullopt;
      for (const auto& a : cfg.added) {
        if (cfg.tokens[a.id].text == *text) return a.id;
      }
      if (auto it = cfg.model_vocab.find(*text); it != cfg.model_vocab.end()) return it->second;
      return std::nullopt;
    };
    SpecialTokens& sp = cfg.special;
    sp.bos = id_of(config_token(config, "bos_token"));
    sp.eos = id_of(config_token(config, "eos_token"));
    sp.pad = id_of(config_token(config, "pad_token"));
    if (auto unk = id_of(config_token(config, "unk_token"))) sp.unk = unk;
    const json post = tokenizer.value("post_processor", json());
    if (!post.is_null()) {
      read_post_processor(post, source, cfg);
    } else {
      if (get_bool(config, "add_bos_token", false) && sp.bos) cfg.prefix_ids = {*sp.bos};
      if (get_bool(config, "add_eos_token", false) && sp.eos) cfg.suffix_ids = {*sp.eos};
    }
    if (!sp.bos && !cfg.prefix_ids.empty()) sp.bos = cfg.prefix_ids.front();
    if (!sp.eos && !cfg.suffix_ids.empty()) sp.eos = cfg.suffix_ids.back();
    sp.add_bos = sp.bos && std::find(cfg.prefix_ids.begin(), cfg.prefix_ids.end(), *sp.bos) != cfg.prefix_ids.end();
    sp.add_eos = sp.eos && std::find(cfg.suffix_ids.begin(), cfg.suffix_ids.end(), *sp.eos) != cfg.suffix_ids.end();
    for (std::int32_t id : cfg.prefix_ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= cfg.tokens.size())
        fail(source, "post_processor", "token id " + std::to_string(id) + " is outside the vocabulary");
    }
    for (std::int32_t id : cfg.suffix_ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= cfg.tokens.size())
        fail(source, "post_processor", "token id " + std::to_string(id) + " is outside the vocabulary");
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": unexpected JSON structure: " + e.what());
  }
  return std::make_unique<SpmTokenizer>(std::move(cfg));
}

}  // namespace mo::tok
