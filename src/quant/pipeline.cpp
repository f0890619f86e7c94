#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "gguf_export.h"
#include "layer_quantizer.h"
#include "model_writer.h"
#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/core/log.h"
#include "mo/core/memory.h"
#include "mo/core/progress.h"
#include "mo/engine/device_model.h"
#include "mo/engine/ops/linear.h"
#include "calibration_run.h"
#include "ct_rewrite.h"
#include "mo/quant/quantize.h"
#include "output_files.h"
#include "mo/io/output_path.h"

namespace mo::quant {
namespace {

namespace fs = std::filesystem;

PipelineSettings settings_from(const QuantizeOptions& c) {
  PipelineSettings s;
  s.method = c.method;
  s.layout = s.method == Method::awq ? OutputLayout::awq_gemm : s.method == Method::fp8 ? OutputLayout::fp8 : OutputLayout::gptq;
  s.bits = c.bits;
  if (s.method != Method::fp8 && s.bits != 4 && s.bits != 8)
    throw UsageError(fmt::format("bits: {} is not supported; expected 4 or 8", c.bits));
  if (s.method == Method::awq && s.bits != 4)
    throw UsageError("bits: AWQ GEMM checkpoints are 4-bit; use quant_method gptq or rtn for INT8");
  if (c.group_size != formats::kGroupPerChannel && c.group_size != 32 && c.group_size != 64 && c.group_size != 128)
    throw UsageError(fmt::format("group_size: {} is not supported; expected 32, 64, 128 or -1 (per output channel)", c.group_size));
  if (s.method == Method::awq && c.group_size == formats::kGroupPerChannel)
    throw UsageError("group_size: AWQ GEMM needs a group size (32, 64 or 128); -1 (per channel) is for rtn and gptq");
  s.group_size = c.group_size;
  s.sym = c.sym;
  s.fp8_per_channel = c.fp8_scale == Fp8Scale::per_channel;
  s.checkpoint_format = c.checkpoint_format;
  if (s.layout != OutputLayout::gptq && s.checkpoint_format != CheckpointFormat::automatic)
    throw UsageError(fmt::format("checkpoint_format: '{}' applies to quant_method rtn and gptq; {} writes {}",
                                 checkpoint_format_name(s.checkpoint_format), method_name(s.method),
                                 s.method == Method::awq ? "AWQ GEMM" : "compressed-tensors float-quantized"));
  if (c.fallback_bits != 8 && c.fallback_bits != 16)
    throw UsageError(fmt::format("fallback_bits: {} is not supported; expected 8 or 16", c.fallback_bits));
  s.fallback_bits = c.fallback_bits;
  s.sensitivity_check = c.sensitivity_check;
  s.threshold = c.sensitivity_threshold;
  s.gptq.damp_percent = c.damp_percent;
  s.gptq.desc_act = c.desc_act;
  // Group parameters from the error-updated weights (AutoGPTQ's default); up front only with act-order, so g_idx stays i / G.
  s.gptq.static_groups = c.desc_act;
  s.skip = LayerSelector(c.skip_layers);
  return s;
}

// Random token ids for --load-format dummy (no tokenizer): enough to measure time and memory.
std::vector<std::vector<std::int32_t>> random_samples(std::int64_t n, std::int64_t len, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(len));
  for (auto& s : out)
    for (auto& t : s) t = id(rng);
  return out;
}

std::string method_title(const PipelineSettings& s) {
  if (s.method == Method::fp8) return s.fp8_per_channel ? "FP8 E4M3 per-channel" : "FP8 E4M3 per-tensor";
  std::string m = s.method == Method::rtn ? "RTN" : s.method == Method::awq ? "AWQ" : "GPTQ";
  return fmt::format("{} INT{} {}{}", m, s.bits,
                     s.group_size == formats::kGroupPerChannel ? std::string("per-channel") : fmt::format("g{}", s.group_size),
                     s.method == Method::awq ? ""
                     : s.sym                 ? " sym"
                                             : " asym");
}

}  // namespace

const char* method_name(Method m) {
  switch (m) {
    case Method::rtn: return "rtn";
    case Method::awq: return "awq";
    case Method::gptq: return "gptq";
    case Method::fp8: return "fp8";
    case Method::gguf: return "gguf";
  }
  return "?";
}

