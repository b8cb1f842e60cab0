// Cold start: labelled cases from a history that never recorded a test outcome (`spark mine --discover`).
//
// 1. The scan (no runs): every commit of the walked history that changes test code is a fix candidate; the tests it
//    can have fixed are those whose own lines it removed or modified, those that reach a changed fixture, helper or
//    set-up (the static scope, scope.h), those of a file importing a changed helper module, and, where a changed
//    line lies outside every test's reach (module-level code), every test of that file.
// 2. The runs: each candidate test runs at the commit's parent and, when it failed there, at the commit, in throw-away
//    work trees (never the user's). Failed at the parent and passed at the commit, and failed again at the parent on
//    `confirm` more runs, is a fix: the pair is stored as recorded outcomes that open a failure, and the miner's sync
//    labels it as any recorded failure. Every other run is stored too (a failure that opens nothing), so no
//    (commit, test) runs twice; a run that could not run the test (classify_run's `environment`, a timeout) is stored
//    as `skipped` with its reason and never becomes a case.
// Contract: the scan reads git objects only. discover_fixes runs `jobs` candidates at once, each worker with its own
// repository handle and two work-tree folders it empties and fills again per candidate; the store callbacks are
// called from one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "miner/git_history.h"
#include "miner/miner.h"

namespace spark {

// A test a candidate commit can have fixed, and why it is one.
struct CandidateTest {
  std::string test_id;   // pytest node id (parameterless), com.x.FooTest#testBar, tests/x.test.js > suite > case
  std::string file;      // its file's repository path
  std::string function;  // its function's name (a JavaScript test's title)
  std::string klass;     // its class (Java: fully qualified; Python: the class path "A::B"; JS: the suites)
  std::string why;       // "own lines", "reaches a changed line of tests/conftest.py", ...
  int start = 0, end = 0;  // its function's lines in the file as scanned (decorators included)
};

struct FixCandidate {
  CommitInfo commit;
  std::string parent;  // the first parent's sha
  std::vector<CandidateTest> tests;
};

struct ScanOptions {
  bool first_parent = true;
  std::optional<int64_t> since, until;
  bool test_only_fixes = false;  // a commit that also changed non-test files is no candidate
  TestCodeRule test_code;
  unsigned shard = 0, shards = 1;  // this runner's part of the commits (shard_of)
  // A commit whose change reaches more tests than this (a shared hook or module-level set-up changed) is left out
  // and named in ScanReport::too_wide; 0: no bound.
  size_t max_tests = 100;
  unsigned threads = 1;  // commits read at once (each worker with its own repository handle)
};

struct ScanReport {
  size_t commits = 0;              // commits walked (in this shard)
  size_t test_changing = 0;        // of them, commits that changed test code
  size_t mixed_skipped = 0;        // left out by test_only_fixes
  size_t additions_only = 0;       // test-code changes that removed or modified no line of a test file's old version
  size_t merges_skipped = 0;       // --all-parents: merge commits (their changes are their side's commits)
  std::vector<std::string> unreadable;  // commits whose objects could not be read, each named with the reason
  std::vector<std::string> too_wide;    // commits left out by max_tests, each named with its count
  std::vector<std::string> shallow_boundary;
  // A first-parent walk: the merge commits on its line, and the commits of their side branches it does not walk (in
  // the same time bounds). A test broken and fixed on a side branch is seen only by --all-parents.
  size_t merges_on_line = 0, side_commits = 0;
  double seconds = 0;
};

// The hint a first-parent scan of a merge-heavy history gives ("" when none): when the side branches hold at least a
// quarter of the history's commits, how many, and that --all-parents walks them.
std::string all_parents_hint(const ScanReport& report);

// Which of `shards` runners takes commit `sha` (0-based): by the sha's first 8 hex digits, so every runner of a
// history agrees whatever range it walks.
unsigned shard_of(const std::string& sha, unsigned shards);

// The tests of one test file, in the ids their runners print: Python functions named test* at module level or in
// classes named Test*; Java methods annotated @Test (and the other JUnit test annotations); JavaScript/TypeScript
// test(...)/it(...) callbacks.
std::vector<CandidateTest> tests_in_file(const std::string& path, const std::string& content);

// The fix candidates of the walked history, oldest first.
Result<std::vector<FixCandidate>> scan_fix_candidates(const GitRepository& repo, const ScanOptions& options,
                                                      ScanReport& report);

// `command` with the test's placeholders replaced, each shell-quoted: {test_id}, {file}, {function}, {class}.
std::string expand_test_command(const std::string& command, const CandidateTest& test);
// Whether `command` names the test at all ({test_id} or {file}).
bool names_a_test(const std::string& command);

struct DiscoverOptions {
  std::string command;  // with expand_test_command's placeholders
  double timeout = 600;
  unsigned jobs = 1;
  unsigned confirm = 2;           // runs more at the parent before a pair counts as a fix
  bool retry_unrunnable = false;  // run again what was stored as could-not-run (with this command or another)
  size_t max_output = size_t{64} * 1024;
  // Give up when this many runs could not run the test before any run could (the runner missing, every import
  // failing): discover_fixes fails naming why. 0: never.
  size_t give_up_after = 5;
  // For each fix found (or confirmed before), how far back the first-parent line is searched for the test's last pass:
  // the test runs at the parent's 1st, 2nd, 4th, ... ancestor until it passes, then bisects to the commit that broke
  // it (the pass and the first failure after it are stored as outcomes: the case gets what changed between,
  // change_since.h). 0: no search.
  size_t break_search = 64;
};

// One candidate's runs, as they are stored: every outcome, and those that open a failure marked so.
struct CandidateRuns {
  const FixCandidate* candidate = nullptr;
  std::vector<RecordedOutcome> outcomes;
  size_t runs = 0, reused = 0;
  size_t fixes = 0, flaky = 0, fail_at_commit = 0, pass_at_parent = 0;
  size_t gone_at_commit = 0;  // failed at the parent; the commit removed or renamed the test (not found there)
  // The break search (DiscoverOptions::break_search) of its fixes: a last pass found, none within the bound (or the
  // test was not there yet: it was added failing), the search stopped by a run that could not run; its runs.
  size_t breaks_found = 0, breaks_not_found = 0, breaks_unknown = 0, break_runs = 0;
  // The fixes whose search found a last pass: (the parent, the test id), the failure a case of an earlier discovery
  // was labelled from (MiningStore::add_change_since gives that case what changed since).
  std::vector<std::pair<std::string, std::string>> passes_found;
  std::vector<std::pair<std::string, std::string>> unrunnable;  // (reason, "sha test")
  size_t unrunnable_known = 0;                                  // of them, known from the store (not run now)
  std::string checkout_error;                                   // the work trees could not be made: skipped
  std::string store_error;                                      // the store could not be read: discovery stops
  bool stopped = false;  // a stop signal ended a run (StopSignals): nothing of that test is stored
  size_t setups = 0;  // work trees made
  double setup_seconds = 0, run_seconds = 0;
};

struct DiscoverStore {
  // The outcomes already stored at a commit, by test id.
  std::function<Result<std::map<std::string, RecordedOutcome>>(const std::string& sha)> stored;
  // Whether a failure of the test at the commit was opened before: a fix confirmed by an earlier discovery.
  std::function<Result<bool>(const std::string& sha, const std::string& test_id)> confirmed;
  // Stores the outcomes a candidate's last test(s) produced (`outcomes`; atomically).
  std::function<Status(const CandidateRuns&)> store;
  // After each test is stored: the candidate's counts so far (for progress).
  std::function<void(const CandidateRuns&)> tested;
  // After each candidate: its counts.
  std::function<void(const CandidateRuns&)> done;
};

// Runs the candidates (see the file's comment). Stops at the first error of the store; a candidate whose work trees
// cannot be made is reported in its CandidateRuns and skipped. Fails naming the reasons when the first
// `give_up_after` results could not run the test. While it runs, spark is a child subreaper (ChildSubreaper): what a
// run leaves, in a new session too, is killed when the run ends, and every descendant left when it returns. A stop
// signal (StopSignals) ends the runs under way at once, stores nothing of their tests, and fails with
// "stopped by SIGTERM" (stop_signal_caught() says which); the work trees are removed on every way out.
Status discover_fixes(const std::filesystem::path& repo_path, const std::vector<FixCandidate>& candidates,
                      const DiscoverOptions& options, const DiscoverStore& store);

// The origin discovery writes on the outcomes it stores ("spark mine --discover at abc1234567"), and the reason of a
// stored could-not-run outcome (its message after kUnrunnablePrefix, up to the line of the command's mark).
inline constexpr std::string_view kDiscoverOrigin = "spark mine --discover";
inline constexpr std::string_view kUnrunnablePrefix = "could not run: ";

// The line a stored could-not-run outcome ends with: which command could not run it ("[--run 1f2e3d4c5b6a7980]", a
// hash of the command as given, placeholders and all). Another command runs it again.
std::string unrunnable_command_mark(const std::string& command);
// A stored could-not-run outcome's reason: its message without kUnrunnablePrefix and the command's mark.
std::string unrunnable_reason(const std::string& message);

}  // namespace spark
