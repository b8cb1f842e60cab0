// Mining labelled cases from history (the paper's §5.1): for each recorded failure of a test, the first later
// commit where that test passes is its fix; the test code's diff between the two labels the faulty lines; cases whose
// fix touched an outlying number of lines (mean + σ·sd of the mined cases, σ = 3) go to quarantine for a person to
// audit instead of into the knowledge base. This file has the pieces; mining_store.h keeps the state and runs them.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "formats/case.h"
#include "formats/defaults.h"
#include "formats/junit.h"
#include "miner/git_history.h"

namespace spark {

// One recorded outcome of one test at one commit (the corpus format's outcome record, or a JUnit report's test).
struct RecordedOutcome {
  std::string commit;  // as recorded (full sha or a prefix)
  std::optional<int64_t> time;
  std::string test_id;
  Outcome outcome = Outcome::passed;
  std::string message;
  std::string origin;  // "file:line" for messages
  // A failing outcome opens a failure (to be labelled by its fix) unless this is false: `spark mine --discover` keeps
  // every run it made, to reuse, but only a failure its fix was seen to pass opens one.
  bool opens = true;
};

// The JSONL outcome form (../shared/docs/corpus-format.md): {"commit", "time", "test_id", "outcome", "message"}.
// Every rule violation is an error naming the file and line.
Result<std::vector<RecordedOutcome>> read_outcomes_jsonl(const std::filesystem::path& path);

// The test files of a repository at `commit`, for the JUnit reader: looked up in git objects (so a bare clone, or a
// report of another commit than the checkout's, maps classnames to files), then in the work tree when there is one.
// `repo` must outlive the result.
TestFiles test_files_at(const GitRepository& repo, const std::string& commit);

// A JUnit report's outcomes at `commit` (or, when empty, the commit the file's name spells: "<sha>.xml"). Test files
// are looked up with test_files_at. The reader's warnings (test files outside the repository or absent at that
// commit, testcases it skipped) go to `warnings` when given.
Result<std::vector<RecordedOutcome>> read_outcomes_junit(const std::filesystem::path& path, const std::string& commit,
                                                         const GitRepository& repo,
                                                         std::vector<std::string>* warnings = nullptr);

// The outcomes of these files, in order: JUnit reports (.xml, read_outcomes_junit at `commit`) or JSON Lines. The
// readers' warnings go to `notes`; the first file that cannot be read is the error.
Result<std::vector<RecordedOutcome>> read_outcome_files(const std::vector<std::string>& files,
                                                        const std::string& commit, const GitRepository& repo,
                                                        std::vector<std::string>& notes);

// What became of a recorded failure. `open` until a later passing outcome of the same test is seen; then the fix
// decides: `labelled` (a case in the knowledge base), `quarantined` (an outlier for a person to audit), or one of the
// reasons it labels nothing. `accepted`, `rejected` and `trimmed` are a person's audit decisions. `flaky`: the test
// also passed at the failing commit itself. `duplicate`: the same fault as an earlier failure (the same test, test
// code and fix), which keeps the one case (MiningStore::merge_same_faults).
enum class FailureStatus {
  open,
  dismissed,  // closed by a person (`spark failures dismiss`): kept, never labelled, never re-run
  expired,    // closed because its test no longer exists (`spark failures expire`, `spark record`)
  labelled,
  quarantined,
  accepted,
  rejected,
  trimmed,
  not_test_fault,
  only_additions,
  mixed_fix,
  missing_file,
  flaky,
  duplicate
};
std::string status_name(FailureStatus s);
std::optional<FailureStatus> parse_status(const std::string& s);
// The status sets, each defined here only. Mined: the failure was labelled by a diff (their faulty-line counts make
// up the outlier rule's sample). In the corpus: its case belongs in the knowledge base (labelled, or accepted or
// trimmed by a person).
bool is_mined(FailureStatus s);
std::vector<FailureStatus> mined_statuses();
bool in_corpus(FailureStatus s);
std::vector<FailureStatus> corpus_statuses();

// Which repository paths are test code (`mine.test_code` in .spark.toml): comma-separated globs. A glob without '/'
// matches the file's name (`conftest.py`, `test_*.py`); `DIR/**` matches every file under a folder DIR at any depth
// (`tests/**`, `src/test/**`); any other glob matches the whole path from the repository's top (`*` stays inside one
// folder; a leading `**/` is any folders). Only files of the languages spark reads (Python, Java, JavaScript,
// TypeScript) are test code.
class TestCodeRule {
 public:
  // The default rule: the default of `mine.test_code` in the configuration's registry (src/formats/config.cpp).
  TestCodeRule();
  // An empty list, or a glob that is absolute or holds "..", is an error naming it.
  static Result<TestCodeRule> parse(const std::string& globs);
  bool matches(const std::string& path) const;
  // Test data: a file of no language spark reads (JSON, YAML, text, ...) under a folder a `DIR/**` glob names
  // (tests/compliance/indices.json under `tests/**`). Not test code to parse, but a test that reads it can fail by it.
  bool is_test_data(const std::string& path) const;
  const std::vector<std::string>& globs() const { return globs_; }
  // This rule with `more` globs added (a project's own test code: project_tests.h). Globs that are absolute or climb
  // out with ".." are left out.
  TestCodeRule with_globs(const std::vector<std::string>& more) const;

