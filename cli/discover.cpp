// `spark mine --discover`: the scan for fix candidates, the runs at each candidate and its parent (miner/discover.h),
// their progress and totals on stderr, and the sync that labels the fixes found.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/text.h"
#include "case_embedding.h"  // index_threads
#include "discover.h"
#include "discover_report.h"
#include "git_history.h"
#include "mine.h"
#include "runner.h"

namespace spark::cli {

using nlohmann::json;

namespace {

Result<std::pair<unsigned, unsigned>> parse_shard(const std::string& text) {
  if (text.empty()) return std::pair{0u, 1u};
  unsigned i = 0, n = 0;
  const char* end = text.data() + text.size();
  const auto first = std::from_chars(text.data(), end, i);
  const bool slash = first.ec == std::errc() && first.ptr != end && *first.ptr == '/';
  const auto second = slash ? std::from_chars(first.ptr + 1, end, n) : first;
  if (!slash || second.ec != std::errc() || second.ptr != end || n == 0 || i == 0 || i > n || n > 100000)
    return fail("--shard \"" + text + "\": give I/N with 1 <= I <= N (this runner's share: 1/4 .. 4/4)");
  return std::pair{i - 1, n};
}

// One progress line, after each test: on a terminal rewritten in place, else at most every 10 seconds. The time left
// is estimated from the tests done (a candidate can hold hundreds).
class Progress {
 public:
  explicit Progress(const std::vector<FixCandidate>& candidates) : tty_(::isatty(STDERR_FILENO)) {
    for (const auto& c : candidates) tests_ += c.tests.size();
  }
  void tested(const CandidateRuns& r) {
    ++done_;
    auto& [seen, unrunnable] = runs_of_[r.candidate];
    runs_ += r.runs - seen;
    seen = r.runs;
    unrunnable_ += r.unrunnable.size() - unrunnable;
    unrunnable = r.unrunnable.size();
    if (!r.unrunnable.empty()) last_reason_ = r.unrunnable.back().first;
    show(false);
  }
  void candidate_done(const RunTotals& t) {
    candidates_ = t.candidates;
    fixes_ = t.fixes;
    show(done_ == tests_);
  }
  // Ends a terminal's line that an early stop left open.
  void finish() {
    if (tty_ && done_ != tests_) std::fputc('\n', stderr);
  }

 private:
  void show(bool last) {
    const double elapsed = seconds_since(start_);
    if (!tty_ && !last && elapsed - shown_ < 10) return;
    shown_ = elapsed;
    const double eta =
        done_ ? elapsed / static_cast<double>(done_) * static_cast<double>(tests_ - std::min(done_, tests_)) : 0;
    const std::string line = "spark: discover: " + std::to_string(done_) + "/" + std::to_string(tests_) +
                             " tests, " + std::to_string(candidates_) + " candidates done, " + plural(runs_, "run") +
                             ", " + plural(fixes_, "fix", "fixes") +
                             (unrunnable_ ? ", " + std::to_string(unrunnable_) + " could not run (last: " +
                                                terminal_line(last_reason_.substr(0, 80)) + ")"
                                          : std::string()) +
                             ", " + seconds_text(elapsed) + (last ? "" : ", ETA " + seconds_text(eta));
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), last ? "\n" : "");
    else
      std::fprintf(stderr, "%s\n", line.c_str());
  }

  bool tty_;
  size_t tests_ = 0, done_ = 0, runs_ = 0, candidates_ = 0, fixes_ = 0, unrunnable_ = 0;
  std::string last_reason_;                                            // the latest could-not-run's reason
  std::map<const FixCandidate*, std::pair<size_t, size_t>> runs_of_;  // (runs, could-not-run) counted so far
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double shown_ = -1e9;
};

