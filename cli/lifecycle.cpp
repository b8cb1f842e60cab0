// `spark mine`, `spark record`, `spark audit`, `spark hooks`: the miner and the CI lifecycle over the knowledge base.
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "audit_page.h"
#include "audit_site.h"
#include "base/clock.h"
#include "base/http_server.h"
#include "base/text.h"
#include "case_embedding.h"  // index_threads
#include "commands.h"
#include "discover.h"
#include "formats/error_message.h"
#include "git_history.h"
#include "miner.h"
#include "mining_store.h"
#include "queries.h"
#include "recording.h"
#include "store/postgres_db.h"
#include "test_runner.h"

namespace spark::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Result<SyncOptions> sync_options(const HistoryArgs& h) {
  SyncOptions o;
  o.first_parent = !h.all_parents;
  o.sigma = h.sigma;
  o.project = h.project;
  o.test_only_fixes = h.test_only_fixes;
  if (!h.test_code.empty()) {
    auto rule = TestCodeRule::parse(h.test_code);
    TRY(rule);
    o.test_code = std::move(*rule);
  }
  for (const auto& [text, slot] : {std::pair{h.since, &o.since}, std::pair{h.until, &o.until}}) {
    if (text.empty()) continue;
    // A date alone is its midnight, UTC.
    const bool date_only = text.size() == 10 && text[4] == '-' && text[7] == '-';
    auto t = parse_iso8601(date_only ? text + "T00:00:00Z" : text);
    if (!t)
      return fail("--since/--until \"" + text + "\" is neither a date (2023-01-01) nor an ISO-8601 time " +
                  "(2023-01-01T12:00:00Z)");
    *slot = *t;
  }
  return o;
}

std::string plural(size_t n, const std::string& word, const std::string& words = "") {
  return std::to_string(n) + " " + (n == 1 ? word : words.empty() ? word + "s" : words);
}

// The sync's summary on stderr: what was stored, what was settled and how, the rule.
void print_summary(const SyncReport& r, const std::string& verb) {
  for (const auto& w : r.warnings) note(w);
  if (!verb.empty())
    note(verb + " " + plural(r.outcomes, "outcome") + " (new or changed); opened " + plural(r.opened, "failure") +
       (r.closed_flaky ? "; " + plural(r.closed_flaky, "failure") + " closed as flaky (passed at the same commit)"
                       : ""));
  const std::pair<FailureStatus, const char*> order[] = {
      {FailureStatus::labelled, "labelled into the knowledge base"},
      {FailureStatus::quarantined, "quarantined for audit"},
      {FailureStatus::not_test_fault, "fixed outside the test code"},
      {FailureStatus::only_additions, "fixed by additions only"},
      {FailureStatus::mixed_fix, "fixed together with non-test code (--test-only-fixes)"},
      {FailureStatus::missing_file, "without their test file"},
      {FailureStatus::duplicate,
       "the same fault as an earlier failure (the same faulty lines of the same test code, the same fix: counted behind its case)"}};
  std::string settled;
  size_t total = 0;
  for (const auto& [status, text] : order)
    if (auto it = r.settled.find(status); it != r.settled.end() && it->second) {
      settled += (settled.empty() ? "" : ", ") + std::to_string(it->second) + " " + text;
      total += it->second;
    }
  // Open failures are counted by test (one test failing at three commits is one test still failing), with the
  // failures behind them when they are more.
  const bool by_test = r.still_open == r.still_open_tests;
  const std::string of_them = by_test ? " of them" : " of the failures";
  note("settled " + plural(total, "failure") + (settled.empty() ? "" : ": " + settled) + "; " +
       plural(r.still_open_tests, "test") + " still open (" +
       (by_test ? "" : plural(r.still_open, "failure") + " at " + plural(r.still_open_commits, "commit") + "; ") +
       "not fixed yet)" +
       (r.not_on_history ? ", " + std::to_string(r.not_on_history) + of_them + " not on the walked history" : "") +
       (r.unreadable ? ", " + std::to_string(r.unreadable) + of_them +
                           " fixed but left open because a git object could not be read (above: repair the "
                           "repository and run again to label them)"
                     : ""));
  if (!r.shallow_boundary.empty() && (r.beyond_boundary || r.not_on_history)) {
    std::string boundary;
    for (const auto& sha : r.shallow_boundary) boundary += (boundary.empty() ? "" : ", ") + sha.substr(0, 10);
    note("this is a shallow clone: its history starts at " + boundary + "; " +
         (r.beyond_boundary ? plural(r.beyond_boundary, "outcome") + " at commits it does not have were skipped" : "") +
         (r.beyond_boundary && r.not_on_history ? " and " : "") +
         (r.not_on_history ? plural(r.not_on_history, "open failure") + " are at commits it does not walk" : "") +
         ": `git fetch --deepen N` (N commits more) or `git fetch --unshallow` (all of it), then run again");
  }
  note("outlier rule: quarantine above " + r.rule.describe());
  if (r.rule.n > 0 && r.rule.n <= 10 && r.rule.sigma >= 3)
    note("  (with 10 or fewer mined cases no count can lie 3 sd above the mean: the rule starts to bite later)");
  for (const auto& id : r.moved_to_quarantine) note("  moved to quarantine by the recomputed rule: " + id);
  for (const auto& id : r.released) note("  back in the knowledge base by the recomputed rule: " + id);
  if (!r.quarantined_ids.empty() || !r.moved_to_quarantine.empty()) note("review the quarantine with `spark audit`");
}

