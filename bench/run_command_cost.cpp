// What run_command costs spark itself per call, with and without a child subreaper (the discovery's clean-up of what
// a run leaves reads every process's /proc stat): `true` run N times per round, the median round of R, as
// milliseconds of spark's own CPU (user + system, RUSAGE_SELF: the commands' own time is not counted) and of wall
// time per call, and the machine's process count.
//
//   build/bench/spark_run_command_cost [N=200] [R=5]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "base/process.h"

namespace {

double cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return (static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3) +
         (static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  size_t processes = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc"))
    processes += e.path().filename().string().find_first_not_of("0123456789") == std::string::npos ? 1 : 0;
  for (const bool reaper : {false, true}) {
    std::unique_ptr<spark::ChildSubreaper> scope;
    if (reaper) scope = std::make_unique<spark::ChildSubreaper>();
    std::vector<double> cpu, wall;
    for (int r = 0; r < rounds; ++r) {
      const double c0 = cpu_ms();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i)
        if (!spark::run_command("true", "/", 10)) return 1;
      wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n);
      cpu.push_back((cpu_ms() - c0) / n);
    }
    std::printf("%-18s %d calls x %d rounds, %zu processes: %.3f ms CPU, %.3f ms wall per call (medians)\n",
                reaper ? "child subreaper" : "no subreaper", n, rounds, processes, median(cpu), median(wall));
  }
}
