#include "output_files.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <tuple>

#include "mo/convert/convert.h"
#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/io/gguf.h"
#include "mo/io/json_file.h"
#include "mo/formats/hf_quant_config.h"
#include "mo/tokenizer/tokenizer_export.h"
#include "mo/io/output_path.h"

namespace mo::quant {
namespace {

namespace fs = std::filesystem;

// FNV-1a over config.json and, per weight file, its name, size and first MiB: identifies the source
// without reading tens of gigabytes.
std::string source_fingerprint(const SourceModel& src) {
  if (src.dummy()) return "dummy";
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  };
  std::vector<fs::path> files;
  const fs::path in(src.path());
  if (fs::is_directory(in)) {
    for (const auto& e : fs::directory_iterator(in))
      if (e.path().filename() == "config.json" || e.path().extension() == ".safetensors") files.push_back(e.path());
  } else {
    files.push_back(in);
  }
  std::sort(files.begin(), files.end());
  std::vector<char> buf(1 << 20);
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    const std::uint64_t size = fs::file_size(f);
    mix(name.data(), name.size());
    mix(&size, sizeof size);
    std::ifstream is(f, std::ios::binary);
    is.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    mix(buf.data(), static_cast<std::size_t>(is.gcount()));
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

std::string utc_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string base_name(const std::string& path) {
  std::string b = fs::path(path).filename().string();
  if (b.empty()) b = fs::path(path).parent_path().filename().string();
  if (b.ends_with(".gguf")) b.resize(b.size() - 5);
  for (const char* suffix : {"-F16", "-f16", "-fp16", "-FP16", "-BF16", "-bf16", "-F32", "-f32"})
    if (b.ends_with(suffix)) b.resize(b.size() - std::string(suffix).size());
  return b;
}

// "<model>-awq-int4-g128-v1", the version the first that no sibling of the output already uses.
std::string name_suggestion(const std::string& source, const std::string& output, const PipelineSettings& s) {
  std::string stem = base_name(source) + "-" + method_name(s.method);
  if (s.method == Method::fp8)
    stem += s.fp8_per_channel ? "-channel" : "-tensor";
  else
    stem +=
        fmt::format("-int{}-{}", s.bits, s.group_size == formats::kGroupPerChannel ? std::string("pc") : fmt::format("g{}", s.group_size));
  const fs::path parent = fs::absolute(output).parent_path();
  int v = 1;
  std::error_code ec;
  while (fs::exists(parent / fmt::format("{}-v{}", stem, v), ec)) ++v;
  return fmt::format("{}-v{}", stem, v);
}

void copy_tokenizer(const SourceModel& src, const fs::path& dir, std::vector<std::string>& notes) {
  if (src.dummy()) {
    notes.push_back("--load-format dummy: no tokenizer files");
    return;
  }
  if (src.gguf()) {
    const gguf::File& g = *src.files()->gguf();
    if (g.find("tokenizer.ggml.model")) tok::write_hf_tokenizer_files(tok::hf_tokenizer_from_gguf(g), dir.string());
    io::write_json((dir / "generation_config.json").string(), convert::hf_generation_config_json(src.hp()));
    return;
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json", "tokenizer.model",
                        "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json"}) {
    const fs::path from = fs::path(src.path()) / f;
    if (fs::exists(from)) fs::copy_file(from, dir / f);
  }
}

nlohmann::json hf_config(const SourceModel& src) {
  if (src.files() && !src.gguf()) return src.files()->hf_config();
  return convert::hf_config_json(src.hp(), "float16");
}

// vLLM runs q/k/v as one fused qkv_proj and gate/up as gate_up_proj; name those too.
std::string fused_name(const std::string& module) {
  for (const char* part : {"q_proj", "k_proj", "v_proj"})
    if (module.ends_with(part)) return module.substr(0, module.size() - 6) + "qkv_proj";
  for (const char* part : {"gate_proj", "up_proj"})
    if (module.ends_with(part)) return module.substr(0, module.size() - std::string(part).size()) + "gate_up_proj";
  return "";
}

formats::GptqConfigOptions gptq_options(const PipelineSettings& s, const std::vector<LinearDecision>& decisions) {
  formats::GptqConfigOptions o;
  o.bits = s.bits;
  o.group_size = s.group_size;
  o.damp_percent = s.gptq.damp_percent;
  o.desc_act = s.method == Method::gptq && s.gptq.desc_act;
  o.static_groups = o.desc_act;  // act-order always with static groups: g_idx stays i / G
  o.sym = s.sym;
  o.v2 = !s.sym;             // v1 stores zero-1, which a zero of 0 cannot be
  o.true_sequential = true;  // layer_quantizer takes each GPTQ stage's Hessian after the earlier stages are quantized
  for (const auto& d : decisions) {
    if (d.module == "lm_head" || d.format == d.requested) continue;
    formats::GptqDynamicRule r;
    r.pattern = formats::gptq_dynamic_pattern(d.module);
    if (d.format == "f16") {
      r.skip = true;
    } else {
      r.overrides = {{"bits", d.bits}, {"group_size", d.group_size}, {"sym", d.sym}};
    }
    o.dynamic.push_back(std::move(r));
  }
  return o;
}

nlohmann::json quantization_config(const PipelineSettings& s, const std::vector<LinearDecision>& decisions) {
  std::vector<std::string> unquantized;
  for (const auto& d : decisions) {
    if (d.format != "f16") continue;
    unquantized.push_back(d.module);
    const std::string f = fused_name(d.module);
    if (!f.empty() && std::find(unquantized.begin(), unquantized.end(), f) == unquantized.end()) unquantized.push_back(f);
  }
  if (s.layout == OutputLayout::awq_gemm) {
    formats::AwqConfigOptions o;
    o.group_size = s.group_size;
    for (const auto& m : unquantized)
      if (m != "lm_head") o.modules_to_not_convert.push_back(m);
    return formats::awq_quantization_config(o);
  }
  // compressed-tensors names the unfused modules; vLLM checks a fused layer's parts.
  std::vector<std::string> ignore = {"lm_head"};
  for (const auto& m : unquantized)
    if (m != "lm_head" && !m.ends_with("qkv_proj") && !m.ends_with("gate_up_proj")) ignore.push_back(m);
  if (s.layout == OutputLayout::fp8) {
    formats::Fp8ConfigOptions o;
    o.per_channel = s.fp8_per_channel;
    o.activations = formats::Fp8Activations::none;  // weight-only, as our engine runs and evaluates it
    o.ignore = std::move(ignore);
    return formats::fp8_quantization_config(o);
  }
  if (s.layout == OutputLayout::ct_packed) {
    // One config group per precision, in order of first appearance; fused parts share a format, so a
    // fused layer's parts always land in one group.
    formats::CtPackedConfigOptions o;
    o.ignore = std::move(ignore);
    for (const auto& d : decisions) {
      if (d.module == "lm_head" || d.bits >= 16) continue;
      auto it = std::find_if(o.groups.begin(), o.groups.end(), [&](const formats::CtIntGroup& g) {
        return g.bits == d.bits && g.group_size == d.group_size && g.sym == d.sym;
      });
      if (it == o.groups.end()) it = o.groups.insert(o.groups.end(), formats::CtIntGroup{d.bits, d.group_size, d.sym, {}});
      it->targets.push_back(d.module);
    }
    return formats::ct_pack_quantized_config(o);
  }
  return formats::gptq_quantization_config(gptq_options(s, decisions));
}

// What the manifest and the summary call the layout, and who reads it (the loaders' own per-module
// matching decides: Transformers' GPTQ loader applies one bits/group_size to every module).
std::pair<std::string, std::string> layout_and_loaders(const PipelineSettings& s, const std::vector<LinearDecision>& decisions) {
  const std::string ours = "model-optimizer";
  switch (s.layout) {
    case OutputLayout::awq_gemm: return {"awq-gemm", "vLLM, Transformers (AWQ), " + ours};
    case OutputLayout::fp8: return {"compressed-tensors-fp8", "vLLM, Transformers (compressed-tensors), " + ours};
    case OutputLayout::ct_packed: return {"compressed-tensors-pack-quantized", "vLLM, Transformers (compressed-tensors), " + ours};
    case OutputLayout::gptq: break;
  }
  const std::string name = s.sym ? "gptq-v1" : "gptq-v2";
  if (mixed_precision(decisions))
    return {name, "vLLM, GPTQModel, " + ours +
                      "; not Transformers (its GPTQ loader ignores the per-module `dynamic` rules: "
                      "checkpoint_format auto or compressed-tensors writes a layout it reads)"};
  return {name, "vLLM, Transformers (GPTQ), " + ours};
}

}  // namespace

