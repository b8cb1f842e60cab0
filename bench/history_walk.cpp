// The miner's kind of history walk against git itself, on the same repository in the same run: first-parent history
// from HEAD with each commit's patch under a path prefix (libgit2, patches made by parallel workers and handed on in
// history order, below) versus `git log -p --first-parent -- PREFIX > /dev/null`. Prints each run, the medians and the
// ratio, and peak memory; checks that the walk names the commits `git log --first-parent -- PREFIX` names, in order.
//
//   spark_history_walk REPO [--prefix test/] [--runs 3] [--threads N (default: one per core)]
//
// Target (issue 4): spark's wall time <= 1.5 x git's, memory bounded (a few commits' patches in memory at a time).
// `spark mine` reads only the files its outcomes name, so no command walks patches: the walk lives here, linking
// libgit2 directly (the product opens it with dlopen, miner/git_history.cpp).
#include <git2.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/work_pool.h"

namespace {

// A libgit2 object freed by `Free`.
template <class T, void (*Free)(T*)>
struct Owned {
  T* p = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (p) Free(p);
  }
};

std::string last_error(const std::string& what) {
  const git_error* e = git_error_last();
  return what + ": " + (e && e->message ? e->message : "libgit2 error");
}

// Whether the trees under every prefix are the same objects in both commits (then nothing changed there).
bool same_under(git_tree* a, git_tree* b, const std::vector<std::string>& prefixes) {
  if (!a || prefixes.empty()) return false;
  for (const auto& prefix : prefixes) {
    std::string p = prefix;
    while (p.ends_with("/")) p.pop_back();
    Owned<git_tree_entry, git_tree_entry_free> x, y;
    const bool in_a = git_tree_entry_bypath(&x.p, a, p.c_str()) == 0;
    const bool in_b = git_tree_entry_bypath(&y.p, b, p.c_str()) == 0;
    if (in_a != in_b || (in_a && !git_oid_equal(git_tree_entry_id(x.p), git_tree_entry_id(y.p)))) return false;
  }
  return true;
}

// The trees of `commit` and of its first parent (none for a root commit).
bool trees_of(git_commit* commit, Owned<git_tree, git_tree_free>& tree, Owned<git_tree, git_tree_free>& parent_tree) {
  if (git_commit_tree(&tree.p, commit) != 0) return false;
  if (git_commit_parentcount(commit) > 0) {
    Owned<git_commit, git_commit_free> parent;
    if (git_commit_parent(&parent.p, commit, 0) != 0 || git_commit_tree(&parent_tree.p, parent.p) != 0) return false;
  }
  return true;
}

// A commit's patch (against its first parent, under the prefixes), made on a worker with its own repository handle.
struct Patch {
  std::string sha, text, error;
};

