#include "mo/budget/printer.h"

#include <fmt/format.h>

#include <algorithm>

#include "mo/budget/formats.h"
#include "mo/core/strings.h"

namespace mo::budget {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string g(double bytes) { return fmt::format("{:.2f}", bytes / kGiB); }

std::string verdict(const BudgetRequest& req, const BudgetResult& r) {
  if (r.fits) {
    return fmt::format("fits: {} KV tokens, {} sequence{} of {} tokens at once (asked for {})", format_count(r.kv_capacity_tokens),
                       r.concurrent_seqs, r.concurrent_seqs == 1 ? "" : "s", format_count(req.max_model_len), req.max_num_seqs);
  }
  if (r.weights_bytes + r.activation_bytes + r.overhead_bytes > r.budget_bytes) {
    return fmt::format("does not fit: the weights alone need {} of a {} budget", format_bytes(r.weights_bytes),
                       format_bytes(r.budget_bytes));
  }
  return fmt::format("does not fit: {} sequence{} of {} tokens need {} of KV cache, {} is left", req.max_num_seqs,
                     req.max_num_seqs == 1 ? "" : "s", format_count(req.max_model_len), format_bytes(r.kv_reserved_bytes),
                     format_bytes(r.kv_pool_bytes));
}

}  // namespace