std::string cases_jsonl(const std::vector<StoredFailure>& failures) {
  std::string out;
  for (const auto& f : failures)
    if (f.labelled) out += json_text(case_to_json(*f.labelled)) + "\n";
  return out;
}

int write_exports(MiningStore& store, const std::string& output, const std::string& quarantine) {
  if (!output.empty()) {
    auto corpus = store.failures(corpus_statuses());
    if (!corpus) return report_error(corpus.error());
    if (int rc = write_output(output, cases_jsonl(*corpus)); rc != 0) return rc;
  }
  if (!quarantine.empty()) {
    auto q = store.failures({FailureStatus::quarantined});
    if (!q) return report_error(q.error());
    if (int rc = write_output(quarantine, cases_jsonl(*q)); rc != 0) return rc;
  }
  return 0;
}

}  // namespace

std::string author_or_default(const std::string& given, const std::string& repo_path) {
  if (!given.empty()) return given;
  if (auto repo = GitRepository::open(repo_path)) {
    std::string a = (*repo)->configured_author();
    if (!a.empty()) return a;
  }
  const char* user = std::getenv("USER");
  return user && *user ? user : "unknown";
}

// ---------------------------------------------------------------------------------------------------------------
// spark mine --discover

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

std::string candidates_jsonl(const std::vector<FixCandidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    json tests = json::array();
    for (const auto& t : c.tests) tests.push_back({{"test_id", t.test_id}, {"file", t.file}, {"why", t.why}});
    out += json_text({{"commit", c.commit.sha},
                      {"parent", c.parent},
                      {"time", format_iso8601(c.commit.time)},
                      {"summary", c.commit.summary},
                      {"tests", tests}}) +
           "\n";
  }
  return out;
}

std::string candidates_text(const std::vector<FixCandidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    out += c.commit.sha.substr(0, 10) + " " + format_iso8601(c.commit.time).substr(0, 10) + " " +
           terminal_line(c.commit.summary) + "\n";
    for (const auto& t : c.tests) out += "  " + terminal_line(t.test_id) + "  (" + t.why + ")\n";
  }
  return out;
}

void note_scan(const std::string& repo, const ScanReport& r, const std::vector<FixCandidate>& candidates,
               bool first_parent) {
  size_t tests = 0;
  for (const auto& c : candidates) tests += c.tests.size();
  note("discover " + repo + ": scanned " + plural(r.commits, "commit") + (first_parent ? " (first-parent)" : "") +
       " in " + seconds_text(r.seconds) + ": " + std::to_string(r.test_changing) + " changed test code, " +
       plural(candidates.size(), "fix candidate") + " with " + plural(tests, "test") + " to run" +
       (r.mixed_skipped ? "; " + std::to_string(r.mixed_skipped) + " left out by --test-only-fixes" : "") +
       (r.additions_only ? "; " + std::to_string(r.additions_only) + " only added test code (nothing to label)" : "") +
       (r.merges_skipped ? "; " + plural(r.merges_skipped, "merge") + " skipped (their sides' commits are walked)"
                         : ""));
  for (const auto& u : r.unreadable) note("  skipped, could not be read: " + u);
  if (!r.too_wide.empty()) {
    note("  " + plural(r.too_wide.size(), "commit") + " left out as too wide (a shared hook, fixture or module-level " +
         "set-up changed; --max-tests-per-commit 0 runs them):");
    for (const auto& w : r.too_wide) note("    " + terminal_line(w));
  }
  if (const std::string hint = all_parents_hint(r); first_parent && !hint.empty()) note("  " + hint);
  if (!r.shallow_boundary.empty()) {
    std::string boundary;
    for (const auto& sha : r.shallow_boundary) boundary += (boundary.empty() ? "" : ", ") + sha.substr(0, 10);
    note("  this is a shallow clone: its history starts at " + boundary + " (" + plural(r.commits, "commit") +
         " seen); `git fetch --deepen N` (N commits more) or `git fetch --unshallow` (all of it), then run again");
  }
}

