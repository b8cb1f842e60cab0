// The miner's history walk against git itself, on the same repository in the same run: first-parent history from
// HEAD with each commit's patch under a path prefix (libgit2, GitRepository::for_each_patch) versus
// `git log -p --first-parent -- PREFIX > /dev/null`. Prints each run, the medians and the ratio, and peak memory.
//
//   spark_history_walk REPO [--prefix test/] [--runs 3] [--threads N (default: one per core)]
//
// Target (issue 4): spark's wall time ≤ 1.5 × git's, memory bounded (one commit's patch in memory at a time).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "git_history.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Runs git with stdout to /dev/null; returns wall seconds and the child's peak RSS (KiB).
std::pair<double, long> run_git(const std::string& repo, const std::vector<std::string>& args) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    std::FILE* null = std::fopen("/dev/null", "w");
    if (null) dup2(fileno(null), STDOUT_FILENO);
    std::vector<std::string> all = {"git", "-C", repo};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("git", argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "git failed\n");
    std::exit(1);
  }
  return {seconds_since(start), usage.ru_maxrss};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: spark_history_walk REPO [--prefix test/] [--runs 3] [--threads N]\n");
    return 2;
  }
  std::string repo_path = argv[1], prefix = "test/";
  int runs = 3;
  size_t threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--prefix") == 0) prefix = argv[i + 1];
    else if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--threads") == 0) threads = static_cast<size_t>(std::max(1, std::atoi(argv[i + 1])));
  }
  auto repo = spark::GitRepository::open(repo_path);
  if (!repo) {
    std::fprintf(stderr, "%s\n", repo.error().message.c_str());
    return 1;
  }
  std::vector<double> spark_s, git_s, git_nr_s;
  long git_rss = 0, git_nr_rss = 0;
  size_t commits = 0, bytes = 0, largest = 0;
  for (int run = 0; run < runs; ++run) {
    // Alternate the order so that neither always runs on a warmer cache.
    const auto walk = [&] {
      commits = bytes = largest = 0;
      const auto start = std::chrono::steady_clock::now();
      auto s = (*repo)->for_each_patch({prefix}, [&](const spark::CommitInfo&, std::string_view patch) -> spark::Status {
        ++commits;
        bytes += patch.size();
        largest = std::max(largest, patch.size());
        return {};
      }, threads);
      if (!s) {
        std::fprintf(stderr, "%s\n", s.error().message.c_str());
        std::exit(1);
      }
      spark_s.push_back(seconds_since(start));
    };
    const auto git = [&] {
      auto [t, rss] = run_git(repo_path, {"log", "-p", "--first-parent", "--", prefix});
      git_s.push_back(t);
      git_rss = std::max(git_rss, rss);
      auto [t2, rss2] = run_git(repo_path, {"log", "-p", "--first-parent", "--no-renames", "--", prefix});
      git_nr_s.push_back(t2);
      git_nr_rss = std::max(git_nr_rss, rss2);
    };
    if (run % 2 == 0) {
      walk();
      git();
    } else {
      git();
      walk();
    }
    std::printf("run %d: spark %.2f s, git log -p %.2f s, git log -p --no-renames %.2f s\n", run + 1, spark_s.back(),
                git_s.back(), git_nr_s.back());
  }
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  const double s = median(spark_s), g = median(git_s), gnr = median(git_nr_s);
  std::printf("patch workers: %s\n", threads ? std::to_string(threads).c_str() : "one per core");
  std::printf("commits touching %s: %zu; patch text %.1f MB in all, largest %.1f MB\n", prefix.c_str(), commits,
              static_cast<double>(bytes) / 1e6, static_cast<double>(largest) / 1e6);
  std::printf("median of %d: spark %.2f s, git log -p %.2f s (ratio %.2f), git log -p --no-renames %.2f s (ratio %.2f)\n",
              runs, s, g, s / g, gnr, s / gnr);
  std::printf("peak memory: spark %.0f MB, git log -p %.0f MB, git --no-renames %.0f MB\n",
              static_cast<double>(self.ru_maxrss) / 1024, static_cast<double>(git_rss) / 1024,
              static_cast<double>(git_nr_rss) / 1024);
  std::printf("target: ratio <= 1.5 -> %s\n", s / g <= 1.5 ? "met" : "NOT met");
  return 0;
}
