#include "mo/formats/hf_quant_config.h"

#include <fmt/format.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>

#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/core/json_fields.h"

namespace mo::formats {
namespace {

using json = nlohmann::json;

// compressed-tensors' QuantizationArgs forbids unknown keys and has gained keys over time
// (scale_dtype, zp_dtype); these ten are the ones every release since mid-2024 accepts.
json quant_args(int bits, const char* type, bool sym, const json& group_size, const char* strategy, bool dynamic, const json& observer) {
  return {{"num_bits", bits},     {"type", type},
          {"symmetric", sym},     {"group_size", group_size},
          {"strategy", strategy}, {"block_structure", nullptr},
          {"dynamic", dynamic},   {"actorder", nullptr},
          {"observer", observer}, {"observer_kwargs", json::object()}};
}

json fp8_args(const char* strategy, bool dynamic, const json& observer) {
  return quant_args(8, "float", true, nullptr, strategy, dynamic, observer);
}

// The top-level keys of a compressed-tensors quantization_config as llm-compressor writes them.
json compressed_tensors_config(const char* format, const std::vector<std::string>& ignore, json groups) {
  return {{"quant_method", "compressed-tensors"}, {"format", format},           {"quantization_status", "compressed"},
          {"global_compression_ratio", nullptr},  {"kv_cache_scheme", nullptr}, {"ignore", ignore},
          {"config_groups", std::move(groups)}};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Typed reads of optional keys: a present key of the wrong type is an error naming it.
template <class J>
const J* find_key(const J& q, const char* key) {
  auto it = q.find(key);
  return it == q.end() || it->is_null() ? nullptr : &*it;
}

template <class J>
int get_int(const J& q, std::initializer_list<const char*> keys, int fallback, const char* where) {
  for (const char* k : keys)
    if (const J* v = find_key(q, k)) {
      if (!v->is_number_integer())
        throw UsageError(fmt::format("quantization_config{}.{}: expected an integer, got {}", where, k, v->dump()));
      return json_int<int>(*v, fmt::format("quantization_config{}", where), k);
    }
  return fallback;
}

template <class J>
bool get_bool(const J& q, const char* key, bool fallback, const char* where) {
  const J* v = find_key(q, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw UsageError(fmt::format("quantization_config{}.{}: expected true or false, got {}", where, key, v->dump()));
  return v->template get<bool>();
}

template <class J>
std::string get_string(const J& q, const char* key, const std::string& fallback, const char* where) {
  const J* v = find_key(q, key);
  if (!v) return fallback;
  if (!v->is_string()) throw UsageError(fmt::format("quantization_config{}.{}: expected a string, got {}", where, key, v->dump()));
  return v->template get<std::string>();
}

// A list of strings; Transformers' modules_in_block_to_quantize is a list of lists, flattened here.
template <class J>
std::vector<std::string> get_strings(const J& q, const char* key, const char* where) {
  std::vector<std::string> out;
  const J* v = find_key(q, key);
  if (!v) return out;
  auto bad = [&] { return UsageError(fmt::format("quantization_config{}.{}: expected a list of strings, got {}", where, key, v->dump())); };
  if (!v->is_array()) throw bad();
  for (const auto& e : *v) {
    if (e.is_string())
      out.push_back(e.template get<std::string>());
    else if (e.is_array()) {
      for (const auto& s : e) {
        if (!s.is_string()) throw bad();
        out.push_back(s.template get<std::string>());
      }
    } else {
      throw bad();
    }
  }
  return out;
}

void check_bits(int bits, const std::string& what) {
  if (bits != 4 && bits != 8) throw UsageError(fmt::format("{}: {}-bit GPTQ is not supported (4 or 8 bits)", what, bits));
}

void check_group(int g, const std::string& what) {
  if (g == 0 || g < -1) throw UsageError(fmt::format("{}: group_size {} (expected -1 or a positive number)", what, g));
}

template <class J>
void parse_awq(const J& q, HfQuantConfig& c) {
  c.method = QuantMethod::awq;
  // AutoAWQ's own quant_config.json spells them w_bit / q_group_size; vLLM accepts both.
  c.bits = get_int(q, {"bits", "w_bit"}, 0, "");
  c.group_size = get_int(q, {"group_size", "q_group_size"}, 128, "");
  c.version = lower(get_string(q, "version", "gemm", ""));
  c.sym = false;
  if (c.bits != 4) throw UsageError(fmt::format("quantization_config: AWQ with {} bits is not supported (4-bit GEMM only)", c.bits));
  if (c.version != "gemm")
    throw UsageError(
        fmt::format("quantization_config.version: AWQ '{}' is not supported (only 'gemm'; GEMV, Marlin and "
                    "exllama checkpoints pack differently)",
                    c.version));
  if (!get_bool(q, "zero_point", true, "")) throw UsageError("quantization_config.zero_point: AWQ without zero points is not supported");
  check_group(c.group_size, "quantization_config.group_size");
  c.modules_to_not_convert = get_strings(q, "modules_to_not_convert", "");
}

template <class J>
void parse_gptq(const J& q, HfQuantConfig& c) {
  c.method = QuantMethod::gptq;
  c.bits = get_int(q, {"bits"}, 0, "");
  check_bits(c.bits, "quantization_config.bits");
  c.group_size = get_int(q, {"group_size"}, 128, "");
  check_group(c.group_size, "quantization_config.group_size");
  c.desc_act = get_bool(q, "desc_act", false, "");
  c.sym = get_bool(q, "sym", true, "");
  c.lm_head = get_bool(q, "lm_head", false, "");
  if (get_bool(q, "is_marlin_format", false, ""))
    throw UsageError("quantization_config.is_marlin_format: Marlin-repacked GPTQ checkpoints are not supported");
  const std::string fmt = get_string(q, "checkpoint_format", "gptq", "");
  if (fmt != "gptq" && fmt != "gptq_v2")
    throw UsageError(fmt::format("quantization_config.checkpoint_format: '{}' is not supported (gptq or gptq_v2)", fmt));
  c.gptq_v2 = fmt == "gptq_v2";
  c.modules_to_quantize = get_strings(q, "modules_in_block_to_quantize", "");
  if (const J* d = find_key(q, "dynamic")) {
    if (!d->is_object()) throw UsageError(fmt::format("quantization_config.dynamic: expected an object, got {}", d->dump()));
    for (const auto& [key, value] : d->items()) {
      GptqDynamicRule r;
      r.skip = key.rfind("-:", 0) == 0;
      r.pattern = key.rfind("-:", 0) == 0 || key.rfind("+:", 0) == 0 ? key.substr(2) : key;
      if (!value.is_object())
        throw UsageError(fmt::format("quantization_config.dynamic.{}: expected an object, got {}", key, value.dump()));
      r.overrides = json::parse(value.dump());
      const std::string where = ".dynamic." + key;
      if (!r.skip) {
        if (r.overrides.contains("bits"))
          check_bits(get_int(r.overrides, {"bits"}, 4, where.c_str()), "quantization_config" + where + ".bits");
        if (r.overrides.contains("group_size"))
          check_group(get_int(r.overrides, {"group_size"}, 128, where.c_str()), "quantization_config" + where);
        get_bool(r.overrides, "desc_act", false, where.c_str());
        get_bool(r.overrides, "sym", true, where.c_str());
      }
      regex_match_prefix(r.pattern, "");  // reject a pattern that does not compile now, not per module
      c.dynamic.push_back(std::move(r));
    }
  }
}

// One config group's weights: FP8 (float-quantized) or 4/8-bit integers (pack-quantized).
template <class J>
ModuleQuant parse_ct_weights(const J& w, const std::string& ww, bool integer) {
  const int bits = get_int(w, {"num_bits"}, 8, ww.c_str());
  const std::string type = get_string(w, "type", "int", ww.c_str());
  if (!integer && (bits != 8 || type != "float"))
    throw UsageError(
        fmt::format("quantization_config{}: {}-bit {} weights are not supported (FP8: num_bits 8, type float)", ww, bits, type));
  if (integer && ((bits != 4 && bits != 8) || type != "int"))
    throw UsageError(fmt::format("quantization_config{}: {}-bit {} weights are not supported (pack-quantized: num_bits 4 or 8, type int)",
                                 ww, bits, type));
  const bool sym = get_bool(w, "symmetric", true, ww.c_str());
  if (!integer && !sym) throw UsageError(fmt::format("quantization_config{}.symmetric: FP8 weights must be symmetric", ww));
  if (const J* d = find_key(w, "dynamic"); d && !(d->is_boolean() && !d->template get<bool>()))
    throw UsageError(fmt::format("quantization_config{}.dynamic: weights quantized at run time are not supported", ww));
  const int group = find_key(w, "group_size") ? get_int(w, {"group_size"}, 0, ww.c_str()) : 0;
  std::string strategy = get_string(w, "strategy", "", ww.c_str());
  if (strategy.empty()) strategy = group == -1 ? "channel" : group > 0 ? "group" : "tensor";
  if (!integer && strategy != "channel" && strategy != "tensor")
    throw UsageError(fmt::format("quantization_config{}.strategy: FP8 '{}' scales are not supported (channel or tensor)", ww, strategy));
  if (integer && strategy != "channel" && !(strategy == "group" && group > 0))
    throw UsageError(
        fmt::format("quantization_config{}.strategy: integer '{}' scales{} are not supported (group with a group_size, or channel)", ww,
                    strategy, strategy == "group" ? " without a positive group_size" : ""));
  if (const J* a = find_key(w, "actorder"); integer && a && !(a->is_string() && a->template get<std::string>() == "static"))
    throw UsageError(
        fmt::format("quantization_config{}.actorder: {} (weight_g_idx) is not supported; null or \"static\" only", ww, a->dump()));
  return ModuleQuant{true, bits, strategy == "group" ? group : strategy == "channel" ? -1 : 0, sym, false};
}

template <class J>
void parse_compressed_tensors(const J& q, HfQuantConfig& c) {
  const std::string format = get_string(q, "format", "", "");
  if (format != "float-quantized" && format != "pack-quantized")
    throw UsageError(
        fmt::format("quantization_config.format: compressed-tensors format '{}' is not supported (only "
                    "'float-quantized' FP8 and 'pack-quantized' INT4/INT8 weights)",
                    format));
  const bool integer = format == "pack-quantized";
  c.method = integer ? QuantMethod::ct_int : QuantMethod::fp8;
  if (const J* s = find_key(q, "sparsity_config"); s && s->is_object() && get_string(*s, "format", "dense", ".sparsity_config") != "dense")
    throw UsageError("quantization_config.sparsity_config: sparse compressed-tensors checkpoints are not supported");
  const J* groups = find_key(q, "config_groups");
  if (!groups || !groups->is_object() || groups->empty())
    throw UsageError("quantization_config.config_groups: expected an object with at least one group");
  bool first = true;
  for (const auto& [name, g] : groups->items()) {
    const std::string where = ".config_groups." + name;
    if (!g.is_object()) throw UsageError(fmt::format("quantization_config{}: expected an object (preset names are not supported)", where));
    if (const std::string f = get_string(g, "format", format, where.c_str()); f != format)
      throw UsageError(fmt::format("quantization_config{}.format: '{}' in a '{}' checkpoint is not supported", where, f, format));
    const J* w = find_key(g, "weights");
    if (!w || !w->is_object())
      throw UsageError(fmt::format("quantization_config{}.weights: missing; only weight quantization can be loaded", where));
    const ModuleQuant m = parse_ct_weights(*w, where + ".weights", integer);
    if (integer) {
      if (const J* a = find_key(g, "input_activations"); a && a->is_object())
        throw UsageError(
            fmt::format("quantization_config{}.input_activations: quantized activations with integer weights are not supported", where));
      c.ct_groups.push_back({get_strings(g, "targets", where.c_str()), m});
    } else if (const J* a = find_key(g, "input_activations"); a && a->is_object() && get_bool(*a, "dynamic", false, ".input_activations")) {
      c.fp8_dynamic_activations = true;
    }
    if (first) {
      c.bits = m.bits, c.group_size = m.group_size, c.sym = m.sym;
      c.fp8_per_channel = m.group_size == -1;
    }
    if (!integer)
      for (auto& t : get_strings(g, "targets", where.c_str())) c.targets.push_back(std::move(t));
    first = false;
  }
  c.ignore = get_strings(q, "ignore", "");
}

template <class J>
HfQuantConfig parse_impl(const J& q) {
  if (!q.is_object()) throw UsageError(fmt::format("quantization_config: expected an object, got {}", q.dump()));
  const std::string method = get_string(q, "quant_method", "", "");
  HfQuantConfig c;
  if (method == "awq")
    parse_awq(q, c);
  else if (method == "gptq")
    parse_gptq(q, c);
  else if (method == "compressed-tensors")
    parse_compressed_tensors(q, c);
  else
    throw UsageError(
        fmt::format("quantization_config.quant_method: '{}' checkpoints cannot be loaded (supported: awq GEMM 4-bit, "
                    "gptq 4/8-bit, compressed-tensors FP8 and pack-quantized INT4/INT8)",
                    method));
  return c;
}

// compressed-tensors / vLLM name matching: "re:<regex>" is re.match, anything else is equality.
bool name_matches(const std::string& target, const std::string& name) {
  if (target.rfind("re:", 0) == 0) return regex_match_prefix(target.substr(3), name);
  return target == name;
}

bool is_lm_head(const std::string& name) { return name == "lm_head" || name.ends_with(".lm_head"); }

}  // namespace

json awq_quantization_config(const AwqConfigOptions& o) {
  check_group(o.group_size, "AWQ config");
  return {{"quant_method", "awq"},
          {"bits", 4},
          {"group_size", o.group_size},
          {"zero_point", true},
          {"version", "gemm"},
          {"modules_to_not_convert", o.modules_to_not_convert.empty() ? json(nullptr) : json(o.modules_to_not_convert)}};
}

std::string gptq_dynamic_pattern(const std::string& module) {
  static const std::pair<const char*, const char*> kFused[] = {
      {"q_proj", "qkv_proj"}, {"k_proj", "qkv_proj"}, {"v_proj", "qkv_proj"}, {"gate_proj", "gate_up_proj"}, {"up_proj", "gate_up_proj"}};
  auto escape = [](const std::string& s) {
    std::string out;
    for (char ch : s) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') out += '\\';
      out += ch;
    }
    return out;
  };
  const std::size_t dot = module.rfind('.');
  const std::string last = dot == std::string::npos ? module : module.substr(dot + 1);
  for (const auto& [part, fused] : kFused)
    if (last == part) return escape(module.substr(0, dot + 1)) + "(?:" + part + "|" + fused + ")$";
  return escape(module) + "$";
}

json gptq_quantization_config(const GptqConfigOptions& o) {
  check_bits(o.bits, "GPTQ config");
  check_group(o.group_size, "GPTQ config");
  json j = {{"quant_method", "gptq"},
            {"bits", o.bits},
            {"group_size", o.group_size},
            {"damp_percent", o.damp_percent},
            {"desc_act", o.desc_act},
            {"static_groups", o.static_groups},
            {"sym", o.sym},
            {"true_sequential", o.true_sequential},
            {"lm_head", o.lm_head},
            {"checkpoint_format", o.v2 ? "gptq_v2" : "gptq"}};
  if (!o.dynamic.empty()) {
    json d = json::object();
    for (const auto& r : o.dynamic) {
      regex_match_prefix(r.pattern, "");
      d[(r.skip ? "-:" : "+:") + r.pattern] = r.skip ? json::object() : r.overrides;
    }
    j["dynamic"] = std::move(d);
  }
  return j;
}

json gptq_quantize_config_file(const GptqConfigOptions& o) {
  json j = gptq_quantization_config(o);
  j["meta"] = {{"quantizer", {"model-optimizer:" + build_info().version}}};
  return j;
}

json fp8_quantization_config(const Fp8ConfigOptions& o) {
  const bool dyn = o.activations == Fp8Activations::dynamic_per_token;
  json group = {{"targets", {"Linear"}},
                {"weights", fp8_args(o.per_channel ? "channel" : "tensor", false, "minmax")},
                {"input_activations", dyn ? fp8_args("token", true, nullptr) : json(nullptr)},
                {"output_activations", nullptr}};
  return compressed_tensors_config("float-quantized", o.ignore, {{"group_0", std::move(group)}});
}

// No per-group "format" key: older compressed-tensors schemes lack it, and loaders fall back to the top level.
json ct_pack_quantized_config(const CtPackedConfigOptions& o) {
  json groups = json::object();
  for (std::size_t i = 0; i < o.groups.size(); ++i) {
    const CtIntGroup& g = o.groups[i];
    check_bits(g.bits, "compressed-tensors config");
    check_group(g.group_size, "compressed-tensors config");
    if (g.targets.empty()) throw Error(fmt::format("compressed-tensors config: group {} has no targets", i));
    const bool channel = g.group_size == -1;
    groups[fmt::format("group_{}", i)] = {{"targets", g.targets},
                                          {"weights", quant_args(g.bits, "int", g.sym, channel ? json(nullptr) : json(g.group_size),
                                                                 channel ? "channel" : "group", false, "minmax")},
                                          {"input_activations", nullptr},
                                          {"output_activations", nullptr}};
  }
  return compressed_tensors_config("pack-quantized", o.ignore, std::move(groups));
}

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::awq: return "awq";
    case QuantMethod::gptq: return "gptq";
    case QuantMethod::fp8: return "fp8";
    case QuantMethod::ct_int: return "compressed-tensors";
  }
  return "?";
}