// What the runs came to, over every candidate.
struct RunTotals {
  size_t candidates = 0, runs = 0, reused = 0, fixes = 0, flaky = 0, fail_at_commit = 0, pass_at_parent = 0;
  size_t gone_at_commit = 0, unrunnable_known = 0;
  std::map<std::string, std::pair<size_t, std::string>> unrunnable;  // reason → (count, an example)
  std::vector<std::string> skipped;                                   // commits that did not check out
  size_t setups = 0;
  double setup_seconds = 0, run_seconds = 0;

  void add(const CandidateRuns& r) {
    ++candidates;
    runs += r.runs;
    reused += r.reused;
    fixes += r.fixes;
    flaky += r.flaky;
    fail_at_commit += r.fail_at_commit;
    pass_at_parent += r.pass_at_parent;
    gone_at_commit += r.gone_at_commit;
    unrunnable_known += r.unrunnable_known;
    for (const auto& [reason, example] : r.unrunnable) {
      auto& slot = unrunnable[reason];
      if (slot.first++ == 0) slot.second = example;
    }
    if (!r.checkout_error.empty()) skipped.push_back(r.checkout_error);
    setups += r.setups;
    setup_seconds += r.setup_seconds;
    run_seconds += r.run_seconds;
  }
};

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

void note_runs(const RunTotals& t, unsigned confirm) {
  note("discover: ran " + plural(t.runs, "test run") + " (" + std::to_string(t.reused) +
       " more outcomes reused from the store) in " + seconds_text(t.run_seconds) + " of run time: " +
       plural(t.fixes, "fix", "fixes") + " (failed at the parent " + std::to_string(confirm + 1) +
       " times, passed at the commit), " + std::to_string(t.flaky) +
       " flaky (passed at the parent when run again: never a case), " + std::to_string(t.fail_at_commit) +
       " failed at the commit too, " + std::to_string(t.pass_at_parent) + " passed at the parent" +
       (t.gone_at_commit ? ", " + std::to_string(t.gone_at_commit) + " removed or renamed by the commit" : ""));
  size_t unrunnable = 0;
  for (const auto& [reason, slot] : t.unrunnable) unrunnable += slot.first;
  if (unrunnable) {
    note("discover: " + plural(unrunnable, "test") + " could not run (never a case)" +
         (t.unrunnable_known ? ", " + std::to_string(t.unrunnable_known) + " of them known from the store" : "") +
         (t.unrunnable_known ? " (--retry-unrunnable runs them again)" : "") + ", by reason:");
    for (const auto& [reason, slot] : t.unrunnable)
      note("  " + std::to_string(slot.first) + "  " + terminal_line(reason) + "  (e.g. " + terminal_line(slot.second) +
           ")");
  }
  for (const auto& s : t.skipped) note("discover: candidate skipped: " + terminal_line(s));
  if (t.setups)
    note("discover: work trees: " + std::to_string(t.setups) + " made, " +
         fixed(1000 * t.setup_seconds / static_cast<double>(t.setups), 1) + " ms each on average");
}

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
  note_runs(totals, d.confirm);
  // The failures found lie at the parents of the walked commits, which a time range can leave out.
  SyncOptions labelling = options;
  labelling.since.reset();
  labelling.until.reset();
  auto report = store.sync(repo, {}, labelling);
  if (!report) return report_error(report.error());
  print_summary(*report, "");
  return 0;
}

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
    note_scan(path, scanned, *candidates, options->first_parent);
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

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// spark mine