// Streams the history from HEAD (oldest first, first parent only) with each commit's diff against its first parent
// under `prefixes`, to `fn` in history order, for the commits that touch them. The walk (and the cheap check whether a
// commit touched the prefixes) runs here; the patches are made by `threads` workers, each with its own handle on the
// repository (libgit2 handles are not shared-safe), at most 4 per worker in flight. Returns the first error.
std::optional<std::string> for_each_patch(const std::string& repo_path, const std::vector<std::string>& prefixes,
                                          const std::function<void(const Patch&)>& fn, size_t threads) {
  Owned<git_repository, git_repository_free> repo;
  if (git_repository_open_ext(&repo.p, repo_path.c_str(), 0, nullptr) != 0) return last_error(repo_path);
  Owned<git_revwalk, git_revwalk_free> walk;
  if (git_revwalk_new(&walk.p, repo.p) != 0 || git_revwalk_push_head(walk.p) != 0) return last_error("HEAD");
  git_revwalk_sorting(walk.p, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE);
  git_revwalk_simplify_first_parent(walk.p);
  std::vector<char*> specs;
  specs.reserve(prefixes.size());
  for (const auto& p : prefixes) specs.push_back(const_cast<char*>(p.c_str()));
  git_diff_options opts;
  git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.pathspec.strings = specs.data();
  opts.pathspec.count = specs.size();
  const std::string path = git_repository_path(repo.p);
  std::vector<Owned<git_repository, git_repository_free>> handles(threads);
  const auto make_patch = [&](unsigned w, const git_oid& id, Patch& out) {
    git_repository*& own = handles[w].p;
    if (!own && git_repository_open_bare(&own, path.c_str()) != 0) return void(out.error = last_error(path));
    Owned<git_commit, git_commit_free> commit;
    Owned<git_tree, git_tree_free> tree, parent_tree;
    Owned<git_diff, git_diff_free> diff;
    if (git_commit_lookup(&commit.p, own, &id) != 0 || !trees_of(commit.p, tree, parent_tree) ||
        git_diff_tree_to_tree(&diff.p, own, parent_tree.p, tree.p, &opts) != 0)
      return void(out.error = last_error(out.sha));
    if (git_diff_num_deltas(diff.p) == 0) return;
    git_buf buf = GIT_BUF_INIT;
    if (git_diff_to_buf(&buf, diff.p, GIT_DIFF_FORMAT_PATCH) != 0) return void(out.error = last_error(out.sha));
    out.text.assign(buf.ptr, buf.size);
    git_buf_dispose(&buf);
  };
  std::mutex m;
  std::condition_variable cv;
  std::map<size_t, Patch> done;
  size_t submitted = 0, emitted = 0;
  std::optional<std::string> error;
  // Hands finished patches to `fn` in order; with `all`, waits for every submitted one.
  const auto emit = [&](bool all) {
    for (;;) {
      Patch d;
      {
        std::unique_lock lock(m);
        const bool must_wait = all ? emitted < submitted : submitted - emitted >= 4 * threads;
        if (!done.count(emitted)) {
          if (!must_wait) return;
          cv.wait(lock, [&] { return done.count(emitted) > 0; });
        }
        d = std::move(done.at(emitted));
        done.erase(emitted);
      }
      ++emitted;
      if (!error && !d.error.empty()) error = d.error;
      if (!error && !d.text.empty()) fn(d);
    }
  };
  spark::WorkerPool pool(static_cast<unsigned>(threads));
  git_oid oid;
  int next = 0;
  while (!error && (next = git_revwalk_next(&oid, walk.p)) == 0) {
    Owned<git_commit, git_commit_free> commit;
    Owned<git_tree, git_tree_free> tree, parent_tree;
    if (git_commit_lookup(&commit.p, repo.p, &oid) != 0 || !trees_of(commit.p, tree, parent_tree)) {
      error = last_error("the history");
      break;
    }
    // As git does: a commit whose trees under every prefix are its parent's changed nothing there.
    if (same_under(parent_tree.p, tree.p, prefixes)) continue;
    char hex[GIT_OID_HEXSZ + 1];
    git_oid_tostr(hex, sizeof hex, &oid);
    pool.submit([&, seq = submitted, id = oid, sha = std::string(hex)](unsigned w) {
      Patch out{sha, {}, {}};
      make_patch(w, id, out);
      std::lock_guard lock(m);
      done.emplace(seq, std::move(out));
      cv.notify_all();
    });
    {
      std::lock_guard lock(m);
      ++submitted;
    }
    emit(false);
  }
  if (!error && next != 0 && next != GIT_ITEROVER) error = last_error("the history");
  emit(true);
  pool.wait();
  return error;
}

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
    argv.reserve(all.size() + 1);
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

// The commits `git log --first-parent -- PREFIX` names, oldest first.
std::vector<std::string> git_log_commits(const std::string& repo, const std::string& prefix) {
  std::vector<std::string> out;
  const std::string command = "git -C '" + repo + "' log --reverse --first-parent --format=%H -- '" + prefix + "'";
  if (std::FILE* p = ::popen(command.c_str(), "r")) {
    char line[128];
    while (std::fgets(line, sizeof line, p)) out.emplace_back(line, strnlen(line, sizeof line) - 1);
    ::pclose(p);
  }
  return out;
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
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  git_libgit2_init();
  std::vector<double> spark_s, git_s, git_nr_s;
  long git_rss = 0, git_nr_rss = 0;
  size_t commits = 0, bytes = 0, largest = 0;
  for (int run = 0; run < runs; ++run) {
    // Alternate the order so that neither always runs on a warmer cache.
    const auto walk = [&] {
      commits = bytes = largest = 0;
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::string> shas;
      auto error = for_each_patch(repo_path, {prefix}, [&](const Patch& patch) {
        shas.push_back(patch.sha);
        bytes += patch.text.size();
        largest = std::max(largest, patch.text.size());
      }, threads);
      if (error) {
        std::fprintf(stderr, "%s\n", error->c_str());
        std::exit(1);
      }
      spark_s.push_back(seconds_since(start));
      commits = shas.size();
      if (shas != git_log_commits(repo_path, prefix)) {
        std::fprintf(stderr, "the walk's commits are not the ones git log names for %s\n", prefix.c_str());
        std::exit(1);
      }
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
  std::printf("patch workers: %zu\n", threads);
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
