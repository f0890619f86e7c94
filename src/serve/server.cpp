#include "mo/serve/server.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include "mo/budget/budget.h"
#include "mo/budget/printer.h"
#include "mo/core/build_info.h"
#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/memory.h"
#include "mo/core/signals.h"
#include "mo/core/strings.h"
#include "mo/core/thread_pool.h"
#include "mo/core/device.h"
#include "mo/engine/device_model.h"
#include "mo/engine/engine.h"
#include "mo/inspect/inspect.h"
#include "mo/io/json_file.h"
#include "mo/model/model_check.h"
#include "mo/serve/http_server.h"

namespace mo::serve {
namespace {

using Clock = std::chrono::steady_clock;

std::string model_name_of(const config::ServeConfig& cfg) {
  if (!cfg.served_model_name.empty()) return cfg.served_model_name;
  std::filesystem::path p(cfg.model_path);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

engine::KvDtype kv_dtype_of(const std::string& name) {
  if (name == "auto" || name == "fp16") return engine::KvDtype::f16;
  throw UsageError(fmt::format("kv_cache_dtype: {} is not supported by the CPU engine; use fp16 (or auto)", name));
}

std::size_t longest_token_bytes(const tok::Tokenizer& tok) {
  std::size_t m = 1;
  for (std::int32_t id = 0; id < tok.vocab_size(); ++id) m = std::max(m, tok.token_bytes(id).size());
  return m;
}

// The memory plan: the budget calculator's table for this model on this machine's memory.
budget::BudgetRequest budget_request(const config::ServeConfig& cfg, double memory_bytes, const std::string& device_label) {
  budget::BudgetConfig b;
  b.model_path = cfg.model_path;
  b.kv_cache_dtype = "fp16";
  b.gpu_memory = memory_bytes / (1024.0 * 1024.0 * 1024.0);
  b.gpu_memory_utilization = cfg.gpu_memory_utilization;
  b.max_model_len = cfg.max_model_len;
  b.max_num_seqs = cfg.max_num_seqs;
  b.max_num_batched_tokens = cfg.max_num_batched_tokens;
  budget::BudgetRequest req = budget::make_request(b);
  if (!device_label.empty())
    req.gpu_label = device_label;
  else
    req.gpu_label = cfg.memory_limit > 0 ? fmt::format("CPU, memory_limit {:.2f} GiB", cfg.memory_limit)
                                         : fmt::format("CPU, {} physical memory", format_bytes(memory_bytes));
  return req;
}

double device_kv_pool_bytes(engine::Backend& gpu, double utilization, double activation_reserve) {
  const engine::DeviceMemory m = gpu.memory();
  const double used = static_cast<double>(m.total - m.free);
  return std::max(0.0, static_cast<double>(m.total) * utilization - used - activation_reserve);
}

// The measured side of the budget: what the device really holds after loading.
std::string device_memory_lines(const engine::Engine& e, double kv_pool_bytes, double utilization) {
  const engine::Backend& b = *e.kv_device();
  const engine::DeviceMemory m = b.memory();
  std::string out = fmt::format("device: {}\n", b.describe());
  if (const auto* dm = e.device_model())
    out += fmt::format("weights on the device: {} ({})\n", format_bytes(static_cast<double>(dm->weight_bytes())), dm->summary());
  out += fmt::format("device memory: {} total, {} in use after loading, {} budget at gpu_memory_utilization {:.2f}, {} for the KV cache\n",
                     format_bytes(static_cast<double>(m.total)), format_bytes(static_cast<double>(m.total - m.free)),
                     format_bytes(static_cast<double>(m.total) * utilization), utilization, format_bytes(kv_pool_bytes));
  return out;
}

}  // namespace

int run_server(const config::ServeConfig& cfg) {
  if (cfg.model_path.empty()) throw UsageError("model_path: no model given (serve --model_path PATH)");
  const Device device = parse_device(cfg.device);
  const engine::KvDtype kv_dtype = kv_dtype_of(cfg.kv_cache_dtype);
  set_default_threads(static_cast<int>(cfg.threads));

  const auto t0 = Clock::now();
  model::ModelFiles files = model::ModelFiles::open(cfg.model_path);
  auto tokenizer = model::check_model(files, model::TokenizerUse::required);
  tok::check_chat_template(tok::chat_template_of_model(files.gguf(), files.path()).tmpl, cfg.model_path);  // before the slow part
  engine::Engine engine(engine::bind_weights(files), default_pool(), device);
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  engine::Backend* gpu = engine.kv_device();

  const double memory = gpu                    ? static_cast<double>(gpu->memory().total)
                        : cfg.memory_limit > 0 ? cfg.memory_limit * 1024.0 * 1024.0 * 1024.0
                                               : static_cast<double>(physical_memory_bytes());
  const budget::BudgetRequest breq = budget_request(cfg, memory, gpu ? gpu->describe() : std::string());
  const budget::BudgetResult bres = budget::compute_budget(breq);
  const int max_model_len = static_cast<int>(breq.max_model_len);
  if (!cfg.enable_chunked_prefill && cfg.max_num_batched_tokens < max_model_len)
    throw UsageError(
        fmt::format("max_num_batched_tokens: {} is below max_model_len {}; without chunked prefill a whole prompt must fit in one step",
                    cfg.max_num_batched_tokens, max_model_len));

  const engine::KvLayout layout = engine.kv_layout(static_cast<int>(cfg.block_size), kv_dtype);
  const int bs = layout.block_size;
  const int blocks_per_seq = (max_model_len + bs - 1) / bs;
  // On a GPU the pool is what is really left: gpu_memory_utilization of the card, less what is in use
  // now (weights, CUDA context, other processes) and the activation reserve.
  const double kv_pool_bytes = gpu ? device_kv_pool_bytes(*gpu, cfg.gpu_memory_utilization, bres.activation_bytes) : bres.kv_pool_bytes;
  const int pool_blocks = kv_pool_bytes > 0 ? engine::blocks_for_budget(layout, static_cast<std::size_t>(kv_pool_bytes)) : 0;
  std::cout << fmt::format("model-optimizer {} serve\n", build_info().version);
  std::cout << fmt::format("model: {} ({}, {} layers, stored as {}) from {}\n", model_name_of(cfg), engine.hparams().arch,
                           engine.hparams().num_layers, bres.weight_format, cfg.model_path);
  if (auto m = inspect::manifest_summary(cfg.model_path)) std::cout << "quantization: " << *m << "\n";
  std::cout << fmt::format("loaded in {:.2f} s\n\n", load_s);
  std::cout << budget::format_table(breq, bres) << "\n";
  if (gpu) std::cout << device_memory_lines(engine, kv_pool_bytes, cfg.gpu_memory_utilization) << "\n";
  if (pool_blocks < blocks_per_seq) {
    const std::int64_t fit = static_cast<std::int64_t>(pool_blocks) * bs;
    if (fit == 0)
      throw UsageError(
          fmt::format("memory_limit: weights, activations and overhead take {} of the {} budget; nothing is left for the KV cache (raise "
                      "memory_limit or gpu_memory_utilization)",
                      format_bytes(bres.weights_bytes + bres.activation_bytes + bres.overhead_bytes), format_bytes(bres.budget_bytes)));
    if (gpu)
      throw UsageError(
          fmt::format("max_model_len: {} KV tokens fit in the GPU memory left at gpu_memory_utilization {:.2f}, less than one sequence of "
                      "{}; the largest max_model_len that fits is {}",
                      fit, cfg.gpu_memory_utilization, max_model_len, fit));
    throw UsageError(
        fmt::format("max_model_len: the KV cache gets {} of the budget, {} tokens, less than one sequence of {}; the largest max_model_len "
                    "that fits is {} (or raise memory_limit / gpu_memory_utilization)",
                    format_bytes(kv_pool_bytes), fit, max_model_len, fit));
  }
  // More blocks than max_num_seqs full-length sequences can ever use would only take memory.
  const int num_blocks = std::min<std::int64_t>(pool_blocks, static_cast<std::int64_t>(cfg.max_num_seqs) * blocks_per_seq);
  engine::KvStorage kv(layout, num_blocks, gpu);

  std::cout << fmt::format("KV cache: {} blocks x {} tokens = {} tokens ({}, {}), {} per token\n", num_blocks, bs,
                           static_cast<std::int64_t>(num_blocks) * bs, format_bytes(static_cast<double>(kv.bytes())),
                           engine::kv_dtype_name(kv_dtype), format_bytes(static_cast<double>(layout.bytes_per_token())));
  std::cout << fmt::format("max concurrent sequences at max_model_len {}: {} (max_num_seqs {})\n", max_model_len,
                           std::min<std::int64_t>(num_blocks / blocks_per_seq, cfg.max_num_seqs), cfg.max_num_seqs);

  ServingOptions so;
  so.scheduler = {.num_blocks = num_blocks,
                  .block_size = bs,
                  .max_num_seqs = static_cast<int>(cfg.max_num_seqs),
                  .max_num_batched_tokens = static_cast<int>(cfg.max_num_batched_tokens),
                  .enable_chunked_prefill = cfg.enable_chunked_prefill,
                  .enable_prefix_caching = cfg.enable_prefix_caching};
  so.vocab_size = static_cast<int>(engine.hparams().vocab_size);
  so.max_queue_len = static_cast<int>(cfg.max_queue_len);
  so.request_timeout_s = cfg.request_timeout;
  so.default_seed = static_cast<std::uint64_t>(cfg.seed);
  for (auto id : engine.hparams().eos_token_ids) so.eos_ids.push_back(static_cast<std::int32_t>(id));
  if (tokenizer->special().eos) so.eos_ids.push_back(*tokenizer->special().eos);
  ServingLoop loop([&](std::span<const engine::SeqChunk> chunks) { return engine.forward(chunks, kv); }, *tokenizer, so);

  ApiContext ctx;
  ctx.tokenizer = tokenizer.get();
  ctx.chat_template = tok::chat_template_of_model(files.gguf(), files.path());
  ctx.model_name = model_name_of(cfg);
  ctx.max_model_len = max_model_len;
  ctx.max_token_bytes = longest_token_bytes(*tokenizer);
  ctx.defaults.temperature = cfg.default_temperature;
  ctx.defaults.top_p = cfg.default_top_p;
  ctx.defaults.top_k = static_cast<int>(cfg.default_top_k);
  ctx.defaults.min_p = cfg.default_min_p;
  ctx.defaults.repetition_penalty = cfg.default_repetition_penalty;
  ctx.default_max_tokens = static_cast<int>(cfg.default_max_tokens);
  HttpOptions ho{.host = cfg.host,
                 .port = static_cast<int>(cfg.port),
                 .api_key = cfg.api_key,
                 .max_connections = static_cast<int>(cfg.max_connections),
                 .read_timeout_s = cfg.read_timeout};
  HttpServer http(loop, ctx, ho);
  http.bind();

  signals::ignore_broken_pipe();  // a client gone mid-write is an error return, not a crash
  // SIGINT/SIGTERM only count here; the thread below polls the count, so a second signal stops at once.
  std::atomic<int> stop_signals{0}, last_signal{0};
  signals::OnStopSignal on_stop([&](int sig) {
    last_signal = sig;
    ++stop_signals;
  });
  // Announced only now: a client that signals as soon as it reads this line finds the handler in place.
  std::cout << fmt::format("serving {} on http://{}:{}/v1 (Ctrl-C to stop)\n", ctx.model_name, cfg.host, cfg.port) << std::flush;
  std::atomic<bool> serving{true};
  std::thread waiter([&] {
    while (serving && stop_signals == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!serving) return;
    log::info("serve: {} received: no new requests; waiting up to {} s for {} in flight", last_signal == SIGINT ? "SIGINT" : "SIGTERM",
              cfg.shutdown_timeout, loop.metrics().requests_running + loop.metrics().requests_waiting);
    loop.stop_accepting();
    const auto deadline = Clock::now() + std::chrono::duration<double>(cfg.shutdown_timeout);
    while (!loop.idle() && Clock::now() < deadline && stop_signals < 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    loop.shutdown();  // what is left ends with finish_reason "abort"; requests not yet admitted get 503
    http.drain_streams(5.0);
    http.stop();
  });
  http.serve();
  serving = false;
  waiter.join();
  loop.shutdown();
  log::info("serve: stopped");
  return 0;
}

}  // namespace mo::serve
