#include "base/work_pool.h"

#include <algorithm>

namespace spark {

WorkerPool::WorkerPool(unsigned threads) {
  const unsigned n = std::max(1u, threads);
  threads_.reserve(n);
  for (unsigned w = 0; w < n; ++w) threads_.emplace_back([this, w] { run(w); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::submit(std::function<void(unsigned)> task) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
    ++pending_;
  }
  work_.notify_one();
}

void WorkerPool::wait() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return pending_ == 0; });
}

void WorkerPool::run(unsigned worker) {
  for (;;) {
    std::function<void(unsigned)> task;
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task(worker);
    std::lock_guard lock(mu_);
    if (--pending_ == 0) idle_.notify_all();
  }
}

}  // namespace spark
