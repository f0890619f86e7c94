// Prefill and decode speed of the CPU engine, like llama-bench.
//   mo_tool_bench_engine MODEL [-p 512] [-n 128] [-t threads] [-r 3] [--simd scalar|avx2|avx512]
//   mo_tool_bench_engine --dummy PRESET [--type q4_0] [-p ...]
//   mo_tool_bench_engine --dummy-shape HIDDEN,LAYERS,HEADS,KV_HEADS,FFN,VOCAB [--type q4_0] [-p ...]
// (--dummy-shape: random weights of a Llama-architecture model of that shape, untied output matrix.)
// ppP: one forward of P prompt tokens; tgN: N forwards of one token each after it, through a paged
// KV cache. Each is run -r times; prints tokens/s as mean ± stdev, and the peak RSS (with the RSS once loaded and
// after the warm-up, which has touched every weight page: the rest of the peak is the KV cache and activations).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mo/model/model_presets.h"
#include "mo/core/error.h"
#include "mo/core/memory.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/engine.h"
#include "mo/engine/kv_cache.h"
#include "mo/engine/ops/linear.h"
#include "mo/formats/ggml_types.h"
#include "mo/model/model_files.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double mean = 0, stdev = 0;
};

Stats stats(const std::vector<double>& v) {
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stdev += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(s.stdev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

// One run: prefill p tokens (one forward), then decode n tokens one at a time. Returns {pp, tg} tokens/s.
std::pair<double, double> run_once(mo::engine::Engine& e, int p, int n, std::uint64_t seed) {
  using namespace mo::engine;
  const KvLayout layout = e.kv_layout();
  const int blocks = (p + n + layout.block_size - 1) / layout.block_size + 1;
  KvCacheManager mgr(blocks, layout.block_size);
  KvStorage kv(layout, blocks);
  mgr.add_sequence(1);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> tok(0, static_cast<std::int32_t>(e.hparams().vocab_size - 1));
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(p));
  for (auto& t : prompt) t = tok(rng);

  double pp = 0, tg = 0;
  if (p > 0) {
    auto app = mgr.append(1, p);
    if (!app) throw mo::Error("KV cache too small");
    SeqChunk c{prompt, app->start_pos, app->slots, mgr.block_table(1), false};
    const auto t0 = Clock::now();
    auto logits = e.forward(std::span<const SeqChunk>(&c, 1), kv);
    pp = p / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (n > 0) {
    std::vector<std::int32_t> step{tok(rng)};
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      auto app = mgr.append(1, 1);
      if (!app) throw mo::Error("KV cache too small");
      SeqChunk c{step, app->start_pos, app->slots, mgr.block_table(1), false};
      auto logits = e.forward(std::span<const SeqChunk>(&c, 1), kv);
      step[0] = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    tg = n / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return {pp, tg};
}

int usage() {
  std::cerr << "usage: mo_tool_bench_engine MODEL|--dummy PRESET|--dummy-shape H,LAYERS,HEADS,KV,FFN,VOCAB [--type q4_0] [-p 512] [-n 128] "
               "[-t threads] [-r 3]"
               " [--simd scalar|avx2|avx512]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model, dummy, type_name = "q4_0", simd;
    int p = 512, n = 128, threads = 0, reps = 3;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw mo::UsageError(a + ": missing value");
        return argv[++i];
      };
      if (a == "-p")
        p = std::stoi(next());
      else if (a == "-n")
        n = std::stoi(next());
      else if (a == "-t")
        threads = std::stoi(next());
      else if (a == "-r")
        reps = std::stoi(next());
      else if (a == "--dummy")
        dummy = next();
      else if (a == "--dummy-shape")
        dummy = "shape:" + next();
      else if (a == "--type")
        type_name = next();
      else if (a == "--simd")
        simd = next();
      else if (!a.empty() && a[0] == '-')
        return usage();
      else
        model = a;
    }
    if (model.empty() == dummy.empty() || reps < 1) return usage();
    if (!simd.empty()) {
      using mo::ops::SimdLevel;
      mo::ops::set_simd_level(simd == "avx512" ? SimdLevel::avx512 : simd == "avx2" ? SimdLevel::avx2 : SimdLevel::scalar);
    }

    mo::ThreadPool pool(threads);
    std::optional<mo::model::ModelFiles> files;
    mo::engine::ModelWeights weights;
    std::string label;
    if (!model.empty()) {
      files.emplace(mo::model::ModelFiles::open(model));
      weights = mo::engine::bind_weights(*files);
      label = model.substr(model.find_last_of('/') + 1);
    } else {
      mo::model::Hparams hp;
      if (dummy.rfind("shape:", 0) == 0) {
        std::vector<std::int64_t> v;
        std::size_t at = 6;
        while (at <= dummy.size()) {
          const std::size_t comma = std::min(dummy.find(',', at), dummy.size());
          v.push_back(std::stoll(dummy.substr(at, comma - at)));
          at = comma + 1;
        }
        if (v.size() != 6 || v[0] % v[2] != 0) throw mo::UsageError("--dummy-shape: expected HIDDEN,LAYERS,HEADS,KV_HEADS,FFN,VOCAB");
        hp.arch = "llama";
        hp.hidden_size = v[0];
        hp.num_layers = v[1];
        hp.num_heads = v[2];
        hp.num_kv_heads = v[3];
        hp.intermediate_size = v[4];
        hp.vocab_size = v[5];
        hp.head_dim = v[0] / v[2];
        hp.context_length = 4096;
      } else {
        const mo::model::ModelPreset* preset = mo::model::find_model_preset(dummy);
        if (preset == nullptr) throw mo::UsageError("unknown preset " + dummy);
        hp = preset->hp;
      }
      const auto type = mo::ggml_type_from_name(type_name);
      if (!type) throw mo::UsageError("unknown type " + type_name);
      weights = mo::engine::dummy_weights(hp, *type);
      label = fmt::format("{} (dummy {})", dummy, type_name);
    }
    const double gib = static_cast<double>(weights.matrix_bytes()) / (1 << 30);
    const double mib = 1 << 20;
    mo::engine::Engine engine(std::move(weights), pool);
    const double rss_loaded = static_cast<double>(mo::current_rss_bytes()) / mib;

    std::vector<double> pp, tg;
    run_once(engine, std::min(p, 16), std::min(n, 4), 0);                        // warm-up: page in the weights
    const double rss_warm = static_cast<double>(mo::current_rss_bytes()) / mib;  // every weight page touched once
    for (int r = 0; r < reps; ++r) {
      const auto [a, b] = run_once(engine, p, n, static_cast<std::uint64_t>(r) + 1);
      pp.push_back(a);
      tg.push_back(b);
    }
    fmt::print("| model | size GiB | threads | simd | test | tokens/s |\n|---|---|---|---|---|---|\n");
    const char* lvl = mo::ops::simd_level_name(mo::ops::simd_level());
    if (p > 0) {
      const Stats s = stats(pp);
      fmt::print("| {} | {:.3f} | {} | {} | pp{} | {:.2f} ± {:.2f} |\n", label, gib, pool.size(), lvl, p, s.mean, s.stdev);
    }
    if (n > 0) {
      const Stats s = stats(tg);
      fmt::print("| {} | {:.3f} | {} | {} | tg{} | {:.2f} ± {:.2f} |\n", label, gib, pool.size(), lvl, n, s.mean, s.stdev);
    }
    fmt::print("peak RSS: {:.1f} MiB (loaded {:.1f}, after a 16-token warm-up {:.1f})\n", static_cast<double>(mo::peak_rss_bytes()) / mib,
               rss_loaded, rss_warm);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
