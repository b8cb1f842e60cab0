// Mining labelled cases from history (the paper's §5.1): for each recorded failure of a test, the first later
// commit where that test passes is its fix; the test code's diff between the two labels the faulty lines; cases whose
// fix touched an outlying number of lines (mean + σ·sd of the mined cases, σ = 3) go to quarantine for a person to
// audit instead of into the corpus.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "case.h"
#include "git_history.h"
#include "junit.h"

namespace spark {

// One recorded outcome of one test at one commit (the corpus format's outcome record, or a JUnit report's test).
struct RecordedOutcome {
  std::string commit;  // as recorded (full sha or a prefix)
  std::optional<int64_t> time;
  std::string test_id;
  Outcome outcome = Outcome::passed;
  std::string message;
  std::string origin;  // "file:line" for messages
};

// The JSONL outcome form (../shared/docs/corpus-format.md): {"commit", "time", "test_id", "outcome", "message"}.
// Every rule violation is an error naming the file and line.
Result<std::vector<RecordedOutcome>> read_outcomes_jsonl(const std::filesystem::path& path);

// A JUnit report's outcomes at `commit` (or, when empty, the commit the file's name spells: "<sha>.xml").
Result<std::vector<RecordedOutcome>> read_outcomes_junit(const std::filesystem::path& path, const std::string& commit,
                                                          const std::filesystem::path& repo_root);

struct MineOptions {
  bool first_parent = true;
  std::optional<int64_t> since, until;
  double sigma = 3.0;
  std::string project;  // the cases' `project` (default: the repository folder's name)
};

struct MineReport {
  std::vector<Case> cases;        // labelled, kept
  std::vector<Case> quarantined;  // outliers by faulty-line count, for audit
  size_t failures = 0;            // failing outcomes considered
  size_t never_fixed = 0;         // no later passing outcome
  size_t not_test_fault = 0;      // the test code did not change between failure and fix (SUT or environment)
  size_t only_additions = 0;      // the fix only added lines: nothing to label
  size_t not_in_history = 0;      // the outcome's commit is not on the walked history
  size_t missing_file = 0;        // the test file is not in the faulty commit
  double mean = 0, sd = 0, threshold = 0;  // the 3-sigma rule's numbers
  std::vector<std::string> warnings;
};

Result<MineReport> mine(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                        const MineOptions& options);

}  // namespace spark
