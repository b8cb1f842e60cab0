// Running a user's test command, and finding a failure's fix by running it (for repositories without recorded
// outcomes): each commit needed is written into a throw-away work tree from git objects, the command runs there
// with a timeout, and the first passing commit is found by bisection with a check of the boundary found.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"  // CommandResult, run_command, make_temp_dir, shell_quote
#include "miner/git_history.h"
#include "miner/miner.h"

namespace spark {

// What a run of a test command says about the test. `environment`: the command could not run the test at all
// (command not found or not executable, the test runner not importable, a module the tests import that is not
// installed, pytest's usage errors (exit 4: an option it does not know; when the option comes from the project's
// addopts the reason says so and names `-o addopts=`), "no tests ran" or no test collected (exit 5: deselected or
// ignored by the project's configuration, or not there), a test id it cannot find, an internal error (exit 3, quoting
// its last INTERNALERROR line), or a collection error in a file that is not the test's own). Such a run says nothing about the test's code, so nothing is labelled from
// it. A collection error in the test's own file (a syntax error, a bad import there) is the test code's: `failed`.
// A module is "not installed" when Python says `No module named 'X'` and the run's work tree `worktree` has no
// X (X/ or X.py at its top, in src/, or beside the test file): a typo in an import of the project's own module stays
// the test code's fault. Without `worktree`, every missing module counts as not installed. With `worktree`, two more
// runs could not run the test: the project's own top-level package that only src/ holds is not importable (the command
// lacks PYTHONPATH=src), and an ImportError "cannot import name 'X' from 'M' (PATH)" whose PATH lies outside the work
// tree (an installed module, or Python's own, of another version than the commit's code needs).
enum class RunVerdict { passed, failed, environment };
struct RunClassification {
  RunVerdict verdict = RunVerdict::failed;
  std::string reason;  // for `environment`: what went wrong, in a few words, with the output's line that says it
};
RunClassification classify_run(const CommandResult& r, const std::string& test_id,
                               const std::filesystem::path& worktree = {});

// The line of a failed run's output that says why: the exception of pytest's last `E` block (a collection error's
// "ModuleNotFoundError: No module named 'face'"), else of Python's own traceback; empty when there is none.
std::string run_cause(const std::string& output);

// The part of a test run's output that explains the failure: pytest's FAILURES (or ERRORS) section without its
// progress lines and summary; the whole output when there is no such section. Terminal colour sequences are dropped.
std::string failure_section(const std::string& output);

// The last `lines` lines of `text`.
std::string tail_lines(const std::string& text, size_t lines);

// `command` with {test_id} (or {tests}) replaced by the shell-quoted test id(s) and {junit} by the quoted path.
std::string expand_command(const std::string& command, const std::vector<std::string>& tests,
                           const std::string& junit = "");

struct BisectOptions {
  std::string command;  // "CMD {test_id}"
  double timeout = 600;
  bool first_parent = true;
  std::function<void(const std::string&)> progress;  // one line per run
};

struct BisectResult {
  std::string test_id;
  std::optional<std::string> fix;  // the first passing commit
  bool flaky = false;              // the range was not monotonic: found by a linear scan instead
  size_t runs = 0;
  std::vector<RecordedOutcome> outcomes;  // the failure at `from` and the fix's pass, for the mining store
  std::string note;                       // why there is no fix
};

// For a test failing at `from`, the first commit after it on the history up to `to` where it passes. Runs the
// command O(log n) times (plus the boundary check); a non-monotonic range falls back to a linear scan, flagged.
// A run that could not run the test (classify_run: environment) is an error naming the commit and the reason, with
// the line of the output that says it (else the output's tail); nothing is recorded then.
Result<BisectResult> bisect_fix(const GitRepository& repo, const std::string& test_id, const std::string& from,
                                const std::string& to, const BisectOptions& options);

// bisect_fix for each of `tests`: the outcomes of them all (for the mining store). After each test, `say` gets a line
// with the fix found (or why none), the runs it took, and whether the range was flaky.
Result<std::vector<RecordedOutcome>> bisect_fixes(const GitRepository& repo, const std::vector<std::string>& tests,
                                                  const std::string& from, const std::string& to,
                                                  const BisectOptions& options,
                                                  const std::function<void(const std::string&)>& say);

}  // namespace spark
