// GGUF tokenizer -> tokenizer.json, as transformers' GGUF loader (GGUFLlamaConverter, which follows
// LlamaConverter) builds it for "llama" vocabularies, and as Qwen2Converter / Llama-3's tokenizer.json
// are laid out for "gpt2" ones, with llama.cpp's pre-tokenizer regexes.
#include <string>
#include <unordered_set>
#include <vector>

#include "export_internal.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"
#include "mo/io/gguf.h"
#include "mo/tokenizer/tokenizer_export.h"

namespace mo::tok {

namespace {

using nlohmann::json;
using namespace hfx;

hfx::HfPlan make_plan(const gguf::File& f, hfx::GgufVocab& v) {
  HfPlan plan;
  if (v.model == "llama") {
    plan.spm = true;
    plan.add_space_prefix = v.add_space_prefix.value_or(true);
    // llama.cpp's defaults for an SPM vocabulary whose file does not name them.
    const auto fallback = [&](std::optional<std::int32_t>& id, const char* key, std::int32_t def) {
      if (f.find(key) == nullptr && !id && def < static_cast<std::int32_t>(v.tokens.size())) id = def;
    };
    fallback(v.bos, "tokenizer.ggml.bos_token_id", 1);
    fallback(v.eos, "tokenizer.ggml.eos_token_id", 2);
    fallback(v.unk, "tokenizer.ggml.unknown_token_id", 0);
    plan.add_bos = v.add_bos.value_or(true);
    plan.clean_spaces = false;
    if (v.scores.empty() && v.merges.empty())
      throw Error(v.path + ": metadata key 'tokenizer.ggml.scores' is missing (a \"llama\" vocabulary needs scores to derive merges)");
  } else if (v.model == "gpt2") {
    // llama.cpp reads a missing or empty tokenizer.ggml.pre as "default".
    plan.pre = v.pre && !v.pre->empty() ? *v.pre : "default";
    const PreName* name = nullptr;
    plan.family = find_pre_family(plan.pre, &name);
    if (plan.family == nullptr)
      throw Error(v.path + ": tokenizer.ggml.pre '" + plan.pre +
                  "' has no Hugging Face pre-tokenizer here; known: " + join(known_pre_names()));
    if (v.merges.empty()) throw Error(v.path + ": metadata key 'tokenizer.ggml.merges' is missing (a \"gpt2\" vocabulary needs merges)");
    plan.add_bos = v.add_bos.value_or(name->add_bos);
    plan.clean_spaces = name->clean_spaces;
  } else {
    throw Error(v.path + ": tokenizer.ggml.model '" + v.model +
                "' cannot be written as a Hugging Face tokenizer (supported: \"llama\", \"gpt2\")");
  }
  plan.add_eos = v.add_eos.value_or(false);
  return plan;
}

// llama.cpp's converter fills ids the tokenizer does not use with "[PAD<id>]" of type UNUSED; HF
// leaves them out of the vocabulary and gguf_tokenizer_kv_from_hf puts them back from vocab_size.
bool is_padding(const GgufVocab& v, std::size_t id) {
  return v.types[id] == kTypeUnused && v.tokens[id] == "[PAD" + std::to_string(id) + "]";
}

json split_merges(const GgufVocab& v) {
  json out = json::array();
  for (std::size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    // llama.cpp splits at the first space after the first byte.
    const std::size_t space = m.find(' ', 1);
    if (space == std::string::npos)
      throw Error(v.path + ": tokenizer.ggml.merges entry " + std::to_string(i) + " '" + m + "' is not 'left right'");
    out.push_back(json::array({m.substr(0, space), m.substr(space + 1)}));
  }
  return out;
}

json model_json(const GgufVocab& v, const HfPlan& plan) {
  json vocab = json::object();
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    if (!seen.insert(v.tokens[i]).second)
      throw Error(v.path + ": token '" + v.tokens[i] + "' appears twice in tokenizer.ggml.tokens (id " + std::to_string(i) + ")");
    if (!is_padding(v, i)) vocab[v.tokens[i]] = i;
  }
  json merges;
  if (!v.merges.empty()) {
    merges = split_merges(v);
  } else {
    merges = json::array();
    for (auto& [l, r] : spm_merges_from_scores(v.tokens, v.scores)) merges.push_back(json::array({l, r}));
  }
  json unk = nullptr;
  if (plan.spm && v.unk) unk = v.tokens[*v.unk];
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", unk},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", plan.spm},
          {"byte_fallback", plan.spm},
          {"ignore_merges", plan.family != nullptr && plan.family->ignore_merges},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}};
}