std::string format_table(const BudgetRequest& req, const BudgetResult& r) {
  const auto& hp = req.shape.hp;
  const std::int64_t tp = req.tensor_parallel_size;
  std::string out;
  out += fmt::format("{}: {:.3f} B parameters, {} layers, {} heads / {} KV heads, head_dim {}\n", req.shape.name, r.n_params / 1e9,
                     hp.num_layers, hp.num_heads, hp.num_kv_heads, hp.head_dim);
  out += fmt::format("weights {} · KV cache {} · {}{}\n\n", r.weight_format, req.kv_cache_dtype, req.gpu_label,
                     tp > 1 ? fmt::format(" × {} (tensor parallel; figures per GPU)", tp) : "");
  out += fmt::format("{:<20} {:>9}  {}\n", "component", "GiB", "how");
  auto row = [&](const std::string& name, double bytes, const std::string& how) {
    out += fmt::format("{:<20} {:>9}  {}\n", name, g(bytes), how);
  };
  row("weights", r.weights_bytes,
      fmt::format("{} params × {:.2f} bits/weight avg{}", format_count(static_cast<long long>(r.n_params)), r.weight_bits_per_weight,
                  tp > 1 ? fmt::format(" / {} GPUs", tp) : ""));
  row("KV cache reserved", r.kv_reserved_bytes,
      fmt::format("{} seq × {} tokens × {} bytes/token", req.max_num_seqs, format_count(req.max_model_len),
                  format_count(r.kv_bytes_per_token)));
  row("activations (peak)", r.activation_bytes,
      fmt::format("{} batched tokens × {} bytes + logits {}", format_count(req.max_num_batched_tokens),
                  format_count(static_cast<long long>(r.activation_bytes_per_token)), format_bytes(r.logits_bytes)));
  row("runtime overhead", r.overhead_bytes,
      tp > 1 ? "CUDA context, cuBLAS workspace, CUDA graphs, NCCL buffers" : "CUDA context, cuBLAS workspace, CUDA graphs");
  out += fmt::format("{:-<20} {:->9}  \n", "", "");
  row("total", r.total_bytes, "");
  row("budget", r.budget_bytes,
      fmt::format("{} × gpu_memory_utilization {:.2f}", format_bytes(req.gpu_memory_bytes), req.gpu_memory_utilization));
  row("headroom", r.headroom_bytes, r.fits ? "" : "short");
  out += "\n";
  std::vector<std::pair<std::uint64_t, std::string>> types;
  for (const auto& [type, bytes] : r.weight_bytes_by_type) types.emplace_back(bytes, type);
  std::sort(types.rbegin(), types.rend());
  std::vector<std::string> parts;
  for (const auto& [bytes, type] : types) parts.push_back(fmt::format("{} {}", type, format_bytes(static_cast<double>(bytes))));
  out += fmt::format("Weight storage: {}\n", join(parts));
  out += fmt::format("KV cache per token: 2 × {} layers × {} KV heads × {} head_dim × {:g} bytes = {} bytes ({})\n", hp.num_layers,
                     r.kv_heads_per_gpu, hp.head_dim, r.kv_element_bytes, format_count(r.kv_bytes_per_token),
                     format_bytes(static_cast<double>(r.kv_bytes_per_token)));
  out += fmt::format("KV cache pool (budget − weights − activations − overhead): {} = {} tokens\n", format_bytes(r.kv_pool_bytes),
                     format_count(r.kv_capacity_tokens));
  out += fmt::format("Concurrent sequences at max_model_len {}: {}\n", format_count(req.max_model_len), r.concurrent_seqs);
  if (r.max_model_len_fit == 0) {
    out += fmt::format("Largest max_model_len for max_num_seqs {}: none (no memory is left for the KV cache)\n", req.max_num_seqs);
  } else if (hp.context_length > 0 && r.max_model_len_fit > hp.context_length) {
    out += fmt::format("Largest max_model_len for max_num_seqs {}: {} (the model's context length; the KV pool would allow {})\n",
                       req.max_num_seqs, format_count(hp.context_length), format_count(r.max_model_len_fit));
  } else {
    out += fmt::format("Largest max_model_len for max_num_seqs {}: {}\n", req.max_num_seqs, format_count(r.max_model_len_fit));
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  out += "\n" + verdict(req, r) + "\n";
  const auto advice = advise(req, r);
  for (std::size_t i = 0; i < advice.size(); ++i) out += (i ? "  or " : "  ") + advice[i] + "\n";
  return out;
}

nlohmann::json to_json(const BudgetRequest& req, const BudgetResult& r) {
  const auto& hp = req.shape.hp;
  return {
      {"model",
       {{"name", req.shape.name},
        {"arch", hp.arch},
        {"params", r.n_params},
        {"layers", hp.num_layers},
        {"heads", hp.num_heads},
        {"kv_heads", hp.num_kv_heads},
        {"head_dim", hp.head_dim},
        {"context_length", hp.context_length},
        {"experts", hp.num_experts}}},
      {"weight_format", r.weight_format},
      {"kv_cache_dtype", req.kv_cache_dtype},
      {"gpu",
       {{"label", req.gpu_label},
        {"memory_bytes", req.gpu_memory_bytes},
        {"gpu_memory_utilization", req.gpu_memory_utilization},
        {"tensor_parallel_size", req.tensor_parallel_size}}},
      {"settings",
       {{"max_model_len", req.max_model_len}, {"max_num_seqs", req.max_num_seqs}, {"max_num_batched_tokens", req.max_num_batched_tokens}}},
      {"bytes_per_gpu",
       {{"weights", r.weights_bytes},
        {"kv_cache_reserved", r.kv_reserved_bytes},
        {"activations", r.activation_bytes},
        {"runtime_overhead", r.overhead_bytes},
        {"total", r.total_bytes},
        {"budget", r.budget_bytes},
        {"headroom", r.headroom_bytes},
        {"kv_cache_pool", r.kv_pool_bytes}}},
      {"weights_bytes_total", r.weights_bytes_total},
      {"weight_bytes_by_type", r.weight_bytes_by_type},
      {"bits_per_weight", r.weight_bits_per_weight},
      {"kv_bytes_per_token", r.kv_bytes_per_token},
      {"kv_capacity_tokens", r.kv_capacity_tokens},
      {"concurrent_seqs_at_max_model_len", r.concurrent_seqs},
      {"max_model_len_fit", r.max_model_len_fit},
      {"fits", r.fits},
      {"verdict", verdict(req, r)},
      {"advice", advise(req, r)},
      {"notes", r.notes},
  };
}

std::string format_comparison(const BudgetRequest& req) {
  std::string out = fmt::format("{} on {}{}, max_model_len {}, max_num_seqs {}, KV {}\n\n", req.shape.name, req.gpu_label,
                                req.tensor_parallel_size > 1 ? fmt::format(" × {}", req.tensor_parallel_size) : "",
                                format_count(req.max_model_len), req.max_num_seqs, req.kv_cache_dtype);
  out += fmt::format("{:<10} {:>9} {:>12} {:>12} {:>12} {:>10}  {}\n", "format", "bits/w", "weights GiB", "KV pool GiB", "KV tokens",
                     "seqs@len", "fits");
  for (const auto& f : weight_formats()) {
    BudgetRequest alt = req;
    alt.weight_format = f.name;
    alt.group_size = 128;
    BudgetResult r = compute_budget(alt);
    out += fmt::format("{:<10} {:>9.2f} {:>12} {:>12} {:>12} {:>10}  {}\n", f.name, r.weight_bits_per_weight, g(r.weights_bytes),
                       g(r.kv_pool_bytes), format_count(r.kv_capacity_tokens), r.concurrent_seqs, r.fits ? "yes" : "no");
  }
  return out;
}

nlohmann::json comparison_json(const BudgetRequest& req) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& f : weight_formats()) {
    BudgetRequest alt = req;
    alt.weight_format = f.name;
    alt.group_size = 128;
    rows.push_back(to_json(alt, compute_budget(alt)));
  }
  return rows;
}

}  // namespace mo::budget