const char* checkpoint_format_name(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::automatic: return "auto";
    case CheckpointFormat::gptq: return "gptq";
    case CheckpointFormat::compressed_tensors: return "compressed-tensors";
  }
  return "?";
}

std::string LinearDecision::line() const {
  std::string cos = std::isnan(cosine) ? "" : fmt::format(" (cos {:.4f})", cosine);
  if (reason.empty()) return fmt::format("{}: {}{}", module, format, cos);
  return fmt::format("{}: {} - {}{}", module, format, reason, std::isnan(cosine_requested) ? cos : "");
}

QuantizeReport quantize_model(const QuantizeOptions& cfg) {
  if (cfg.method == Method::gguf) return quantize_gguf(cfg);
  Progress clock("quantize", 1, "step");
  if (cfg.model_path.empty()) throw UsageError("model_path: missing; expected an HF model directory or a .gguf file");
  if (cfg.output_path.empty()) throw UsageError("output_path: missing; expected a new directory for the quantized model");
  const bool dummy = cfg.dummy_weights;
  PipelineSettings s = settings_from(cfg);
  io::check_output_path(dummy ? std::string() : cfg.model_path, cfg.output_path, cfg.force);

  QuantizeReport rep;
  rep.input = cfg.model_path;
  rep.output = cfg.output_path;
  rep.method = method_title(s);
  // Whole-dataset passes: BLAS for the F32 layers' calibration batches.
  SourceModel src(cfg.model_path, dummy, default_pool(), ops::Batching::blas);
  const auto& hp = src.hp();
  s.skip.check_layer_count(hp.num_layers, cfg.model_path);
  rep.input_bytes = src.files() ? src.files()->total_bytes() : 0;
  log::info("quantize: {} ({} layers, hidden {}, ffn {}) -> {} as {}", cfg.model_path, hp.num_layers, hp.hidden_size, hp.intermediate_size,
            cfg.output_path, rep.method);

  // Calibration: needed by AWQ and GPTQ, and by the sensitivity check of every method.
  std::vector<std::vector<std::int32_t>> samples;
  if (s.method == Method::awq || s.method == Method::gptq || s.sensitivity_check) {
    if (dummy) {
      samples = random_samples(cfg.num_samples, cfg.max_seq_len, hp.vocab_size, cfg.seed);
      rep.calibration = fmt::format("random token ids ({} x {}; --load-format dummy has no tokenizer)", cfg.num_samples, cfg.max_seq_len);
    } else {
      CalibrationSet set = load_run_calibration(cfg, src, rep);
      if (set.builtin) {
        const std::string advice = fmt::format(
            "calibrated on the built-in '{}' set; pass your own production-like samples with --calibration_data FILE "
            "(accuracy can drop several points when calibration text does not match real inputs)",
            cfg.calibration_data);
        log::info("{}", advice);
        rep.notes.push_back(advice);
      }
      samples = std::move(set.samples);
    }
    std::vector<std::int64_t> lengths;
    for (const auto& smp : samples) lengths.push_back(static_cast<std::int64_t>(smp.size()));
    for (std::int64_t n : lengths) rep.calibration_tokens += n;
    rep.calibration_samples = static_cast<std::int64_t>(samples.size());
    log::info("calibration: {} ({} samples, {} tokens)", rep.calibration, rep.calibration_samples, rep.calibration_tokens);
    std::vector<std::vector<std::int32_t>> used;
    for (std::size_t i : observed_samples(lengths, s)) {
      rep.calibration_used_tokens += lengths[i];
      used.push_back(std::move(samples[i]));
    }
    samples = std::move(used);
    rep.calibration_used_samples = static_cast<std::int64_t>(samples.size());
    if (rep.calibration_used_samples < rep.calibration_samples)
      log::info("calibration: {} reads {} evenly spaced samples of the {} ({} tokens, its budget {}); the others are not run",
                s.method == Method::awq ? "AWQ's search and the sensitivity check" : "the sensitivity check", rep.calibration_used_samples,
                rep.calibration_samples, rep.calibration_used_tokens, s.capture_tokens);
  }

  // The calibration passes and every score (GPTQ's Hessians and solve, AWQ's search, the sensitivity check)
  // run on the device asked for: on a GPU each layer is streamed to a device model in turn; on the CPU the
  // source's engine runs it in place and the CPU backend scores.
  const auto pool = default_pool();
  std::unique_ptr<engine::Backend> device = cfg.device == Device::cuda ? engine::make_cuda_backend(0) : engine::make_cpu_backend(*pool);
  std::unique_ptr<engine::DeviceModel> device_model;
  if (cfg.device == Device::cuda || cfg.device_path_on_cpu)
    device_model = std::make_unique<engine::DeviceModel>(hp, src.weights().rope_style, src.weights().rope_freq_factors, *device);
  s.device = device.get();
  s.device_model = device_model.get();
  if (!samples.empty()) {
    std::string scored = s.method == Method::gptq ? "GPTQ's Hessians and solve" : s.method == Method::awq ? "AWQ's search" : "";
    if (s.sensitivity_check) scored += scored.empty() ? "the sensitivity check" : " and the sensitivity check";
    log::info("quantize: calibration passes on {}{}", device_model ? device->describe() : "the CPU engine",
              scored.empty() ? std::string() : fmt::format("; {} on {}", scored, device->describe()));
  }

  io::StagedOutput staged(cfg.output_path, dummy ? std::string() : cfg.model_path, cfg.force);
  fs::create_directories(staged.temp_path());
  ShardWriter writer(staged.temp_path(), cfg.max_shard_bytes);

  // Hidden states of every calibration token, advanced one layer at a time, in the device's memory.
  std::vector<std::int64_t> starts;
  std::int64_t total = 0;
  for (const auto& smp : samples) {
    starts.push_back(total);
    total += static_cast<std::int64_t>(smp.size());
  }
  engine::DeviceBuffer hidden(*device, static_cast<std::size_t>(total * hp.hidden_size) * sizeof(float));
  {
    std::vector<float> rows;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      rows.resize(samples[i].size() * static_cast<std::size_t>(hp.hidden_size));
      src.engine().embed(samples[i], rows.data());
      device->upload(hidden.as<float>() + starts[i] * hp.hidden_size, rows.data(), rows.size() * sizeof(float));
    }
  }
  samples.clear();
  {
    std::vector<float> embd = src.embedding_rows();
    std::vector<std::uint16_t> h(embd.size());
    for (std::size_t i = 0; i < embd.size(); ++i) h[i] = f32_to_f16(embd[i]);
    writer.add("model.embed_tokens.weight", st::Dtype::F16, {hp.vocab_size, hp.hidden_size}, h);
  }

  Progress progress("quantize", hp.num_layers, "layer");
  progress.update(0);
  for (int layer = 0; layer < hp.num_layers; ++layer) {
    LayerOutcome outcome = quantize_layer(src, layer, hidden.as<float>(), total, starts, s);
    write_layer(writer, src, layer, outcome, s.layout);
    progress.clear();
    if (!outcome.awq_summary.empty()) log::debug("{}", outcome.awq_summary);
    for (auto& d : outcome.decisions) {
      if (!d.reason.empty()) log::info("{}", d.line());
      rep.decisions.push_back(std::move(d));
    }
    progress.update(layer + 1);
  }
  progress.finish();
  for (const auto& w : s.skip.unused_warnings()) {
    rep.notes.push_back(w);
    log::warn("{}", w);
  }
  write_non_layer_tensors(writer, src, rep.decisions);
  writer.finish();
  rep.output_bytes = writer.bytes_written();
  if (s.layout == OutputLayout::gptq && (s.checkpoint_format == CheckpointFormat::compressed_tensors ||
                                         (s.checkpoint_format == CheckpointFormat::automatic && mixed_precision(rep.decisions)))) {
    const CtRewrite ct = rewrite_gptq_as_compressed_tensors(staged.temp_path(), rep.decisions);
    for (auto& d : rep.decisions)
      if (const auto it = ct.bytes_change.find(d.module); it != ct.bytes_change.end())
        d.bytes = static_cast<std::uint64_t>(static_cast<std::int64_t>(d.bytes) + it->second);
    rep.output_bytes = ct.total_bytes;
    s.layout = OutputLayout::ct_packed;
  }
  rep.seconds = clock.elapsed_seconds();
  rep.peak_rss = peak_rss_bytes();
  if (device->device() == Device::cuda) {
    rep.peak_device = device->peak_allocated_bytes();
    rep.device = device->describe();
  }
  write_output_files(staged.temp_path(), src, cfg, s, rep);
  staged.commit();
  return rep;
}

}  // namespace mo::quant