ModuleQuant HfQuantConfig::module(const std::string& name) const {
  ModuleQuant m{true, bits, group_size, sym, desc_act};
  const ModuleQuant plain{};
  switch (method) {
    case QuantMethod::awq:
      // vLLM's AWQ quantizes LinearBase layers only; the LM head is never one.
      if (is_lm_head(name)) return plain;
      for (const auto& s : modules_to_not_convert)
        if (name.find(s) != std::string::npos) return plain;
      return m;
    case QuantMethod::gptq: {
      if (is_lm_head(name) && !lm_head) return plain;
      if (!is_lm_head(name) && !modules_to_quantize.empty() &&
          std::none_of(modules_to_quantize.begin(), modules_to_quantize.end(),
                       [&](const std::string& s) { return name.find(s) != std::string::npos; }))
        return plain;
      for (const auto& r : dynamic) {
        if (!regex_match_prefix(r.pattern, name)) continue;
        if (r.skip) return plain;
        m.bits = r.overrides.value("bits", m.bits);
        m.group_size = r.overrides.value("group_size", m.group_size);
        m.desc_act = r.overrides.value("desc_act", m.desc_act);
        m.sym = r.overrides.value("sym", m.sym);
        break;
      }
      return m;
    }
    case QuantMethod::fp8:
      for (const auto& t : ignore)
        if (name_matches(t, name)) return plain;
      for (const auto& t : targets)
        if ((t == "Linear" && !is_lm_head(name)) || name_matches(t, name)) return m;
      return plain;
    case QuantMethod::ct_int:
      for (const auto& t : ignore)
        if (name_matches(t, name)) return plain;
      for (const auto& g : ct_groups)
        for (const auto& t : g.targets)
          if ((t == "Linear" && !is_lm_head(name)) || name_matches(t, name)) return g.scheme;
      return plain;
  }
  return plain;
}