bool mixed_precision(const std::vector<LinearDecision>& decisions) {
  return std::any_of(decisions.begin(), decisions.end(),
                     [](const LinearDecision& d) { return d.module != "lm_head" && d.format != d.requested; });
}

std::string quantization_summary(const QuantizeReport& rep) {
  std::map<std::string, int> counts;
  std::string head;
  for (const auto& d : rep.decisions) {
    if (d.module == "lm_head")
      head = "; lm_head " + d.format;
    else
      counts[d.format] += 1;
  }
  std::string parts;
  for (const auto& [f, n] : counts) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", n, f);
  std::string calib;
  if (rep.calibration_used_samples > 0 && rep.calibration_used_samples < rep.calibration_samples)
    calib = fmt::format("; calibrated on {} of {} samples ({} of {} tokens)", rep.calibration_used_samples, rep.calibration_samples,
                        rep.calibration_used_tokens, rep.calibration_tokens);
  else if (rep.calibration_samples > 0)
    calib = fmt::format("; calibrated on {} samples ({} tokens)", rep.calibration_samples, rep.calibration_tokens);
  return fmt::format("{}: linears {}{}{}", rep.method, parts, head, calib);
}

void write_output_files(const std::string& dir_s, const SourceModel& src, const QuantizeOptions& cfg, const PipelineSettings& s,
                        QuantizeReport& rep) {
  const fs::path dir(dir_s);
  nlohmann::json config = hf_config(src);
  config["torch_dtype"] = "float16";
  config["quantization_config"] = quantization_config(s, rep.decisions);
  io::write_json((dir / "config.json").string(), config);
  if (s.layout == OutputLayout::gptq)
    io::write_json((dir / "quantize_config.json").string(), formats::gptq_quantize_config_file(gptq_options(s, rep.decisions)));
  copy_tokenizer(src, dir, rep.notes);

  rep.summary = quantization_summary(rep);
  std::tie(rep.layout, rep.loaders) = layout_and_loaders(s, rep.decisions);
  rep.name_suggestion = name_suggestion(src.path(), cfg.output_path, s);
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& d : rep.decisions) {
    nlohmann::json l = {{"format", d.format}};
    if (!d.reason.empty()) l["reason"] = d.reason;
    layers[d.module] = l;
  }
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  nlohmann::json manifest = {
      {"tool", "model-optimizer"},
      {"version", build_info().version},
      {"command", "quantize"},
      {"created", utc_time(now)},
      {"source", src.dummy() ? cfg.model_path + " (dummy weights)" : fs::absolute(src.path()).string()},
      {"source_fingerprint", source_fingerprint(src)},
      {"method", method_name(s.method)},
      {"format", rep.layout},
      {"loads_in", rep.loaders},
      {"bits", s.method == Method::fp8 ? 8 : s.bits},
      {"group_size", s.group_size},
      {"sym", s.method == Method::awq ? false : s.sym},
      {"sensitivity_threshold", s.sensitivity_check ? s.threshold : 0.0},  // 0: no check
      {"fallback_bits", s.fallback_bits},
      {"skip_layers", cfg.skip_layers},
      {"calibration",
       {{"source", cfg.calibration_data},
        {"description", rep.calibration},
        {"samples", rep.calibration_samples},
        {"tokens", rep.calibration_tokens},
        {"samples_used", rep.calibration_used_samples},
        {"tokens_used", rep.calibration_used_tokens},
        {"seq_len", cfg.max_seq_len}}},
      {"summary", rep.summary},
      {"name_suggestion", rep.name_suggestion},
      {"seconds", rep.seconds},
      {"layers", layers},
  };
  io::write_json((dir / io::kMarkerFile).string(), manifest);

  std::ofstream log(dir / "decisions.jsonl");
  for (const auto& d : rep.decisions) {
    nlohmann::json j = {{"module", d.module}, {"layer", d.layer}, {"requested", d.requested}, {"format", d.format}, {"bytes", d.bytes}};
    if (!d.reason.empty()) j["reason"] = d.reason;
    if (!std::isnan(d.cosine)) j["cosine"] = d.cosine;
    if (!std::isnan(d.cosine_requested)) j["cosine_requested"] = d.cosine_requested;
    if (!std::isnan(d.rel_l2)) j["rel_l2"] = d.rel_l2;
    j["weight_stats"] = {{"variance", d.stats.variance},
                         {"kurtosis", d.stats.kurtosis},
                         {"max_mean_ratio", d.stats.max_mean_ratio},
                         {"outlier_fraction", d.stats.outlier_fraction}};
    log << j.dump() << "\n";
  }
  if (!log) throw Error(fmt::format("{}: cannot write", (dir / "decisions.jsonl").string()));
}

}  // namespace mo::quant
