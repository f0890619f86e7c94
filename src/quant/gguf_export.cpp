#include "gguf_export.h"

#include "calibration_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "mo/convert/gguf_metadata.h"
#include "mo/io/output_file.h"
#include "mo/io/output_path.h"
#include "mo/convert/tensor_convert.h"
#include "mo/formats/gguf_file_types.h"
#include "mo/model/gguf_tensor_type.h"
#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/mapped_file.h"
#include "mo/core/memory.h"
#include "mo/core/progress.h"
#include "mo/core/thread_pool.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_writer.h"
#include "mo/model/rope.h"
#include "mo/model/tensor_names.h"
#include "mo/quant/calibration.h"
#include "mo/quant/gguf_quantize.h"
#include "mo/quant/imatrix.h"
#include "mo/quant/layer_select.h"
#include "source_model.h"

namespace mo::quant {
namespace {

namespace fs = std::filesystem;
using gguf::Value;
using model::Role;

std::string type_name(std::uint32_t type) {
  const auto* info = ggml_type_info(type);
  return info ? info->name : fmt::format("type{}", type);
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The HF module a GGUF tensor stands for ("blk.3.attn_v.weight" -> "model.layers.3.self_attn.v_proj"),
// the names skip_layers and the decision log use.
std::string hf_module(const std::string& gguf_name) {
  std::string hf = model::gguf_to_hf_name(gguf_name).value_or(gguf_name);
  if (hf.size() > 7 && hf.compare(hf.size() - 7, 7, ".weight") == 0) hf.resize(hf.size() - 7);
  return hf;
}

// Removes a file when the export ends, finished or not.
struct ScratchFile {
  std::string path;
  ~ScratchFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

struct Planned {
  const model::StoredTensor* src;
  std::uint32_t type;
  LinearDecision decision;
  bool has_decision = false;
};

// Why `t` is not stored as the file type's base type: a mixing rule, a row-length fallback, or both.
std::string type_reason(const std::string& format, const model::WeightTensor& t, const model::Hparams& hp, bool imatrix, std::uint32_t base,
                        std::uint32_t chosen) {
  if (chosen == base) return "";
  model::WeightTensor whole = t;
  whole.cols = 256 * 32;  // any row length the block types divide: the rule without its fallback
  const std::uint32_t mixed = model::gguf_tensor_type(format, whole, hp, imatrix);
  std::string why;
  if (mixed != base) {
    why = t.role == Role::output || t.role == Role::token_embd
              ? fmt::format("llama.cpp stores the output matrix as {}", type_name(mixed))
              : fmt::format("llama.cpp's {} mix raises {} in layer {} to {}", format, model::role_name(t.role), t.layer, type_name(mixed));
  }
  if (chosen != mixed) {
    const auto* info = ggml_type_info(mixed);
    std::string fb = fmt::format("row length {} not divisible by {} ({}): falls back to {}", t.cols, info->block_size, type_name(mixed),
                                 type_name(chosen));
    why = why.empty() ? fb : why + "; " + fb;
  }
  return why;
}

std::vector<float> decode_f32(const model::StoredTensor& t, const model::Hparams& hp) {
  std::vector<std::uint8_t> bytes = convert::to_float_type(t, ggml_id(GgmlType::F32));
  if (t.hf_qk_order) {
    // Q/K rows go from HF's rotate-half order to GGUF's interleaved pairs (formats.md).
    std::vector<std::uint8_t> permuted(bytes.size());
    const std::int64_t rows = t.ne.size() == 1 ? static_cast<std::int64_t>(t.ne[0]) : static_cast<std::int64_t>(t.ne[1]);
    const std::int64_t heads = t.name.find("attn_q") != std::string::npos ? hp.num_heads : hp.num_kv_heads;
    model::permute_qk_hf_to_gguf(bytes.data(), permuted.data(), rows, bytes.size() / rows, heads);
    bytes.swap(permuted);
  }
  std::vector<float> f(bytes.size() / sizeof(float));
  std::memcpy(f.data(), bytes.data(), f.size() * sizeof(float));
  return f;
}

std::vector<std::uint8_t> quantize_tensor(const std::vector<float>& f, std::uint64_t cols, std::uint32_t type,
                                          const std::vector<float>& imp) {
  const std::int64_t rows = static_cast<std::int64_t>(f.size() / cols);
  const std::size_t row_bytes = ggml_row_bytes(type, cols);
  std::vector<std::uint8_t> out(row_bytes * static_cast<std::size_t>(rows));
  const float* importance = imp.empty() ? nullptr : imp.data();
  default_pool()->parallel_for(0, rows, [&](std::int64_t b, std::int64_t e, int) {
    for (std::int64_t r = b; r < e; ++r)
      gguf_quantize_row(type, f.data() + r * cols, out.data() + r * row_bytes, static_cast<std::int64_t>(cols), importance);
  });
  return out;
}

struct ImatrixChoice {
  Imatrix m;
  bool used = false;
  std::string description;  // for the log, the report and model-optimizer.imatrix
  std::string file;         // the file it was read from
};

ImatrixChoice choose_imatrix(const QuantizeOptions& cfg, SourceModel& src, bool useful, QuantizeReport& rep) {
  ImatrixChoice c;
  if (cfg.imatrix == ImatrixSource::none) {
    c.description = "none";
    return c;
  }
  if (!useful) {
    c.description = "none";
    rep.notes.push_back(fmt::format("imatrix: not used, {} does not weight its rounding by importance", cfg.gguf_type));
    return c;
  }
  if (cfg.imatrix == ImatrixSource::file) {
    c.m = read_imatrix(cfg.imatrix_file);
    c.used = true;
    c.file = cfg.imatrix_file;
    c.description = fmt::format("{} ({} entries, {} chunks{})", cfg.imatrix_file, c.m.entries.size(), c.m.chunk_count,
                                c.m.datasets.empty() ? "" : ", dataset " + c.m.datasets[0]);
    return c;
  }
  CalibrationSet set = load_run_calibration(cfg, src, rep, " (pass --imatrix none or FILE)");
  rep.calibration_samples = static_cast<std::int64_t>(set.samples.size());
  rep.calibration_tokens = set.tokens;
  log::info("imatrix: computing from {} ({} samples, {} tokens)", set.description, rep.calibration_samples, rep.calibration_tokens);
  Progress clock("imatrix", 1, "step");
  c.m = collect_imatrix(src.engine(), set.samples, set.source);
  c.used = true;
  c.description = fmt::format("computed from {} ({} samples, {} tokens)", set.source, rep.calibration_samples, rep.calibration_tokens);
  log::info("imatrix: {} entries in {:.1f} s", c.m.entries.size(), clock.elapsed_seconds());
  return c;
}

void write_decisions(const std::string& path, const std::vector<Planned>& plan) {
  std::ofstream out(path);
  for (const auto& p : plan) {
    if (!p.has_decision) continue;
    const LinearDecision& d = p.decision;
    nlohmann::json j = {{"module", d.module}, {"tensor", p.src->name}, {"layer", d.layer}, {"requested", d.requested},
                        {"format", d.format}, {"reason", d.reason},    {"bytes", d.bytes}};
    out << j.dump() << "\n";
  }
  if (!out) throw Error(fmt::format("{}: cannot write the decision log", path));
}

}  // namespace

QuantizeReport quantize_gguf(const QuantizeOptions& cfg) {
  Progress clock("quantize", 1, "step");
  if (cfg.model_path.empty()) throw UsageError("model_path: missing; expected an HF model directory or a .gguf file");
  if (cfg.output_path.empty()) throw UsageError("output_path: missing; expected a new .gguf file");
  if (fs::path(cfg.output_path).extension() != ".gguf")
    throw UsageError(fmt::format("output_path: '{}' must end in .gguf for quant_method gguf", cfg.output_path));
  if (cfg.dummy_weights) throw UsageError("load_format: dummy is not supported with quant_method gguf; quantize a real model");
  const auto& types = formats::gguf_file_type_names();
  if (std::find(types.begin(), types.end(), cfg.gguf_type) == types.end())
    throw UsageError(fmt::format("gguf_type: '{}' is not one of {}", cfg.gguf_type, fmt::join(types, ", ")));
  io::check_output_path(cfg.model_path, cfg.output_path, cfg.force);
  // The side files too, before any work: a run never ends by refusing to write them.
  io::check_new_output(cfg.output_path + ".decisions.jsonl", cfg.force, "output_path");
  if (cfg.imatrix == ImatrixSource::automatic) io::check_new_output(cfg.output_path + ".imatrix.gguf", cfg.force, "output_path");
  const LayerSelector skip(cfg.skip_layers);

  QuantizeReport rep;
  rep.input = cfg.model_path;
  rep.output = cfg.output_path;
  rep.method = fmt::format("GGUF {}", upper(cfg.gguf_type));
  rep.name_suggestion = fmt::format("{}-{}.gguf", fs::path(cfg.model_path).stem().string(), upper(cfg.gguf_type));

  SourceModel src(cfg.model_path, false, default_pool(), ops::Batching::invariant);
  const model::ModelFiles& files = *src.files();
  const model::Hparams& hp = src.hp();
  skip.check_layer_count(hp.num_layers, cfg.model_path);
  if (hp.num_experts > 0) throw UsageError(fmt::format("{}: GGUF quantization of MoE models is not supported yet", cfg.model_path));
  rep.input_bytes = files.total_bytes();
  if (files.gguf()) {
    for (const auto& t : files.tensors())
      if (t.ggml_type && *t.ggml_type != ggml_id(GgmlType::F32) && *t.ggml_type != ggml_id(GgmlType::F16) &&
          *t.ggml_type != ggml_id(GgmlType::BF16)) {
        rep.notes.push_back(fmt::format("{} is already quantized ({}): requantizing loses more accuracy than quantizing the 16-bit model",
                                        cfg.model_path, t.dtype));
        break;
      }
  }
  log::info("quantize: {} ({} layers, hidden {}, ffn {}) -> {} as {}", cfg.model_path, hp.num_layers, hp.hidden_size, hp.intermediate_size,
            cfg.output_path, rep.method);

  // The file type's own matrix type (what a 256-wide attn_q gets): what every decision is measured against.
  const std::uint32_t base =
      model::gguf_tensor_type(cfg.gguf_type, model::WeightTensor{"blk.0.attn_q.weight", Role::attn_q, 0, 256, 256, {}}, hp);
  const bool block_type = base != ggml_id(GgmlType::F16) && base != ggml_id(GgmlType::BF16);
  // Q8_0's rounding is plain nearest, with or without importance (as in llama.cpp).
  ImatrixChoice im = choose_imatrix(cfg, src, block_type && base != ggml_id(GgmlType::Q8_0), rep);

  // The plan: every tensor's type before any work, so a bad tensor fails fast.
  std::map<std::string, const model::WeightTensor*> shape_of;
  for (const auto& wt : files.shape().tensors) shape_of[wt.name] = &wt;
  std::vector<Planned> plan;
  for (const auto& t : files.tensors()) {
    if (!files.gguf() && t.name == t.file_name && !model::gguf_to_hf_name(t.name)) {
      rep.notes.push_back(fmt::format("{}: no GGUF counterpart, not written", t.file_name));
      continue;
    }
    Planned p{&t, ggml_id(GgmlType::F32), {}, false};
    auto it = shape_of.find(t.name);
    if (t.ne.size() >= 2 && it != shape_of.end()) {
      const model::WeightTensor& wt = *it->second;
      p.type = model::gguf_tensor_type(cfg.gguf_type, wt, hp, im.used);
      if (p.type != ggml_id(GgmlType::F32)) {
        LinearDecision& d = p.decision;
        p.has_decision = true;
        d.module = hf_module(t.name);
        d.layer = wt.layer;
        d.requested = type_name(base);
        d.reason = type_reason(cfg.gguf_type, wt, hp, im.used, base, p.type);
        if (auto pat = skip.match(d.module, wt.layer)) {
          p.type = ggml_id(GgmlType::F16);
          d.reason = fmt::format("skip_layers '{}': kept f16", *pat);
        }
        d.format = type_name(p.type);
        const auto* info = ggml_type_info(p.type);
        d.bits = static_cast<int>(std::lround(8.0 * info->type_size / info->block_size));
        d.bytes = ggml_row_bytes(p.type, wt.cols) * wt.rows;
      }
    }
    plan.push_back(std::move(p));
  }
  for (const auto& w : skip.unused_warnings()) {
    rep.notes.push_back(w);
    log::warn("{}", w);
  }

  // Written in a temporary directory and moved into place at the end (never over what appeared meanwhile).
  io::StagedOutput staged(cfg.output_path, cfg.model_path, cfg.force);
  gguf::Writer w(staged.temp_path());
  w.set("general.architecture", Value::str(convert::gguf_arch_name(hp)));
  w.set("general.name", Value::str(files.shape().name));
  convert::set_model_keys(w, files, rep.notes);
  w.set("general.file_type", Value::u32(formats::gguf_file_type_id(cfg.gguf_type)));
  if (block_type) w.set("general.quantization_version", Value::u32(2));
  if (im.used) {
    // The keys llama-quantize writes, so tools that read them see where the importance came from.
    w.set("quantize.imatrix.file", Value::str(im.file.empty() ? "(computed by model-optimizer)" : im.file));
    if (!im.m.datasets.empty()) w.set("quantize.imatrix.dataset", Value::str(im.m.datasets[0]));
    w.set("quantize.imatrix.entries_count", Value::i32(static_cast<std::int32_t>(im.m.entries.size())));
    w.set("quantize.imatrix.chunks_count", Value::i32(static_cast<std::int32_t>(im.m.chunk_count)));
  }
  w.set(io::kMarkerKey, Value::str(fs::absolute(cfg.model_path).string()));
  w.set("model-optimizer.version", Value::str(build_info().version));
  w.set("model-optimizer.method", Value::str("gguf"));
  w.set("model-optimizer.gguf_type", Value::str(cfg.gguf_type));
  w.set("model-optimizer.calibration", Value::str(im.used && cfg.imatrix == ImatrixSource::automatic ? rep.calibration : "none"));
  w.set("model-optimizer.imatrix", Value::str(im.description));

  // Quantized bytes go to a scratch file as they are made, so memory holds one tensor at a time.
  ScratchFile scratch{staged.temp_path() + ".data"};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // offset, bytes in the scratch file
  {
    std::ofstream out(scratch.path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot create the scratch file", scratch.path));
    std::uint64_t offset = 0, missing_importance = 0;
    Progress progress("quantize", static_cast<std::int64_t>(plan.size()), "tensor");
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const Planned& p = plan[i];
      const std::uint64_t cols = p.src->ne[0];
      std::vector<float> f = decode_f32(*p.src, hp);
      std::vector<float> imp;
      if (im.used && p.type != ggml_id(GgmlType::F32) && p.type != ggml_id(GgmlType::F16)) {
        imp = im.m.importance(p.src->name);
        if (!imp.empty() && imp.size() != cols)
          throw UsageError(
              fmt::format("imatrix: '{}' has {} columns but the model's tensor has {}; the importance matrix is for another model",
                          p.src->name, imp.size(), cols));
        if (imp.empty() && p.decision.layer >= 0) ++missing_importance;
      }
      std::vector<std::uint8_t> q = quantize_tensor(f, cols, p.type, imp);
      out.write(reinterpret_cast<const char*>(q.data()), static_cast<std::streamsize>(q.size()));
      spans.emplace_back(offset, q.size());
      offset += q.size();
      progress.update(static_cast<std::int64_t>(i + 1));
    }
    progress.finish();
    if (!out.flush()) throw Error(fmt::format("{}: cannot write the scratch file (disk full?)", scratch.path));
    if (missing_importance > 0)
      rep.notes.push_back(fmt::format("imatrix: {} layer tensors had no entry and were quantized without importance", missing_importance));
  }
  std::vector<float> rope_factors;
  if (!files.gguf() && hp.rope_scaling.type == "llama3") rope_factors = model::llama3_rope_factors(hp);
  {
    MappedFile data(scratch.path);
    for (std::size_t i = 0; i < plan.size(); ++i)
      w.add_tensor(plan[i].src->name, plan[i].src->ne, plan[i].type,
                   std::span<const std::uint8_t>(data.data() + spans[i].first, spans[i].second));
    if (!rope_factors.empty())
      w.add_tensor("rope_freqs.weight", {rope_factors.size()}, ggml_id(GgmlType::F32),
                   std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(rope_factors.data()), rope_factors.size() * 4));
    w.write();
  }

  std::map<std::string, std::uint64_t> by_type;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    rep.output_bytes += spans[i].second;
    if (plan[i].has_decision) {
      ++by_type[plan[i].decision.format];
      if (!plan[i].decision.reason.empty()) log::info("{}", plan[i].decision.line());
      rep.decisions.push_back(plan[i].decision);
    }
  }
  std::vector<std::string> counts;
  for (const auto& [type, n] : by_type) counts.push_back(fmt::format("{} {}", n, type));
  rep.summary = fmt::format("{}: {} matrices ({}); imatrix: {}", rep.method, rep.decisions.size(), fmt::join(counts, ", "), im.description);
  write_decisions(staged.temp_path() + ".decisions.jsonl", plan);
  const bool imatrix_file = im.used && im.file.empty();
  // Kept so the same importance can be reused here or by llama-quantize --imatrix.
  if (imatrix_file) write_imatrix(im.m, staged.temp_path() + ".imatrix.gguf");
  staged.commit();
  staged.commit_side_file(".decisions.jsonl");
  if (imatrix_file) {
    staged.commit_side_file(".imatrix.gguf");
    rep.notes.push_back(fmt::format("imatrix written to {}.imatrix.gguf (llama.cpp's format)", cfg.output_path));
  }
  rep.seconds = clock.elapsed_seconds();
  rep.peak_rss = peak_rss_bytes();
  return rep;
}

}  // namespace mo::quant
