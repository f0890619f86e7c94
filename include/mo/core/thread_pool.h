#pragma once
// A fixed pool of worker threads for the hot loops: parallel_for splits [begin, end) into one
// contiguous chunk per thread (static partition, so results never depend on timing). Idle workers spin
// briefly (so back-to-back ops of a forward step start without a wake-up) and then sleep (so an
// oversubscribed machine degrades gently instead of burning its cores on spinning). A chunk whose worker
// has not started it by the time the caller is done with its own is run by the caller (same chunk, same
// thread_index), so a worker the OS has not scheduled never stalls the step.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mo {

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }  // workers + the calling thread

  // Calls fn(chunk_begin, chunk_end, thread_index) for contiguous chunks covering [begin, end), at
  // most one per thread, and returns when all are done. Chunks are at least `grain` items. The first
  // exception thrown by fn is rethrown here. Not reentrant: fn must not call parallel_for.
  void parallel_for(std::int64_t begin, std::int64_t end, const std::function<void(std::int64_t, std::int64_t, int)>& fn,
                    std::int64_t grain = 1);

 private:
  void worker(int index);
  bool claim(int index, std::uint64_t gen);  // true for the one thread that runs chunk `index` of job `gen`
  void run_chunk(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  // Written by the caller before generation_ is bumped, read by workers after they see the new value.
  const std::function<void(std::int64_t, std::int64_t, int)>* job_ = nullptr;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks_;
  std::atomic<std::uint64_t> generation_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> claimed_;  // per chunk: the generation that claimed it
  std::atomic<int> remaining_{0};                          // chunks of the current job not finished
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};  // read by workers that may be late for the generation that set it
  std::exception_ptr error_;
};

// The process-wide pool used by the engine; sized by set_default_threads() (the --threads flag). Shared:
// set_default_threads installs a new pool for later callers while whoever holds the old one (an engine)
// keeps it alive and running.
std::shared_ptr<ThreadPool> default_pool();
void set_default_threads(int n_threads);

}  // namespace mo
