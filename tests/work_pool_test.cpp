// The one worker pool: every task runs once, on a worker whose index is its own, and nothing queued is dropped.
#include "base/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace spark::SPARK_TEST_FILE_ID {
namespace {

TEST(WorkerPool, parallel_for_runs_each_index_once_and_a_worker_index_belongs_to_one_thread) {
  constexpr size_t n = 10000;
  std::vector<std::atomic<int>> runs(n);
  std::mutex mu;
  std::vector<std::set<std::thread::id>> threads_of(4);
  parallel_for(n, 4, [&](unsigned w, size_t i) {
    ASSERT_LT(w, 4u);
    runs[i].fetch_add(1);
    std::lock_guard lock(mu);
    threads_of[w].insert(std::this_thread::get_id());
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << i;
  for (const auto& ids : threads_of) EXPECT_LE(ids.size(), 1u);  // per-worker state is touched by one thread
}

TEST(WorkerPool, one_worker_or_one_item_runs_on_the_calling_thread) {
  const auto caller = std::this_thread::get_id();
  size_t seen = 0;
  parallel_for(5, 1, [&](unsigned w, size_t) {
    EXPECT_EQ(w, 0u);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++seen;
  });
  parallel_for(1, 8, [&](unsigned, size_t) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++seen;
  });
  parallel_for(0, 8, [&](unsigned, size_t) { ++seen; });
  EXPECT_EQ(seen, 6u);
}

TEST(WorkerPool, wait_returns_after_every_task_and_the_destructor_runs_what_is_queued) {
  std::atomic<int> done{0};
  {
    WorkerPool pool(3);
    EXPECT_EQ(pool.size(), 3u);
    for (int i = 0; i < 100; ++i) pool.submit([&](unsigned) { done.fetch_add(1); });
    pool.wait();
    EXPECT_EQ(done.load(), 100);
    // Tasks queued behind a slow one and never waited for still run before the pool goes.
    pool.submit([&](unsigned) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done.fetch_add(1);
    });
    for (int i = 0; i < 50; ++i) pool.submit([&](unsigned) { done.fetch_add(1); });
  }
  EXPECT_EQ(done.load(), 151);
  WorkerPool zero(0);  // asks for none, gets one
  EXPECT_EQ(zero.size(), 1u);
  zero.submit([&](unsigned w) { done.fetch_add(static_cast<int>(w) + 1); });
  zero.wait();
  EXPECT_EQ(done.load(), 152);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