 private:
  std::vector<std::string> globs_;
};

struct LabelOptions {
  std::string project;           // the cases' `project`
  bool test_only_fixes = false;  // a fix range that also changed non-test files labels nothing (`mixed_fix`)
  TestCodeRule test_code;        // what is test code
};

// A failure to label: the test, its failure output, and (when recorded in CI) the test files as they were.
struct FailureInput {
  std::string test_id;
  std::string message;
  std::optional<int64_t> time;
  std::string origin;
  std::optional<std::vector<SourceFile>> snapshot;  // else read from git objects at the failing commit
  // The last commit the test passed at before this failure, and the first it failed at after that, when the recorded
  // outcomes know them: the case gets what changed between (change_since.h). Empty: unknown.
  std::string last_pass, break_commit;
};

struct Labelling {
  FailureStatus status = FailureStatus::open;  // labelled, not_test_fault, only_additions, mixed_fix, missing_file
  std::optional<Case> labelled;                // when labelled
  std::vector<SourceFile> fixed_files;         // the fixed versions of the case's files (for the audit's diffs)
  std::string detail;                          // why it labels nothing
};

// The test files of a failure: the test's own file (a collection error's id is the file itself), then the
// repository's test files its traceback names (test code by `rule`, the default rule when null). A Java test id and
// Java frames name a package path and file ("com/x/FooTest.java"): `files` (its `find`) resolves them to the
// repository's path; without it they stay as named.
std::vector<std::string> failure_paths(const std::string& test_id, const std::string& message,
                                       const TestFiles* files = nullptr, const TestCodeRule* rule = nullptr);

// The other test code a test file's tests depend on, which no traceback has to name: the conftest.py files from the
// test file's folder up to the repository's top (Python), and the test-code modules the test file and those
// conftest.py files import (Python `import a.b` / `from .h import x`, found from the test file's folder and each
// folder above it; Java `import com.x.Helper;` found by its path's tail in `files`, and the base class a Java test
// `extends` from its own folder; JavaScript/TypeScript relative `require`/`import`). `read` gives a path's content,
// or nullopt when there is no such file; only paths `rule` calls test code are returned, never `test_path` itself.
std::vector<std::string> dependency_paths(const std::string& test_path,
                                          const std::function<std::optional<std::string>(const std::string&)>& read,
                                          const TestCodeRule& rule, const TestFiles* files = nullptr);

// Those files (failure_paths, then with `dependencies` the dependency_paths of the test file) as they are at commit
// `sha`, read from git objects. Files not in that commit are left out; unreadable ones (binary) are named in
// `warnings`. `own`, when given, is set to how many of the files are failure_paths' (the rest are dependencies).
std::vector<SourceFile> failure_files(const GitRepository& repo, const std::string& sha, const std::string& test_id,
                                      const std::string& message, std::vector<std::string>* warnings = nullptr,
                                      const TestCodeRule* dependencies = nullptr, size_t* own = nullptr);

// Whether a repository path is test code by the default rule (TestCodeRule: test_*.py, *_test.py, conftest.py,
// *Test.java, *Tests.java, *IT.java, *.test.js/.spec.js (and .ts, .mjs, …), or a file of those languages under
// test/, tests/, __tests__/ or src/test/).
bool is_test_path(const std::string& path);

// Labels one failure by the diff between the failing commit and its fix (the paper's §5.1 rule; see git_history.h).
Result<Labelling> label_failure(const GitRepository& repo, const FailureInput& failure, const CommitInfo& faulty,
                                const CommitInfo& fixed, const LabelOptions& options);

// The 3-sigma rule over faulty-line counts: outliers lie above mean + sigma * sd (population sd). With fewer than
// two counts, or all equal, nothing is an outlier.
struct OutlierRule {
  size_t n = 0;
  double mean = 0, sd = 0, sigma = defaults::kSigma, threshold = 0;
  bool outlier(size_t count) const { return n > 1 && sd > 0 && static_cast<double>(count) > threshold; }
  std::string describe() const;  // "mean 6.21 + 3.0 x sd 5.95 = 24.07 faulty lines (over 19 mined cases)"
};
OutlierRule outlier_rule(const std::vector<size_t>& counts, double sigma);

// The project of a repository, the same from every clone, worktree or CI checkout of it: the origin remote's URL
// normalised (scheme, user, port and ".git" dropped: "github.com/pallets/click"), else "git-" and its root commit's
// first 12 hex digits. An origin that is a local path ("/srv/git/calc.git", "../calc", "file:///srv/git/calc") counts
// as none: it names a folder of one machine, which other clones see elsewhere or not at all. `project` in .spark.toml
// (SPARK_PROJECT, --project) overrides it.
std::string default_project(const GitRepository& repo);
// The remote URL normalised as above; empty for a local path.
std::string normalize_remote_url(std::string url);
// The last path part of a project ("click" of "github.com/pallets/click"): the prefix of mined case ids.
std::string project_slug(const std::string& project);

}  // namespace spark
