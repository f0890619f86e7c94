#include "mo/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mo {
namespace {

// How long an idle thread spins before it sleeps: long enough to span the gap between the ops of one
// forward step (so workers stay hot), short enough that an oversubscribed machine is not burnt on it.
constexpr auto kSpin = std::chrono::microseconds(200);
// How long the caller waits for a worker to start its chunk before running it itself: a worker that is
// merely late starts within this; one the OS has descheduled would cost a time slice (milliseconds).
constexpr auto kSteal = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins on `done()` for up to `limit`; true if it became true.
template <class F>
bool spin_until(F done, std::chrono::microseconds limit = kSpin) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  int n = n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  chunks_.assign(n, {0, 0});
  claimed_ = std::make_unique<std::atomic<std::uint64_t>[]>(n);
  for (int i = 0; i < n; ++i) claimed_[i].store(0);
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::claim(int index, std::uint64_t gen) {
  std::uint64_t expected = gen - 1;  // parallel_for marks the job's chunks claimable as gen - 1
  return claimed_[index].compare_exchange_strong(expected, gen, std::memory_order_acq_rel);
}

void ThreadPool::run_chunk(int index) {
  const auto chunk = chunks_[index];
  try {
    (*job_)(chunk.first, chunk.second, index);
  } catch (...) {
    std::lock_guard<std::mutex> g(mu_);
    if (!error_) error_ = std::current_exception();
  }
  if (remaining_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
    std::lock_guard<std::mutex> g(mu_);
    done_cv_.notify_one();
  }
}

void ThreadPool::worker(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      start_cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    // The caller may have run this chunk already (this thread was late), and may be on a later job.
    if (claim(index, seen)) run_chunk(index);
  }
}

void ThreadPool::parallel_for(std::int64_t begin, std::int64_t end, const std::function<void(std::int64_t, std::int64_t, int)>& fn,
                              std::int64_t grain) {
  const std::int64_t n = end - begin;
  if (n <= 0) return;
  const std::int64_t max_chunks = std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, grain));
  const int threads = static_cast<int>(std::min<std::int64_t>(size(), max_chunks));
  if (threads <= 1 || workers_.empty()) {
    fn(begin, end, 0);
    return;
  }
  for (int t = 0; t < threads; ++t) chunks_[t] = {begin + n * t / threads, begin + n * (t + 1) / threads};
  job_ = &fn;
  error_ = nullptr;
  remaining_.store(threads - 1, std::memory_order_relaxed);
  const std::uint64_t gen = generation_.load() + 1;
  // Chunks 1..threads-1 become claimable by this generation only (a worker still on an older one cannot
  // take them under a stale chunk list: it claims with the generation it read after ours was published).
  for (int t = 1; t < size(); ++t) claimed_[t].store(t < threads ? gen - 1 : gen, std::memory_order_release);
  generation_.fetch_add(1);  // seq_cst: a worker that saw the old generation under mu_ is counted in sleepers_
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    start_cv_.notify_all();
  }
  std::exception_ptr mine;
  try {
    fn(chunks_[0].first, chunks_[0].second, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  const auto all_started = [&] {
    for (int t = 1; t < threads; ++t)
      if (claimed_[t].load(std::memory_order_acquire) != gen) return false;
    return true;
  };
  if (!spin_until(all_started, kSteal))
    for (int t = 1; t < threads; ++t)
      if (claim(t, gen)) run_chunk(t);
  if (!spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return remaining_.load() == 0; });
    caller_sleeping_.store(false);
  }
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

namespace {
std::mutex g_default_mu;
std::shared_ptr<ThreadPool> g_default;
}  // namespace

std::shared_ptr<ThreadPool> default_pool() {
  std::lock_guard<std::mutex> lock(g_default_mu);
  if (!g_default) g_default = std::make_shared<ThreadPool>(0);
  return g_default;
}

void set_default_threads(int n_threads) {
  auto fresh = std::make_shared<ThreadPool>(n_threads);
  std::lock_guard<std::mutex> lock(g_default_mu);
  g_default.swap(fresh);  // the old pool, if no one else holds it, stops after the lock is released
}

}  // namespace mo
