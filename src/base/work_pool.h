// The one worker pool of spark: a fixed set of threads running submitted tasks, and parallel_for over it. Index
// building (embedding, the ranker's views), the miner's history walk and the LLM stage's requests all use it.
//
// Ownership: a WorkerPool owns its threads; its destructor runs every task already queued, then joins them.
// Thread safety: submit() and wait() may be called from any thread; a task must not call wait() on its own pool.
// Each task gets the index (0 .. size()-1) of the worker running it, so per-worker state (a parser, a repository
// handle) indexed by it is touched by one thread only. Nothing here fails; a task that throws ends the process, as a
// thread's exception does.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spark {

class WorkerPool {
 public:
  explicit WorkerPool(unsigned threads);  // at least one thread is started
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(threads_.size()); }
  // Queues `task`; the next free worker runs it with its own index.
  void submit(std::function<void(unsigned worker)> task);
  // Returns when every task submitted so far has run.
  void wait();

 private:
  void run(unsigned worker);
  std::mutex mu_;
  std::condition_variable work_, idle_;
  std::deque<std::function<void(unsigned)>> queue_;
  size_t pending_ = 0;  // queued or running
  bool closing_ = false;
  std::vector<std::thread> threads_;  // last: started after, and joined before, the state above goes
};

// Runs fn(worker, i) for every i in [0, n) on up to `threads` workers of a pool made for the call; each i goes to the
// next free worker. One worker (or n <= 1) runs everything on the calling thread, with worker 0.
template <class Fn>
void parallel_for(size_t n, unsigned threads, Fn&& fn) {
  const auto workers = static_cast<unsigned>(std::min<size_t>(threads, n));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(0u, i);
    return;
  }
  std::atomic<size_t> next{0};
  WorkerPool pool(workers);
  for (unsigned w = 0; w < workers; ++w)
    pool.submit([&](unsigned worker) {
      for (size_t i; (i = next.fetch_add(1)) < n;) fn(worker, i);
    });
  pool.wait();
}

}  // namespace spark