json added_tokens_json(const GgufVocab& v) {
  json out = json::array();
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    const auto t = v.types[i];
    if (t == kTypeUnknown || t == kTypeControl || t == kTypeUserDefined)
      out.push_back(added_token_json(static_cast<std::int64_t>(i), v.tokens[i], t != kTypeUserDefined));
  }
  return out;
}

json replace_json(std::string_view pattern, std::string_view content) {
  return {{"type", "Replace"}, {"pattern", {{"String", pattern}}}, {"content", content}};
}

json normalizer_json(const HfPlan& plan) {
  if (!plan.spm) return nullptr;
  json steps = json::array();
  if (plan.add_space_prefix) steps.push_back({{"type", "Prepend"}, {"prepend", kSpmSpace}});
  steps.push_back(replace_json(" ", kSpmSpace));
  return {{"type", "Sequence"}, {"normalizers", std::move(steps)}};
}

json pre_tokenizer_json(const HfPlan& plan) {
  if (plan.spm) return nullptr;
  json steps = json::array();
  for (const auto& r : plan.family->regexes)
    steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

json decoder_json(const HfPlan& plan) {
  if (!plan.spm) return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  json steps = json::array({replace_json(kSpmSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  if (plan.add_space_prefix) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", std::move(steps)}};
}

// LlamaTokenizerFast.update_post_processor's template: "<bos>:0 $A:0 <eos>:0" and the pair form.
json post_processor_json(const GgufVocab& v, const HfPlan& plan) {
  const bool bos = plan.add_bos && v.bos.has_value();
  const bool eos = plan.add_eos && v.eos.has_value();
  if (!bos && !eos) {
    if (plan.spm) return nullptr;
    return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  }
  const auto special = [&](std::int32_t id, int type_id) { return json{{"SpecialToken", {{"id", v.tokens[id]}, {"type_id", type_id}}}}; };
  const auto sequence = [](const char* id, int type_id) { return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  json single = json::array(), pair = json::array(), specials = json::object();
  for (int seq = 0; seq < 2; ++seq) {
    json& out = seq == 0 ? single : pair;
    for (int part = 0; part <= seq; ++part) {
      if (bos) out.push_back(special(*v.bos, part));
      out.push_back(sequence(part == 0 ? "A" : "B", part));
      if (eos) out.push_back(special(*v.eos, part));
    }
  }
  for (const auto& id : {bos ? v.bos : std::nullopt, eos ? v.eos : std::nullopt})
    if (id) specials[v.tokens[*id]] = {{"id", v.tokens[*id]}, {"ids", json::array({*id})}, {"tokens", json::array({v.tokens[*id]})}};
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

}  // namespace

HfTokenizerFiles hf_tokenizer_from_gguf(const gguf::File& f) {
  GgufVocab v = read_gguf_vocab(f);
  const HfPlan plan = make_plan(f, v);
  HfTokenizerFiles out;
  out.tokenizer_json = {{"version", "1.0"},
                        {"truncation", nullptr},
                        {"padding", nullptr},
                        {"added_tokens", added_tokens_json(v)},
                        {"normalizer", normalizer_json(plan)},
                        {"pre_tokenizer", pre_tokenizer_json(plan)},
                        {"post_processor", post_processor_json(v, plan)},
                        {"decoder", decoder_json(plan)},
                        {"model", model_json(v, plan)}};
  out.tokenizer_config = hf_tokenizer_config(v, plan);
  out.special_tokens_map = hf_special_tokens_map(v);
  return out;
}

}  // namespace mo::tok
