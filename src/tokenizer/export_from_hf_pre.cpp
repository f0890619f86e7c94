// tokenizer.json pre_tokenizer -> llama.cpp's tokenizer.ggml.pre. convert_hf_to_gguf.py hashes the
// ids of a probe text (which needs the HF runtime); we compare the pre-tokenizer's patterns instead.
#include <string>
#include <vector>

#include "export_internal.h"
#include "mo/core/error.h"
#include "mo/core/strings.h"

namespace mo::tok::hfx {

namespace {

using nlohmann::json;

struct Flattened {
  std::vector<std::string> patterns;  // each splits every piece, Isolated
  bool byte_level = false;
};

// Every HF pre-tokenizer llama.cpp can run, as the regex (or placeholder) it splits with.
void flatten(const json& p, Flattened& out, const std::string& source) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  const auto unsupported = [&](const std::string& why) {
    throw Error(source + ": pre_tokenizer " + p.dump() + " cannot be expressed in GGUF: " + why);
  };
  if (type == "Sequence") {
    for (const auto& step : p.at("pretokenizers")) flatten(step, out, source);
  } else if (type == "Split") {
    const json& pattern = p.at("pattern");
    if (p.value("invert", false)) unsupported("inverted Split");
    if (p.value("behavior", "") != "Isolated") unsupported("llama.cpp splits with behavior Isolated only");
    if (pattern.contains("Regex")) {
      out.patterns.push_back(canonical_regex(pattern["Regex"].get<std::string>()));
    } else {
      out.patterns.push_back("<String:" + pattern.value("String", "") + ">");
    }
  } else if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false)) unsupported("llama.cpp adds no space in front of byte-level text");
    out.byte_level = true;
    if (p.value("use_regex", true)) out.patterns.push_back(kGpt2Regex);
  } else if (type == "Digits") {
    out.patterns.push_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "Punctuation") {
    const std::string behavior = p.value("behavior", "Isolated");
    out.patterns.push_back(behavior == "Contiguous" ? kPunctuationContiguous : "<Punctuation:" + behavior + ">");
  } else {
    unsupported("no llama.cpp pre-tokenizer of type " + type);
  }
}

}  // namespace

std::string gguf_pre_from_hf(const json& tokenizer_json, const json& config, const std::string& source) {
  Flattened flat;
  flatten(tokenizer_json.value("pre_tokenizer", json(nullptr)), flat, source);
  if (!flat.byte_level)
    throw Error(source +
                ": a BPE model without byte_fallback must have a ByteLevel pre-tokenizer to become a GGUF "
                "\"gpt2\" vocabulary");
  const json& model = tokenizer_json.at("model");
  const bool ignore_merges = model.value("ignore_merges", false);
  const auto found = match_pre_families(flat.patterns, ignore_merges);
  if (found.empty()) {
    std::string message =
        source + ": pre-tokenizer not recognised as one of llama.cpp's (known: " + join(known_pre_names()) + "); its Split patterns are";
    for (const auto& p : flat.patterns) message += "\n  " + p;
    if (!match_pre_families(flat.patterns, !ignore_merges).empty())
      message += "\n(the patterns are known, but with model.ignore_merges " + std::string(ignore_merges ? "false" : "true") + ")";
    throw Error(message);
  }
  const PreFamily& family = *found.front();
  if (config.is_object()) {
    if (const auto it = config.find("gguf_tokenizer_pre"); it != config.end() && it->is_string()) {
      const std::string hint = it->get<std::string>();
      for (const auto& name : family.names)
        if (hint == name.name) return hint;
    }
    if (const auto it = config.find("clean_up_tokenization_spaces"); it != config.end() && it->is_boolean()) {
      for (const auto& name : family.names)
        if (name.clean_spaces == it->get<bool>()) return name.name;
    }
  }
  return family.names.front().name;
}

}  // namespace mo::tok::hfx
