// Speed of the engine's device path on random weights of a preset's shape, for scripts/device-check.sh.
//   mo_tool_bench_device --dummy llama-2-7b [--type f16|awq|q4_k|q8_0] [--device cuda|cpu] [--batch 1,8]
//                        [-p 512] [-n 128] [--peak-gbs 4800] [--json FILE]
// For each batch size B: prefill = one forward of B sequences of p tokens; decode = n forwards of B
// sequences of one token each. Prints tokens/s, the memory bandwidth decode achieves (weights + the KV
// it reads, per step) and its fraction of --peak-gbs, and the peak device memory of the engine.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mo/model/model_presets.h"
#include "mo/core/device.h"
#include "mo/core/error.h"
#include "mo/core/memory.h"
#include "mo/core/strings.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/device_model.h"
#include "mo/engine/engine.h"
#include "mo/engine/kv_cache.h"
#include "mo/formats/ggml_types.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace mo::engine;

struct Result {
  int batch = 0;
  double prefill_tps = 0, decode_tps = 0, decode_step_ms = 0, decode_gbs = 0;
};

Result run_batch(Engine& e, int batch, int p, int n) {
  const KvLayout L = e.kv_layout();
  const int per_seq = (p + n + L.block_size - 1) / L.block_size + 1;
  KvCacheManager mgr(per_seq * batch, L.block_size);
  KvStorage kv(L, per_seq * batch, e.kv_device());
  const auto vocab = static_cast<std::int32_t>(e.hparams().vocab_size);
  std::vector<std::vector<std::int32_t>> toks(batch);
  std::vector<std::optional<AppendResult>> apps(batch);
  auto step = [&](int len, std::uint32_t salt) {
    std::vector<SeqChunk> chunks;
    for (int s = 0; s < batch; ++s) {
      toks[s].resize(len);
      for (int i = 0; i < len; ++i) toks[s][i] = static_cast<std::int32_t>((salt * 2654435761u + s * 7919u + i * 104729u) % vocab);
      apps[s] = mgr.append(s, len);
      if (!apps[s]) throw mo::Error("bench: KV cache too small");
    }
    for (int s = 0; s < batch; ++s) chunks.push_back(SeqChunk{toks[s], apps[s]->start_pos, apps[s]->slots, mgr.block_table(s), false});
    return e.forward(chunks, kv);
  };
  for (int s = 0; s < batch; ++s) mgr.add_sequence(s);
  Result r;
  r.batch = batch;
  auto t0 = Clock::now();
  step(p, 1);
  r.prefill_tps = static_cast<double>(batch) * p / std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  for (int i = 0; i < n; ++i) step(1, 100 + i);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  r.decode_tps = static_cast<double>(batch) * n / secs;
  r.decode_step_ms = 1000.0 * secs / n;
  // Bytes one decode step reads: every layer linear and the head once, plus each sequence's K and V.
  const DeviceModel* dm = e.device_model();
  const double weights =
      dm ? static_cast<double>(dm->layer_linear_bytes() + dm->head_bytes()) : static_cast<double>(e.weights().matrix_bytes());
  const double kv_read = static_cast<double>(batch) * (p + n / 2.0) * static_cast<double>(L.bytes_per_token());
  r.decode_gbs = (weights + kv_read) / (secs / n) / 1e9;
  return r;
}

int usage() {
  std::cerr << "usage: mo_tool_bench_device --dummy PRESET [--type f16|awq|q4_k|q8_0] [--device cuda|cpu] [--batch 1,8] [-p 512] [-n 128]"
               " [--peak-gbs 4800] [--json FILE]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string preset_name, type = "f16", device = "cuda", batches = "1,8", json_path;
    int p = 512, n = 128;
    double peak_gbs = 4800;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw mo::UsageError(a + ": missing value");
        return argv[++i];
      };
      if (a == "--dummy")
        preset_name = next();
      else if (a == "--type")
        type = next();
      else if (a == "--device")
        device = next();
      else if (a == "--batch")
        batches = next();
      else if (a == "-p")
        p = std::stoi(next());
      else if (a == "-n")
        n = std::stoi(next());
      else if (a == "--peak-gbs")
        peak_gbs = std::stod(next());
      else if (a == "--json")
        json_path = next();
      else
        return usage();
    }
    const auto* preset = mo::model::find_model_preset(preset_name);
    if (!preset || p < 1 || n < 1) return usage();
    const mo::Device dev = mo::parse_device(device);  // before generating gigabytes of weights
    const auto t_load = Clock::now();
    ModelWeights w;
    if (type == "awq") {
      w = dummy_awq_weights(preset->hp, 128);
    } else {
      const auto t = mo::ggml_type_from_name(type);
      if (!t) throw mo::UsageError("unknown --type " + type);
      w = dummy_weights(preset->hp, *t);
    }
    mo::ThreadPool pool(0);
    Engine e(std::move(w), pool, dev);
    const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
    const std::string where = e.kv_device() ? e.kv_device()->describe() : "cpu engine";
    std::cerr << fmt::format("{} {}: {} (generated and loaded in {:.1f} s)\n", preset_name, type,
                             e.device_model() ? e.device_model()->summary() : where, load_s);

    std::ofstream json;
    if (!json_path.empty()) json.open(json_path, std::ios::app);
    for (const auto& b : mo::split_trimmed(batches, ',')) {
      const Result r = run_batch(e, std::stoi(b), p, n);
      const double peak =
          e.kv_device() ? static_cast<double>(e.kv_device()->peak_allocated_bytes()) : static_cast<double>(mo::peak_rss_bytes());
      fmt::print("| {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.2f} | {:.0f} | {:.0f}% | {:.2f} |\n", preset_name, type, r.batch,
                 r.prefill_tps, r.decode_tps, r.decode_tps / r.batch, r.decode_step_ms, r.decode_gbs, 100.0 * r.decode_gbs / peak_gbs,
                 peak / (1ull << 30));
      std::cout << std::flush;
      if (json)
        json << nlohmann::json{{"model", preset_name},
                               {"type", type},
                               {"device", where},
                               {"batch", r.batch},
                               {"prompt_tokens", p},
                               {"decode_tokens", n},
                               {"prefill_tokens_per_s", r.prefill_tps},
                               {"decode_tokens_per_s", r.decode_tps},
                               {"decode_tokens_per_s_per_stream", r.decode_tps / r.batch},
                               {"decode_step_ms", r.decode_step_ms},
                               {"decode_gb_per_s", r.decode_gbs},
                               {"peak_gb_per_s", peak_gbs},
                               {"peak_memory_bytes", peak},
                               {"load_seconds", load_s}}
                    .dump()
             << "\n";
    }
    return 0;
  } catch (const std::exception& ex) {
    std::cerr << "error: " << ex.what() << "\n";
    return 1;
  }
}
