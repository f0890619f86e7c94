#include "mo/serve/serving_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/engine/stop_checker.h"
#include "mo/serve/logprobs.h"

namespace mo::serve {

using Clock = std::chrono::steady_clock;

namespace {

engine::SamplingParams sampler_params(engine::SamplingParams p) {
  p.max_tokens = std::max(p.max_tokens, 1);  // echo-only requests (max_tokens 0) never sample
  return p;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

ChoiceEvent event(int choice) {
  ChoiceEvent e;
  e.choice = choice;
  return e;
}

ChoiceEvent error_event(int choice, std::string error) {
  ChoiceEvent e = event(choice);
  e.error = std::move(error);
  return e;
}

constexpr const char* kShuttingDown = "the server is shutting down";

}  // namespace

struct ServingLoop::Seq {
  Seq(std::int64_t id_, SeqSpec spec_, std::shared_ptr<RequestStream> out_, const tok::Tokenizer& tok, std::uint64_t seed)
      : id(id_),
        spec(std::move(spec_)),
        out(std::move(out_)),
        sampler(sampler_params(spec.params), seed),
        stops(spec.params.stop, spec.params.include_stop_str_in_output),
        decoder(tok),
        arrival(Clock::now()) {}
  std::int64_t id;
  SeqSpec spec;
  std::shared_ptr<RequestStream> out;
  engine::Sampler sampler;
  engine::StopChecker stops;
  tok::IncrementalDecoder decoder;
  std::vector<std::int32_t> output;
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  bool stopped_by_string = false;  // the stop checker has ended the text: nothing is left to flush
  bool stopped_by_token = false;   // EOS or a stop_token_ids token ended it: counted, in the logprobs, not in the text
  Clock::time_point arrival, last_token;
};

ServingLoop::ServingLoop(ForwardFn forward, const tok::Tokenizer& tok, ServingOptions opt)
    : forward_(std::move(forward)), tok_(tok), opt_(std::move(opt)), sched_(opt_.scheduler) {
  metrics_.kv_blocks_free = sched_.num_blocks_free();
  thread_ = std::thread([this] { run(); });
}

ServingLoop::~ServingLoop() { shutdown(); }

SubmitStatus ServingLoop::submit(std::vector<SeqSpec> seqs, const std::shared_ptr<RequestStream>& out) {
  {
    std::lock_guard lock(mu_);
    if (!accepting_) return SubmitStatus::shutting_down;
    const std::size_t queued = static_cast<std::size_t>(metrics_.requests_waiting) + incoming_.size();
    if (queued + seqs.size() > static_cast<std::size_t>(opt_.max_queue_len)) return SubmitStatus::queue_full;
    for (SeqSpec& spec : seqs) {
      const std::uint64_t seed = opt_.default_seed + static_cast<std::uint64_t>(next_id_);
      incoming_.push_back(std::make_unique<Seq>(next_id_++, std::move(spec), out, tok_, seed));
      ++num_active_;
    }
  }
  cv_.notify_all();
  return SubmitStatus::ok;
}

void ServingLoop::stop_accepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool ServingLoop::idle() const {
  std::lock_guard lock(mu_);
  return num_active_ == 0;
}

void ServingLoop::shutdown() {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ServeMetrics ServingLoop::metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

void ServingLoop::run() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !seqs_.empty(); });
      if (stop_) break;
    }
    admit_new();
    drop_cancelled_and_expired();
    if (sched_.has_work()) step();
    std::lock_guard lock(mu_);
    publish_gauges();
  }
  std::vector<Seq*> left;
  for (auto& [id, s] : seqs_) left.push_back(s.get());
  // Admitted sequences end as vLLM ends an aborted request: finish_reason "abort", so that a stream still
  // gets its last chunk and [DONE], and a whole answer what was generated.
  for (Seq* s : left) finish(*s, "abort");
  std::lock_guard lock(mu_);
  for (auto& s : incoming_) {
    ChoiceEvent e = error_event(s->spec.choice, kShuttingDown);
    e.error_status = 503;
    s->out->push(std::move(e));
  }
  incoming_.clear();
}

void ServingLoop::publish_gauges() {
  metrics_.requests_running = sched_.num_running();
  metrics_.requests_waiting = sched_.num_waiting();
  metrics_.kv_blocks_used = sched_.num_blocks_used();
  metrics_.kv_blocks_free = sched_.num_blocks_free();
  metrics_.prefix_cache_queries = sched_.prefix_cache_stats().queried_tokens;
  metrics_.prefix_cache_hits = sched_.prefix_cache_stats().hit_tokens;
  metrics_.preemptions_total = sched_.num_preemptions();
}