// The runs of one repository's candidates, then the sync that labels the fixes they found.
int discover_in(const GitRepository& repo, const std::vector<FixCandidate>& candidates, const MineArgs& args,
                const SyncOptions& options, KnowledgeBase& kb) {
  MiningStore store(kb);
  DiscoverOptions d;
  d.command = args.run;
  d.timeout = args.timeout;
  d.jobs = args.jobs;
  d.retry_unrunnable = args.retry_unrunnable;
  RunTotals totals;
  Progress progress(candidates);
  DiscoverStore callbacks;
  callbacks.stored = [&](const std::string& sha) { return store.outcomes_at(sha); };
  callbacks.confirmed = [&](const std::string& sha, const std::string& test) { return store.has_failure(sha, test); };
  callbacks.store = [&](const CandidateRuns& r) -> Status {
    auto stored = store.store_outcomes(repo, r.outcomes, options);
    TRY(stored);
    return {};
  };
  callbacks.tested = [&](const CandidateRuns& r) { progress.tested(r); };
  callbacks.done = [&](const CandidateRuns& r) {
    totals.add(r);
    progress.candidate_done(totals);
  };
  const Status ran = discover_fixes(repo.workdir(), candidates, d, callbacks);
  progress.finish();
  if (const int signal = stop_signal_caught()) {
    note(ran ? "discover: stopped by " + signal_name(signal) : ran.error().message);
    note("discover: the tests decided before it are stored; the same command continues where it stopped");
    return 128 + signal;
  }
  if (!ran) return report_error(ran.error());
  for (const auto& n : run_notes(totals, d.confirm)) note(n);
  // The failures found lie at the parents of the walked commits, which a time range can leave out.
  SyncOptions labelling = options;
  labelling.since.reset();
  labelling.until.reset();
  auto report = store.sync(repo, {}, labelling);
  if (!report) return report_error(report.error());
  print_summary(*report, "");
  return 0;
}

}  // namespace

int cmd_discover(const Common& common, const MineArgs& args) {
  if (!args.outcomes.empty() || !args.tests.empty() || !args.from.empty())
    return usage_error("--discover finds the failures itself: no --outcomes, --test or --from with it");
  if (args.run.empty() && !args.dry_run)
    return usage_error("--discover needs --run \"CMD {test_id}\": the command that runs one test");
  if (!args.run.empty() && !names_a_test(args.run))
    return usage_error("--run: the command must name the test with {test_id} or {file} (and {function}, {class})");
  auto shard = parse_shard(args.shard);
  if (!shard) return usage_error(shard.error());
  auto options = sync_options(args.history);
  if (!options) return report_error(options.error());
  std::unique_ptr<KnowledgeBase> kb;
  if (!args.dry_run) {
    auto opened = open_kb(common, true);
    if (!opened) return report_error(opened.error());
    kb = std::move(*opened);
  }
  const std::vector<std::string> repos = args.history.repos.empty() ? std::vector<std::string>{"."}
                                                                    : args.history.repos;
  std::string listed;
  for (const auto& path : repos) {
    auto repo = GitRepository::open(path);
    if (!repo) return report_error(repo.error());
    if ((*repo)->root_commit().empty())
      return report_error(fail(path + ": the repository has no commits: nothing to discover").error());
    ScanOptions scan{options->first_parent, options->since, options->until, options->test_only_fixes,
                     options->test_code, shard->first, shard->second, args.max_tests, index_threads(0)};
    ScanReport scanned;
    auto candidates = scan_fix_candidates(**repo, scan, scanned);
    if (!candidates) return report_error(candidates.error());
    for (const auto& n : scan_notes(path, scanned, *candidates, options->first_parent)) note(n);
    if (args.dry_run) {
      listed += args.output.empty() ? candidates_text(*candidates) : candidates_jsonl(*candidates);
      continue;
    }
    // A stop signal ends the runs under way, their processes and work trees, then spark as the signal would.
    int rc = 0;
    {
      StopSignals stop;
      rc = discover_in(**repo, *candidates, args, *options, *kb);
    }
    if (const int signal = stop_signal_caught()) {
      kb.reset();
      end_by_signal(signal);
    }
    if (rc != 0) return rc;
  }
  if (args.dry_run) return write_output(args.output.empty() ? "" : args.output, listed);
  MiningStore store(*kb);
  return write_exports(store, args.output, args.quarantine);
}

}  // namespace spark::cli
