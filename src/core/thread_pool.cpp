#include "mo/core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace mo {

ThreadPool::ThreadPool(int n_threads) {
  int n = n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* job = job_;
    auto chunk = index < static_cast<int>(chunks_.size()) ? chunks_[index] : std::make_pair<std::int64_t, std::int64_t>(0, 0);
    lock.unlock();
    if (chunk.first < chunk.second) {
      try {
        (*job)(chunk.first, chunk.second, index);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_one();
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
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks(size(), {0, 0});
  for (int t = 0; t < threads; ++t) chunks[t] = {begin + n * t / threads, begin + n * (t + 1) / threads};
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    chunks_ = std::move(chunks);
    pending_ = static_cast<int>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  std::exception_ptr mine;
  try {
    if (chunks_[0].first < chunks_[0].second) fn(chunks_[0].first, chunks_[0].second, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
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