int cmd_mine(const Common& common, const MineArgs& given) {
  if (given.discover) return cmd_discover(common, given);
  if (given.history.repos.size() > 1) return usage_error("--repo may be given several times only with --discover");
  MineArgs args = given;
  if (!given.history.repos.empty()) args.history.repo = given.history.repos.front();
  if (args.dry_run || args.jobs != 1 || !args.shard.empty() || args.retry_unrunnable || args.max_tests != 100)
    return usage_error("--dry-run, -j, --shard, --max-tests-per-commit and --retry-unrunnable go with --discover");
  if (args.run.empty() == args.outcomes.empty()) {
    return usage_error(
        "give --outcomes FILE... (recorded outcomes) or --run \"CMD {test_id}\" --test ID --from SHA (run the tests "
        "to find the fix), not both");
  }
  if (!args.run.empty() && (args.tests.empty() || args.from.empty())) {
    return usage_error("--run needs the failing tests (--test ID) and the commit they fail at (--from)");
  }
  if (!args.run.empty() && args.run.find("{test_id}") == std::string::npos &&
      args.run.find("{tests}") == std::string::npos) {
    return usage_error("--run: the command must name the test with {test_id}");
  }
  auto repo = GitRepository::open(args.history.repo);
  if (!repo) return report_error(repo.error());
  auto options = sync_options(args.history);
  if (!options) return report_error(options.error());
  std::vector<RecordedOutcome> outcomes;
  for (const auto& file : args.outcomes) {
    std::vector<std::string> warnings;
    auto read =
        file.ends_with(".xml") ? read_outcomes_junit(file, args.commit, **repo, &warnings) : read_outcomes_jsonl(file);
    for (const auto& w : warnings) note(w);
    if (!read) return report_error(read.error());
    for (auto& o : *read) outcomes.push_back(std::move(o));
  }
  if (!args.run.empty()) {
    options->tip = args.to;
    BisectOptions bisect;
    bisect.command = args.run;
    bisect.timeout = args.timeout;
    bisect.first_parent = options->first_parent;
    bisect.progress = [](const std::string& line) { note("run: " + line); };
    for (const auto& test : args.tests) {
      auto found = bisect_fix(**repo, test, args.from, args.to, bisect);
      if (!found) return report_error(found.error());
      note(test + ": " +
           (found->fix ? "first passing commit " + found->fix->substr(0, 10) : "no fix (" + found->note + ")") +
           " after " + plural(found->runs, "run") +
           (found->flaky ? "; FLAKY: the range is not monotonic, found by a "
                           "linear scan"
                         : ""));
      for (auto& o : found->outcomes) outcomes.push_back(std::move(o));
    }
  }
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  MiningStore store(**kb);
  auto report = store.sync(**repo, outcomes, *options);
  if (!report) return report_error(report.error());
  print_summary(*report, "stored");
  return write_exports(store, args.output, args.quarantine);
}

// ---------------------------------------------------------------------------------------------------------------
// spark record

namespace {

// Seconds `spark record` keeps trying a server store that cannot be reached (SPARK_KB_RETRY_SECONDS).
double retry_budget() { return std::max(0.0, std::atof(environment_setting("SPARK_KB_RETRY_SECONDS").c_str())); }

// Stores a report's outcomes (recording.h's store_report) and says what was stored; the exit code. `snapshots`: the
// files the store's sync read of the report's failures.
int store_recorded(const Common& common, const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                   const SyncOptions& options, std::vector<FailureSnapshot>& snapshots) {
  RecordingStore where;
  where.open = [&] { return open_kb(common, true); };
  where.server = is_postgres_url(common.kb_dir);
  where.local_dir = common.local_dir;
  where.retry_seconds = retry_budget();
  auto stored = store_report(where, repo, outcomes, options, [](const std::string& n) { note(n); });
  if (!stored) return report_error(stored.error());
  print_summary(stored->sync, "recorded");
  if (stored->spooled_reports > 0)
    note("stored " + std::to_string(stored->spooled_reports) + " spooled report(s) (" +
         std::to_string(stored->spooled_outcomes) + " outcome(s)) with this one");
  if (stored->attempts > 1) note("stored after " + std::to_string(stored->attempts) + " attempts");
  snapshots = std::move(stored->sync.snapshots);
  return 0;
}

// Open failures whose test no longer exists at the recorded commit are expired, each with a note; a failure here
// only costs the notes (the outcomes are stored).
void expire_recorded(const Common& common, const GitRepository& repo, const std::string& commit) {
  const auto notes = [&]() -> Result<std::vector<std::string>> {
    auto kb = open_kb(common, false);
    TRY(kb);
    return expire_gone_failures(**kb, repo, commit);
  }();
  if (!notes) return note("open failures were not checked for tests that are gone: " + notes.error().message);
  for (const auto& n : *notes) note(n);
}

// A report run in a work tree that differs from HEAD: its outcomes are the work tree's, not HEAD's, so nothing is
// stored (a failure of an edit would be HEAD's failure, closed as flaky by HEAD's next pass, and learnt from HEAD's
// lines). The failures are localized as the work tree has them, as `spark localize --junit` does.
int record_work_tree(const Common& common, const RecordArgs& args, const GitRepository& repo,
                     const std::string& head, const std::vector<std::string>& changed) {
  std::string named;
  for (size_t i = 0; i < changed.size() && i < 3; ++i) named += (i ? ", " : "") + changed[i];
  if (changed.size() > 3) named += " and " + std::to_string(changed.size() - 3) + " more";
  note("recorded nothing: the work tree differs from HEAD " + head.substr(0, 10) + " (" + named +
       "), so these outcomes are not HEAD's; commit, then run the tests again to record them" +
       (args.localize ? " (the failures are localized as the work tree has them)" : ""));
  if (!args.localize) return 0;
  LocalizeArgs localize_args = args.localize_args;
  localize_args.junit = args.junit;
  localize_args.root = repo.workdir().string();
  localize_args.commit.clear();  // the work tree
  std::vector<std::string> notes;
  auto queries = queries_from_junit(localize_args.junit, localize_args.root, localize_args.test_id, notes);
  for (const auto& n : notes) note(n);
  if (!queries) return report_error(queries.error());
  if (queries->empty()) {
    if (localize_args.format == "json") std::printf("[]\n");
    return 0;
  }
  return localize_queries(common, localize_args, *queries, true);
}

}  // namespace

