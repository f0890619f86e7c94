#pragma once
// The serving loop: one thread that owns the scheduler and runs the model step after step over the
// ragged batch it plans, samples each sequence with its own Sampler, applies stop tokens/strings and
// streams the results to each request's RequestStream. HTTP threads only submit and cancel.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "mo/engine/engine.h"
#include "mo/serve/metrics.h"
#include "mo/serve/request_stream.h"
#include "mo/serve/scheduler.h"
#include "mo/tokenizer/tokenizer.h"

namespace mo::serve {

// The model step: logits [rows, vocab] of the chunks (all rows with all_logits, else the last), in order.
using ForwardFn = std::function<std::vector<float>(std::span<const engine::SeqChunk>)>;

struct ServingOptions {
  SchedulerConfig scheduler;
  int vocab_size = 0;
  int max_queue_len = 1024;           // sequences waiting before submit() refuses more
  double request_timeout_s = 600;     // a request still unfinished after this fails
  std::uint64_t default_seed = 0;     // for choices without a seed
  std::vector<std::int32_t> eos_ids;  // the model's end-of-sequence tokens
};

enum class SubmitStatus { ok, queue_full, shutting_down };

class ServingLoop {
 public:
  ServingLoop(ForwardFn forward, const tok::Tokenizer& tok, ServingOptions opt);
  ~ServingLoop();  // cancels what is left and joins the thread

  // Queues the choices of one request; on ok, `out` receives their events.
  SubmitStatus submit(std::vector<SeqSpec> seqs, const std::shared_ptr<RequestStream>& out);
  // Stop taking requests; in-flight ones continue.
  void stop_accepting();
  // No request queued or running.
  bool idle() const;
  // Fails every request still in flight (their streams get an error event) and stops the thread.
  void shutdown();

  ServeMetrics metrics() const;
  int max_queue_len() const { return opt_.max_queue_len; }

 private:
  struct Seq;
  void run();
  void admit_new();
  void drop_cancelled_and_expired();
  void step();
  void handle_output(Seq& s, std::span<const float> row);
  void send_prompt_logprobs(Seq& s, std::span<const float> rows, int first_pos, int n);
  void finish(Seq& s, const std::string& reason);
  void fail(Seq& s, const std::string& error, int status = 500);
  // Frees a sequence's blocks, forgets it and publishes the gauges.
  void end_sequence(Seq& s);
  void publish_gauges();  // caller holds mu_
  void warn_preempted(const Seq& s);

  ForwardFn forward_;
  const tok::Tokenizer& tok_;
  ServingOptions opt_;
  Scheduler sched_;

  mutable std::mutex mu_;  // guards incoming_, accepting_, stop_, metrics_, num_active_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Seq>> incoming_;
  bool accepting_ = true;
  bool stop_ = false;
  int num_active_ = 0;  // sequences submitted and not yet finished
  ServeMetrics metrics_;

  std::unordered_map<std::int64_t, std::unique_ptr<Seq>> seqs_;  // loop thread only
  // At most one preemption warning per interval; the ones in between are counted into the next.
  static constexpr std::chrono::seconds kPreemptionLogInterval{5};
  struct {
    std::chrono::steady_clock::time_point last;
    int suppressed = 0;
  } preempt_log_;  // loop thread only
  std::int64_t next_id_ = 0;
  std::thread thread_;
};

}  // namespace mo::serve
