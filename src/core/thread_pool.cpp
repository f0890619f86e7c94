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

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins on `done()` for up to kSpin; true if it became true.
template <class F>
bool spin_until(F done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
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
    const auto chunk = chunks_[index];
    if (chunk.first < chunk.second) {
      try {
        (*job_)(chunk.first, chunk.second, index);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> g(mu_);
      done_cv_.notify_one();
    }
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
  for (int t = 0; t < size(); ++t)
    chunks_[t] = t < threads ? std::make_pair(begin + n * t / threads, begin + n * (t + 1) / threads) : std::make_pair<std::int64_t, std::int64_t>(0, 0);
  job_ = &fn;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
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
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return pending_.load() == 0; });
    caller_sleeping_.store(false);
  }
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& default_pool() {
  auto& p = pool_slot();
  if (!p) p = std::make_unique<ThreadPool>(0);
  return *p;
}

void set_default_threads(int n_threads) { pool_slot() = std::make_unique<ThreadPool>(n_threads); }

}  // namespace mo