int cmd_record(const Common& common, const RecordArgs& args) {
  auto repo = GitRepository::open(args.history.repo);
  if (!repo) return report_error(repo.error());
  auto commit = (*repo)->resolve(args.commit.empty() ? "HEAD" : args.commit);
  if (!commit) return report_error(commit.error());
  std::vector<std::string> warnings;
  auto outcomes = read_outcomes_junit(args.junit, *commit, **repo, &warnings);
  if (!outcomes) {
    for (const auto& w : warnings) note(w);
    return report_error(outcomes.error());
  }
  auto options = sync_options(args.history);
  if (!options) return report_error(options.error());
  // Outcomes recorded at HEAD are HEAD's only when the work tree they ran in is HEAD's.
  if (auto head = (*repo)->resolve("HEAD"); head && *head == *commit) {
    auto changed = work_tree_changes(**repo, *head, *outcomes);
    if (!changed)
      note("the work tree could not be compared with HEAD (" + changed.error().message +
           "): the outcomes are recorded as HEAD's");
    else if (!changed->empty())
      return record_work_tree(common, args, **repo, *head, *changed);
  }
  for (const auto& w : warnings) note(w);
  options->tip = *commit;
  options->snapshot = true;
  std::vector<FailureSnapshot> snapshots;
  if (const int stored = store_recorded(common, **repo, *outcomes, *options, snapshots); stored != 0) return stored;
  expire_recorded(common, **repo, *commit);
  // When nothing is localized below, the ranker still learns from the cases this run labelled (localize does it else).
  if (!args.localize) {
    keep_ranker_learning(common);
    return 0;
  }
  // This report's failures, localized at once: test code from git objects at the commit, as recorded.
  std::vector<std::string> notes;
  const std::vector<Case> queries = recorded_queries(**repo, *commit, *outcomes, options->test_code, snapshots, notes);
  snapshots.clear();
  snapshots.shrink_to_fit();
  for (const auto& n : notes) note(n);
  if (queries.empty()) {
    if (args.localize_args.format == "json") std::printf("[]\n");
    keep_ranker_learning(common);
    return 0;
  }
  // The outcomes are stored by now: whatever ends the localizing (an error, or an exception main would report
  // without this context), the run says so.
  int localized = 1;
  try {
    // The repository recorded (`--repo`) is the one the triage reads: its commits' times, its own modules.
    LocalizeArgs localize_args = args.localize_args;
    localize_args.root = (*repo)->workdir().string();
    localize_args.commit = *commit;
    localized = localize_queries(common, localize_args, queries, true);
  } catch (const std::exception& e) {
    report_error(Error{e.what()});
  }
  if (localized != 0) note("the outcomes were recorded (see the summary above); only localizing the failures failed");
  return localized;
}

// ---------------------------------------------------------------------------------------------------------------
// spark audit

namespace {

std::string colorize(const std::string& patch, bool color) {
  if (!color) return patch;
  std::string out;
  for (std::string_view line : split_lines(patch)) {
    const char* c = line.starts_with("@@")                               ? "\033[36m"
                    : line.starts_with("---") || line.starts_with("+++") ? "\033[1m"
                    : line.starts_with("-")                              ? "\033[31m"
                    : line.starts_with("+")                              ? "\033[32m"
                                                                         : nullptr;
    out += c ? std::string(c) + std::string(line) + "\033[0m\n" : std::string(line) + "\n";
  }
  return out;
}

// "tests/test_a.py: 3, 7-9; tests/helpers.py: 2"
std::string lines_text(const std::vector<LineRef>& lines) {
  std::string out, path;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].path != path) {
      path = lines[i].path;
      out += (out.empty() ? "" : "; ") + path + ": ";
    } else {
      out += ", ";
    }
    size_t j = i;
    while (j + 1 < lines.size() && lines[j + 1].path == path && lines[j + 1].line == lines[j].line + 1) ++j;
    out += std::to_string(lines[i].line) + (j > i ? "-" + std::to_string(lines[j].line) : "");
    i = j;
  }
  return out;
}

}  // namespace