void ServingLoop::admit_new() {
  std::vector<std::unique_ptr<Seq>> fresh;
  {
    std::lock_guard lock(mu_);
    fresh.swap(incoming_);
  }
  for (auto& s : fresh) {
    // Prompt logprobs need the logits of every prompt token, so no part of the prompt may come from the cache.
    sched_.add(s->id, s->spec.prompt, !s->spec.prompt_logprobs);
    seqs_.emplace(s->id, std::move(s));
  }
}

void ServingLoop::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  std::vector<Seq*> gone;
  for (auto& [id, s] : seqs_)
    if (s->out->cancelled() || seconds(now - s->arrival) > opt_.request_timeout_s) gone.push_back(s.get());
  for (Seq* s : gone) {
    const char* why = s->out->cancelled() ? "the request was cancelled" : "the request took longer than request_timeout";
    fail(*s, fmt::format("{} ({:.1f} s)", why, seconds(now - s->arrival)));
  }
}

void ServingLoop::step() {
  StepPlan plan = sched_.schedule();
  for (std::int64_t id : plan.preempted) warn_preempted(*seqs_.at(id));
  if (plan.empty()) return;
  std::vector<engine::SeqChunk> chunks;
  chunks.reserve(plan.chunks.size());
  for (const ScheduledChunk& c : plan.chunks) {
    const Seq& s = *seqs_.at(c.seq_id);
    const bool all_logits = s.spec.prompt_logprobs && !s.prompt_logprobs_sent && c.start_pos < static_cast<int>(s.spec.prompt.size());
    chunks.push_back(
        {sched_.tokens(c.seq_id).subspan(c.start_pos, c.num_tokens), c.start_pos, c.slots, sched_.block_table(c.seq_id), all_logits});
  }
  std::vector<float> logits;
  try {
    logits = forward_(chunks);
  } catch (const std::exception& e) {
    log::error("serve: model step failed: {}", e.what());
    for (const ScheduledChunk& c : plan.chunks) fail(*seqs_.at(c.seq_id), fmt::format("model error: {}", e.what()));
    return;
  }
  sched_.commit(plan);
  const std::size_t vocab = static_cast<std::size_t>(opt_.vocab_size);
  std::size_t row = 0;
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    const std::size_t rows = chunks[i].all_logits ? static_cast<std::size_t>(c.num_tokens) : 1;
    std::span<const float> chunk_logits(logits.data() + row * vocab, rows * vocab);
    row += rows;
    Seq& s = *seqs_.at(c.seq_id);
    if (chunks[i].all_logits) send_prompt_logprobs(s, chunk_logits, c.start_pos, c.num_tokens);
    if (!c.samples) continue;
    if (s.spec.params.max_tokens == 0) {
      finish(s, "length");
      continue;
    }
    try {
      handle_output(s, chunk_logits.subspan((rows - 1) * vocab, vocab));
    } catch (const std::exception& e) {  // e.g. logits with no finite value: this sequence fails, the others go on
      fail(s, fmt::format("sampling failed: {}", e.what()));
    }
  }
}

void ServingLoop::warn_preempted(const Seq& s) {
  const auto now = Clock::now();
  if (preempt_log_.last != Clock::time_point{} && now - preempt_log_.last < kPreemptionLogInterval) {
    ++preempt_log_.suppressed;
    return;
  }
  const int used = sched_.num_blocks_used(), total = sched_.config().num_blocks;
  const std::string more = preempt_log_.suppressed > 0 ? fmt::format(" ({} more since the last such line)", preempt_log_.suppressed) : "";
  log::warn(
      "serve: request {} (choice {}) preempted: the KV cache is full ({} of {} blocks in use, {:.0f}%, {} sequences running); its {} "
      "tokens will be recomputed; preemptions so far: {}{}. A larger KV cache (memory_limit / gpu_memory_utilization) or a lower "
      "max_num_seqs avoids them",
      s.spec.request_id.empty() ? fmt::format("#{}", s.id) : s.spec.request_id, s.spec.choice, used, total,
      total > 0 ? 100.0 * used / total : 0.0, sched_.num_running(), s.spec.prompt.size() + s.output.size(), sched_.num_preemptions(), more);
  preempt_log_.last = now;
  preempt_log_.suppressed = 0;
}

