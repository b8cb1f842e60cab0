// Elapsed time for reports and deadlines, on the monotonic clock (a wall-clock change does not move it).
// Contract: pure functions, thread-safe; nothing fails.
#pragma once
#include <chrono>

namespace spark {

// Seconds since `t0` on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace spark