namespace {

// --html: the page shows messages and code and is meant to be shared: made from redacted copies unless redaction is
// off.
Status write_audit_html(const Common& common, const AuditArgs& args, const std::vector<StoredFailure>& list,
                        const OutlierRule& rule, const KnowledgeBase& kb) {
  std::vector<StoredFailure> shown;
  if (common.redactor) {
    shown = list;
    std::map<std::string, size_t> counts;
    size_t n = 0;
    for (auto& f : shown) {
      n += common.redactor->redact(f.message, counts);
      if (f.labelled) n += redact_case(*f.labelled, *common.redactor, counts);
      for (auto& file : f.fixed_files) n += common.redactor->redact(file.content, counts);
    }
    if (n) note("redacted " + std::to_string(n) + " secret(s) from the HTML report");
  }
  return write_file_atomic(args.html, audit::audit_html(common.redactor ? shown : list, rule, kb.dir().string()));
}

// `spark audit list`: the quarantine (every mined case with --all), as text or JSON, and the HTML page.
int audit_list(const Common& common, const AuditArgs& args, KnowledgeBase& kb, MiningStore& store) {
  std::vector<FailureStatus> statuses = {FailureStatus::quarantined};
  if (args.all) statuses = mined_statuses();
  auto list = store.failures(statuses);
  if (!list) return report_error(list.error());
  auto rule = store.rule(args.sigma);
  if (!rule) return report_error(rule.error());
  if (!args.html.empty())
    if (auto w = write_audit_html(common, args, *list, *rule, kb); !w) return report_error(w.error());
  if (args.format == "json") {
    json j = {{"schema", "spark.audit/1"},
              {"rule",
               {{"n", rule->n},
                {"mean", rule->mean},
                {"sd", rule->sd},
                {"sigma", rule->sigma},
                {"threshold", rule->threshold}}},
              {"cases", json::array()}};
    for (const auto& f : *list) j["cases"].push_back(audit::failure_json(f));
    return write_output("", json_text(j, 2) + "\n");
  }
  std::string out = "outlier rule: quarantine above " + rule->describe() + "\n";
  if (list->empty()) out += args.all ? "no mined cases\n" : "the quarantine is empty\n";
  for (const auto& f : *list) {
    char line[512];
    std::snprintf(line, sizeof line, "%-34s %-11s %4s lines  %s  %.10s..%.10s", f.case_id.c_str(),
                  status_name(f.status).c_str(), f.faulty_count ? std::to_string(*f.faulty_count).c_str() : "-",
                  f.test_id.c_str(), f.commit.c_str(), f.fixed_commit.c_str());
    out += line;
    if (f.decided_at) out += "  [" + f.decided_by + ", " + audit::date_text(f.decided_at) + "]";
    if (const size_t n = audit::occurrences_of(f).value("count", size_t{1}); n > 1)
      out += "  (failed at " + std::to_string(n) + " commits)";
    out += "\n";
  }
  return write_output("", terminal_lines(out));
}

// `spark audit show ID`: the case, where it failed, who decided it, and its fix's diff.
int audit_show(const AuditArgs& args, MiningStore& store) {
  auto f = store.failure_by_case(args.id);
  if (!f) return report_error(f.error());
  std::string out = f->case_id + "  " + status_name(f->status) + "\n  test:     " + f->test_id +
                    "\n  failing:  " + f->commit + "\n  fix:      " + f->fixed_commit + "\n  faulty lines: ";
  if (f->labelled) out += lines_text(f->labelled->faulty_lines);
  out += "\n";
  if (const json o = audit::occurrences_of(*f); o.value("count", 1) > 1)
    out += "  failed at " + std::to_string(o.value("count", 1)) + " commits, " +
           o.value("first_commit", "").substr(0, 10) + " (" + o.value("first_time", "?") + ") to " +
           o.value("last_commit", "").substr(0, 10) + " (" + o.value("last_time", "?") + ")\n";
  if (f->decided_at)
    out += "  decided:  " + f->decided_by + ", " + audit::date_text(f->decided_at) +
           (f->reason.empty() ? "" : ": " + f->reason) + "\n";
  out = terminal_lines(out) + "\n";
  const bool color = args.color == "always" || (args.color == "auto" && ::isatty(STDOUT_FILENO));
  for (const auto& d : audit::diff_files(*f)) {
    auto patch = unified_diff(d.before, d.after, d.path, 3);
    if (!patch) return report_error(patch.error());
    out += colorize(terminal_lines(*patch), color);
  }
  return write_output("", out);
}

// `spark audit accept | reject | trim ID`: the decision stored, and said.
int audit_decide(const AuditArgs& args, MiningStore& store) {
  const Decision decision = args.action == "accept"   ? Decision::accept
                            : args.action == "reject" ? Decision::reject
                                                      : Decision::trim;
  std::vector<LineRef> keep;
  if (decision == Decision::trim) {
    auto f = store.failure_by_case(args.id);
    if (!f) return report_error(f.error());
    auto parsed = audit::parse_keep(args.keep, audit::test_file_of(*f));
    if (!parsed) return report_error(parsed.error());
    keep = std::move(*parsed);
  }
  auto decided = store.decide(args.id, decision, author_or_default(args.author, args.repo), args.reason, keep);
  if (!decided) return report_error(decided.error());
  note(decided->case_id + ": " + status_name(decided->status) + " by " + decided->decided_by +
       (decision == Decision::reject
            ? " (kept out of the knowledge base)"
            : " (in the knowledge base with " + plural(decided->labelled->faulty_lines.size(), "faulty line") + ")"));
  return 0;
}

// `spark audit serve`: the audit in a browser (miner/audit_site.h) on 127.0.0.1, until Ctrl-C or SIGTERM. Prints the
// address, with its token, and nothing else on stdout.
int audit_serve(const AuditArgs& args, KnowledgeBase& kb, MiningStore& store) {
  // The stop signals are blocked in every thread (the server's workers inherit the mask); one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, s);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::error_code ec;
  AuditSiteOptions options{new_audit_token(), 0, author_or_default(args.author, args.repo), args.sigma,
                           fs::absolute(kb.dir(), ec).string()};
  std::unique_ptr<AuditSite> site;  // made once the port is known; no request is read before serve()
  auto server = HttpServer::bind("127.0.0.1", args.port, [&site](const HttpRequest& r) { return site->handle(r); });
  if (!server) return report_error(server.error());
  options.port = (*server)->port();
  site = std::make_unique<AuditSite>(store, options);
  std::fputs((site->url() + "\n").c_str(), stdout);
  std::fflush(stdout);
  note("the audit of " + options.kb + " is served on 127.0.0.1 only, to whoever has the address above; Ctrl-C stops");
  std::atomic<bool> served_out{false};
  std::thread waiter([&] {
    while (!served_out) {
      const timespec tick{0, 200'000'000};
      if (sigtimedwait(&stop_signals, nullptr, &tick) > 0) {
        (*server)->stop();
        return;
      }
    }
  });
  const auto served = (*server)->serve();
  served_out = true;
  waiter.join();
  if (!served) return report_error(served.error());
  note("stopped");
  return 0;
}

}  // namespace