void ServingLoop::send_prompt_logprobs(Seq& s, std::span<const float> rows, int first_pos, int n) {
  const int prompt_len = static_cast<int>(s.spec.prompt.size());
  if (s.prompt_logprobs.empty()) s.prompt_logprobs.resize(prompt_len);  // [0] stays empty: nothing predicts it
  const std::size_t vocab = static_cast<std::size_t>(opt_.vocab_size);
  for (int k = 0; k < n && first_pos + k + 1 < prompt_len; ++k) {
    const int target = first_pos + k + 1;
    s.prompt_logprobs[target] = token_logprob(rows.subspan(k * vocab, vocab), s.spec.prompt[target], s.spec.params.logprobs);
  }
  if (first_pos + n >= prompt_len) {
    ChoiceEvent e = event(s.spec.choice);
    e.prompt = std::move(s.prompt_logprobs);
    s.out->push(std::move(e));
    s.prompt_logprobs_sent = true;
  }
}

void ServingLoop::handle_output(Seq& s, std::span<const float> row) {
  const engine::SampledToken t = s.sampler.sample(row, s.spec.prompt, s.output);
  const auto now = Clock::now();
  {
    std::lock_guard lock(mu_);
    if (s.output.empty())
      metrics_.time_to_first_token.observe(seconds(now - s.arrival));
    else
      metrics_.time_per_output_token.observe(seconds(now - s.last_token));
    ++metrics_.generation_tokens_total;
  }
  s.last_token = now;
  if (engine::is_stop_token(t.id, s.spec.params, opt_.eos_ids)) {
    // As vLLM: the stop token keeps its logprob entry (lm-eval's echo scoring drops the last entry), never its text.
    ChoiceEvent ev = event(s.spec.choice);
    ev.tokens.push_back({t.id, t.logprob, t.top_logprobs});
    s.out->push(std::move(ev));
    s.stopped_by_token = true;
    finish(s, "stop");
    return;
  }
  s.output.push_back(t.id);
  ChoiceEvent ev = event(s.spec.choice);
  ev.tokens.push_back({t.id, t.logprob, t.top_logprobs});
  auto r = s.stops.push(s.decoder.push(t.id));
  ev.text = std::move(r.emit);
  s.out->push(std::move(ev));
  if (r.stopped) {
    s.stopped_by_string = true;
    finish(s, "stop");
    return;
  }
  const int total = static_cast<int>(s.spec.prompt.size() + s.output.size());
  if (static_cast<int>(s.output.size()) >= s.spec.params.max_tokens || total >= s.spec.max_total_tokens) {
    finish(s, "length");
    return;
  }
  sched_.append_token(s.id, t.id);
}

void ServingLoop::finish(Seq& s, const std::string& reason) {
  ChoiceEvent ev = event(s.spec.choice);
  ev.finish_reason = reason;
  // Bytes held back (an unfinished character, a possible stop-string start) are released now.
  if (!s.stopped_by_string) {
    auto r = s.stops.push(s.decoder.flush());
    ev.text = r.emit + (r.stopped ? "" : s.stops.flush());
  }
  ev.prompt_tokens = static_cast<int>(s.spec.prompt.size());
  ev.completion_tokens = static_cast<int>(s.output.size()) + (s.stopped_by_token ? 1 : 0);
  const auto out = s.out;
  {
    std::lock_guard lock(mu_);
    metrics_.prompt_tokens_total += ev.prompt_tokens;
    ++metrics_.requests_finished_total;
    metrics_.e2e_request_latency.observe(seconds(Clock::now() - s.arrival));
    --num_active_;
  }
  end_sequence(s);
  out->push(std::move(ev));
}

void ServingLoop::fail(Seq& s, const std::string& error, int status) {
  ChoiceEvent e = error_event(s.spec.choice, error);
  e.error_status = status;
  const auto out = s.out;
  {
    std::lock_guard lock(mu_);
    --num_active_;
  }
  end_sequence(s);
  out->push(std::move(e));
}

void ServingLoop::end_sequence(Seq& s) {
  sched_.finish(s.id);
  seqs_.erase(s.id);  // s is gone from here on
  // Before the last event goes out, so /metrics read right after a response already counts it as ended.
  std::lock_guard lock(mu_);
  publish_gauges();
}

}  // namespace mo::serve