std::string HfQuantConfig::describe() const {
  const std::string g = group_size == -1 ? "per-channel" : group_size == 0 ? "per-tensor" : fmt::format("g{}", group_size);
  switch (method) {
    case QuantMethod::awq: return fmt::format("awq {}-bit {} {}", bits, g, version);
    case QuantMethod::gptq:
      return fmt::format("gptq {}-bit {} {} {}{}{}", bits, g, sym ? "sym" : "asym", gptq_v2 ? "v2" : "v1", desc_act ? " desc_act" : "",
                         dynamic.empty() ? "" : fmt::format(" ({} dynamic rules)", dynamic.size()));
    case QuantMethod::fp8: return fmt::format("fp8 e4m3 {}{}", g, fp8_dynamic_activations ? " (dynamic per-token activations)" : "");
    case QuantMethod::ct_int: {
      std::string parts;
      for (const auto& cg : ct_groups)
        parts += fmt::format("{}int{} {} {}", parts.empty() ? "" : ", ", cg.scheme.bits,
                             cg.scheme.group_size == -1 ? std::string("per-channel") : fmt::format("g{}", cg.scheme.group_size),
                             cg.scheme.sym ? "sym" : "asym");
      return fmt::format("compressed-tensors pack-quantized ({})", parts);
    }
  }
  return "?";
}

HfQuantConfig parse_quantization_config(const nlohmann::ordered_json& q) {
  return reading_json("quantization_config", [&] { return parse_impl(q); });
}
HfQuantConfig parse_quantization_config(const nlohmann::json& q) {
  return reading_json("quantization_config", [&] { return parse_impl(q); });
}

bool regex_match_prefix(const std::string& pattern, const std::string& text) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    throw UsageError(fmt::format("quantization regex '{}': {} at offset {}", pattern, reinterpret_cast<const char*>(buf), offset));
  }
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, PCRE2_ANCHORED, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  return rc >= 0;
}

}  // namespace mo::formats