int cmd_audit(const Common& common, const AuditArgs& args) {
  const bool needs_id = args.action != "list" && args.action != "serve";
  if (needs_id && args.id.empty()) return usage_error("audit " + args.action + ": give the case id");
  if (args.action == "trim" && args.keep.empty())
    return usage_error("audit trim: give the true faulty lines with --keep");
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  MiningStore store(**kb);
  if (args.action == "list") return audit_list(common, args, **kb, store);
  if (args.action == "show") return audit_show(args, store);
  if (args.action == "serve") return audit_serve(args, **kb, store);
  return audit_decide(args, store);
}

// ---------------------------------------------------------------------------------------------------------------
// spark hooks

namespace {

constexpr const char* kHookMarker = "# spark post-commit hook";

std::string hook_script(const std::string& spark) {
  return std::string("#!/bin/sh\n") + kHookMarker +
         " (installed by `spark hooks install`; `spark hooks uninstall` removes it)\n"
         "# Runs the hook that was here before, then re-runs the tests with open failures and records the outcome.\n"
         "hook_dir=$(dirname \"$0\")\n"
         "status=0\n"
         "if [ -x \"$hook_dir/post-commit.spark-chained\" ]; then\n"
         "  \"$hook_dir/post-commit.spark-chained\" \"$@\" || status=$?\n"
         "fi\n"
         "spark=" +
         shell_quote(spark) +
         "\n"
         "[ -x \"$spark\" ] || spark=spark\n"
         "\"$spark\" hooks post-commit || echo \"spark: post-commit hook failed (the commit is made)\" >&2\n"
         "exit $status\n";
}

// What the installed hook will do after each commit, and what it will not without record.test_command.
void note_hook_does(const HooksArgs& args) {
  if (args.test_command.empty())
    note("record.test_command is not set: after each commit the hook only counts the tests with open failures; it "
         "re-runs and records nothing until SPARK_TEST_COMMAND, ~/.config/spark/config.toml or a .spark.toml you "
         "trusted (`spark trust`) sets it (e.g. [record] test_command = \"python3 -m pytest --junitxml={junit} "
         "{tests}\")");
  else
    note("after each commit the hook re-runs the tests with open failures (" + terminal_line(args.test_command) +
         ") and records their outcomes at the new commit (not when the work tree differs from it)");
}

int hooks_install(const HooksArgs& args, const GitRepository& repo) {
  const fs::path dir = repo.hooks_dir();
  const fs::path hook = dir / "post-commit", chained = dir / "post-commit.spark-chained";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (path_exists(hook)) {
    auto text = read_file(hook);
    if (!text) return report_error(text.error());
    if (text->find(kHookMarker) != std::string::npos) {
      // Installed already: rewrite (the spark path may have changed), keep what is chained.
      if (auto w = write_file_atomic(hook, hook_script(args.spark_path)); !w) return report_error(w.error());
      ::chmod(hook.c_str(), 0755);
      note("post-commit hook already installed in " + dir.string() + " (refreshed)");
      note_hook_does(args);
      return 0;
    }
    if (path_exists(chained))
      return report_error(Error{chained.string() + " exists already and " + hook.string() +
                                " is not spark's: move one of them away first"});
    fs::rename(hook, chained, ec);
    if (ec) return report_error(Error{hook.string() + ": cannot move to " + chained.string() + ": " + ec.message()});
    note("kept your post-commit hook as " + chained.string() + "; spark's hook runs it first");
  }
  if (auto w = write_file_atomic(hook, hook_script(args.spark_path)); !w) return report_error(w.error());
  ::chmod(hook.c_str(), 0755);
  note("installed " + hook.string());
  note_hook_does(args);
  return 0;
}

int hooks_uninstall(const GitRepository& repo) {
  const fs::path dir = repo.hooks_dir();
  const fs::path hook = dir / "post-commit", chained = dir / "post-commit.spark-chained";
  auto text = read_file(hook);
  if (!text || text->find(kHookMarker) == std::string::npos) {
    note("no spark post-commit hook in " + dir.string());
    return 0;
  }
  std::error_code ec;
  fs::remove(hook, ec);
  if (path_exists(chained)) fs::rename(chained, hook, ec);
  if (ec) return report_error(Error{hook.string() + ": " + ec.message()});
  note("removed spark's post-commit hook" + std::string(path_exists(hook) ? "; your earlier hook is back" : ""));
  return 0;
}

// After a commit: the tests with open failures run again (record.test_command), and their outcomes are recorded.
int hooks_post_commit(const Common& common, const HooksArgs& args, const GitRepository& repo) {
  if (!kb_exists(common)) return 0;  // nothing recorded yet
  std::vector<std::string> tests;
  {
    auto kb = open_kb(common, false);
    if (!kb) return report_error(kb.error());
    std::vector<std::string> notes;
    auto targets = rerun_targets(**kb, repo.workdir(), notes);
    for (const auto& n : notes) note(n);
    if (!targets) return report_error(targets.error());
    tests = std::move(*targets);
  }
  if (tests.empty()) return 0;
  if (args.test_command.empty()) {
    note(plural(tests.size(), "test") +
         " with open failures; set record.test_command (SPARK_TEST_COMMAND, ~/.config/spark/config.toml, or a "
         ".spark.toml you trusted with `spark trust`; e.g. \"python3 -m pytest --junitxml={junit} {tests}\") to "
         "re-run them after each commit");
    return 0;
  }
  auto made = make_temp_dir("spark-hook");
  if (!made) return report_error(made.error());
  const fs::path tmp = *made;
  const fs::path junit = tmp / "report.xml";
  note("re-running " + plural(tests.size(), "test") + " with open failures");
  auto run = run_command(expand_command(args.test_command, tests, junit.string()), repo.workdir(), args.timeout);
  int rc = 0;
  if (!run) {
    rc = report_error(run.error());
  } else if (!path_exists(junit)) {
    rc = report_error(Error{"record.test_command wrote no JUnit report to {junit} (" + run->describe() + "):\n" +
                            run->output.substr(run->output.size() > 2000 ? run->output.size() - 2000 : 0)});
  } else {
    RecordArgs record;
    record.history = args.history;
    record.history.repo = repo.workdir().string();
    record.junit = junit.string();
    record.localize = false;
    rc = cmd_record(common, record);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return rc;
}

}  // namespace

int cmd_hooks(const Common& common, const HooksArgs& args) {
  auto repo = GitRepository::open(args.repo);
  if (!repo) return report_error(repo.error());
  if (args.action == "install") return hooks_install(args, **repo);
  if (args.action == "uninstall") return hooks_uninstall(**repo);
  return hooks_post_commit(common, args, **repo);
}

}  // namespace spark::cli
