// The miner's state in the knowledge base: every recorded outcome, keyed by (commit, test id), and every failure
// with what became of it (open, labelled, quarantined, an audit decision, or why it labels nothing).
//
// `sync` is the one way state changes after new outcomes arrive (from `spark mine` or `spark record`):
//   1. in one transaction: store the outcomes; a failing outcome opens a failure unless it is known already;
//   2. without holding the write lock: label every open failure whose test later passed on the history (reading git
//      objects, no checkout);
//   3. in one transaction: settle those failures that are still open (another process may have settled them
//      meanwhile: it wins, nothing is done twice), recompute the 3-sigma rule over every mined case, and bring the
//      corpus in line: labelled cases are in the knowledge base, quarantined ones are not; a case the recomputed rule
//      now calls an outlier moves to quarantine and one it no longer does moves back. A person's decisions (accept,
//      reject, trim) are never changed.
// An interrupted sync leaves the store as it was before step 1 or 3; running it again finishes the work.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/config.h"
#include "formats/defaults.h"
#include "formats/triage.h"
#include "miner/miner.h"
#include "store/knowledge_base.h"

namespace spark {

struct SyncOptions {
  bool first_parent = true;
  std::optional<int64_t> since, until;
  std::string tip;  // the history is walked from here (default HEAD)
  double sigma = defaults::kSigma;
  std::string project;  // default: the repository's folder name
  bool test_only_fixes = false;
  TestCodeRule test_code;  // what is test code (`mine.test_code`)
  bool snapshot = false;   // keep each new failure's test files (from git objects) with it: `spark record`
};

// The history settings `spark mine`, `record` and `hooks post-commit` share, as flags and the configuration give them.
struct HistorySettings {
  std::string repo = ".";
  std::vector<std::string> repos;  // `spark mine`: --repo given several times
  bool all_parents = false;
  std::string since, until;  // a date (2023-01-01) or an ISO-8601 time
  double sigma = defaults::kSigma;
  std::string project;
  bool test_only_fixes = false;
  std::string test_code;  // `mine.test_code`: globs of test code ("" = the default rule)
};
// The configuration's part of them (flags already applied to it).
void history_from_config(const Config& config, HistorySettings& h);
// The sync's options; an error names a bad --since/--until or test-code glob.
Result<SyncOptions> sync_options(const HistorySettings& h);

// The test files a sync read for one failure of the outcomes it was given (SyncOptions::snapshot): failure_files
// under the sync's test-code rule; the first `own` are the failure's own paths (failure_paths), the rest the test
// code they depend on.
struct FailureSnapshot {
  size_t outcome = 0;  // its position in the outcomes given to sync
  size_t own = 0;
  std::vector<SourceFile> files;
};

struct SyncReport {
  size_t outcomes = 0;      // outcomes stored (new or changed)
  size_t opened = 0;        // failures this sync opened
  size_t closed_flaky = 0;  // failures whose test passed at the same commit
  size_t merged = 0;        // settled failures that were the same fault as another: counted behind its case
  std::map<FailureStatus, size_t> settled;                 // failures this sync settled, by status
  std::vector<std::string> labelled_ids, quarantined_ids;  // this sync's new cases
  std::vector<std::string> moved_to_quarantine, released;  // earlier cases the recomputed rule moved
  size_t still_open = 0;          // failures with no later pass yet (over the whole store)
  size_t still_open_tests = 0;    // the tests they are of
  size_t still_open_commits = 0;  // the commits they are at
  size_t not_on_history = 0;                               // open failures whose commit is not on the walked history
  size_t unreadable = 0;  // fixed failures left open because a git object could not be read (is_read_error)
  std::vector<std::string> shallow_boundary;  // a shallow clone's boundary commits (empty when not shallow)
  size_t beyond_boundary = 0;                 // outcomes at commits a shallow clone does not have, not stored
  OutlierRule rule;                           // over every mined case, after this sync
  std::vector<std::string> warnings;
  std::vector<FailureSnapshot> snapshots;  // with SyncOptions::snapshot: what was read for each failure
};

struct StoredFailure {
  std::string commit, test_id;
  FailureStatus status = FailureStatus::open;
  std::optional<int64_t> time;
  std::string message, origin;
  std::optional<std::vector<SourceFile>> snapshot;
  std::string fixed_commit;
  std::string case_id;
  std::optional<size_t> faulty_count;  // as mined (before any trim)
  std::optional<Case> labelled;        // the case as it is (trimmed when trimmed)
  std::vector<LineRef> mined_lines;    // its faulty lines as mined (before any trim)
  std::vector<SourceFile> fixed_files;
  std::string decided_by, reason;
  std::optional<int64_t> decided_at;
  std::string duplicate_of;  // a duplicate's kept case
};

enum class Decision { accept, reject, trim };

// What an audit decision changes, as text ("quarantined", "accepted@1764190000"): a page shows a case in one state,
// and a decision made from that page applies only while the case is still in it (MiningStore::decide's `seen`).
std::string decision_state(const StoredFailure& f);

// A failure's id in `spark failures`: 12 hex digits of a hash of its commit and test id (stable, like a short sha).
std::string failure_id(const StoredFailure& f);

// Why the test of `test_id` no longer exists at commit `sha`, or nullopt while it does. Gone means: its test file is
// not in that commit, or the file no longer defines its test function (a parametrized id `f[...]` names function
// `f`) and the function's name is nowhere in the file (so a test the file still names, made by a factory or in a
// file that does not parse, never expires). A module's id (a collection error's: the file's path) is gone only with its
// file; a dotted unittest id (no file named) is never gone.
std::optional<std::string> test_gone_at(const GitRepository& repo, const std::string& sha, const std::string& test_id);

// Opens the knowledge base as KnowledgeBase::open does, with the miner's rule for an upgrade that recomputed the
// failures' fault keys: the failures that are now one fault are merged (MiningStore::merge_same_faults) in the
// upgrade's transaction. The commands open their stores this way.
Result<std::unique_ptr<KnowledgeBase>> open_knowledge_base(const std::filesystem::path& location, bool create,
                                                           int busy_timeout_ms = 30000,
                                                           const std::filesystem::path& local_dir = {});

class MiningStore {
 public:
  explicit MiningStore(KnowledgeBase& kb) : kb_(kb) {}

  Result<SyncReport> sync(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                          const SyncOptions& options);

  // sync's first step alone (one transaction): the outcomes stored, failures opened, flaky ones closed; no labelling.
  // `spark mine --discover` stores each candidate's runs so; its last step is a sync with no outcomes.
  Result<SyncReport> store_outcomes(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                                    const SyncOptions& options);
  // The outcomes stored at commit `sha` (a full sha), by test id.
  Result<std::map<std::string, RecordedOutcome>> outcomes_at(const std::string& sha);
  // The recorded runs of `test_id` (formats/triage.h), nullopt when none is recorded. `now` in Unix seconds. Runs are
  // put in history's order by `commit_time` (a commit's committer time; the outcome's time where it knows none),
  // asked only when there are two runs or more: outcomes recorded out of order count in commit order.
  Result<std::optional<TestHistory>> history(
      const std::string& test_id, int64_t now,
      const std::function<std::optional<int64_t>(const std::string& sha)>& commit_time = {});
  // The newest `limit` failures fixed outside the test code (status not_test_fault): (test id, commit, message), the
  // verdict's product examples.
  struct ProductFailure {
    std::string test_id, commit, message;
  };
  Result<std::vector<ProductFailure>> product_failures(size_t limit);
  // Whether a failure of `test_id` at `sha` was opened (whatever became of it since).
  Result<bool> has_failure(const std::string& sha, const std::string& test_id);

  // Failures with any of these statuses (all when empty), oldest first.
  Result<std::vector<StoredFailure>> failures(const std::vector<FailureStatus>& statuses = {});
  // The labelled cases of those failures as JSON Lines (`spark mine -o`, `--quarantine`).
  Result<std::string> cases_jsonl(const std::vector<FailureStatus>& statuses);
  // The failure whose mined case has this id (or a unique prefix of it).
  Result<StoredFailure> failure_by_case(const std::string& case_id);
  Result<std::map<std::string, size_t>> status_counts();
  Result<size_t> outcome_count();
  Result<OutlierRule> rule(double sigma);
  // The mined failures among `failures` ((commit, test id): the commit the failure was opened at) whose case knows no
  // last pass, given one where the recorded outcomes now hold one (a discovery's search back stored it): each record,
  // and the knowledge base's case where it is in it, gets `last_pass_commit`, `break_commit` and what changed since
  // (change_since.h), in one transaction. Its faulty lines, decision and id stay. Returns how many of the knowledge
  // base's cases got one (a failure merged into another's case, or out of the corpus, gains it in its record only).
  Result<size_t> add_change_since(const GitRepository& repo,
                                  const std::vector<std::pair<std::string, std::string>>& failures,
                                  const SyncOptions& options);

  // Closes these failures, those still open, as `status` (dismissed or expired) with who or what closed them and
  // why, in one transaction; a closed failure is kept, never labelled, and never re-run by the post-commit hook.
  // Returns how many it closed (another process may have settled some first).
  Result<size_t> close_open(const std::vector<StoredFailure>& failures, FailureStatus status, const std::string& by,
                            const std::string& reason);

  // A person's audit decision on a mined case (normally a quarantined one; a decision can be changed). accept: the
  // case joins the knowledge base as mined; reject: it never does (the fix was a refactoring, not a fault); trim: it
  // joins with only `keep` as its faulty lines, which must be some of the mined ones. Stored with author and time.
  // With `seen` (a decision_state), nothing is written unless the case is still in that state: the error then says
  // who decided it meanwhile (two people auditing at once: the first decision stands, the second is told).
  Result<StoredFailure> decide(const std::string& case_id, Decision decision, const std::string& author,
                               const std::string& reason, const std::vector<LineRef>& keep = {},
                               const std::string& seen = "");

  // One case per fault. Mined failures with the same fault key (failures.fault_key: the same test, faulty test code
  // and fix) are one fault: the earliest failure (by failure time, then commit) keeps the case; the others become
  // `duplicate` failures pointing at it (duplicate_of) and their cases leave the knowledge base; a person's decision on
  // any of them carries over to the one kept. The kept case's record gets meta.occurrences: count, first and last
  // commit and time, and every failing commit. Runs inside the caller's transaction when there is one.
  struct FaultMerge {
    size_t merged = 0;  // failures that became duplicates in this call
  };
  Result<FaultMerge> merge_same_faults();

 private:
  // What the rule needs of a mined failure (its record stays on disk).
  struct Mined {
    std::string commit, test_id;
    FailureStatus status;
    size_t faulty_count;  // as mined, before any trim: the rule's sample
    std::string case_id;
  };
  Result<std::vector<Mined>> mined();
  Status reconcile(double sigma, SyncReport& report);

  // sync's three steps. An open failure whose test passed later, labelled by its fix.
  struct Settled {
    const StoredFailure* failure;
    std::string fixed;  // the fixing commit
    Labelling labelling;
  };
  // 1. The outcomes in (one transaction): failures opened, open ones a pass at the same commit shows flaky closed.
  Status record_outcomes(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                         const SyncOptions& options, int64_t now, SyncReport& report);
  // 2. The open failures whose test passed later on the history, labelled (no write lock held).
  Result<std::vector<Settled>> label_fixed(const GitRepository& repo, const std::vector<StoredFailure>& open,
                                           const SyncOptions& options, SyncReport& report);
  // 3. Those still open settled, same faults merged, the rule recomputed and the knowledge base brought in line (one
  // transaction).
  Status settle(const std::vector<Settled>& settled, const SyncOptions& options, int64_t now, SyncReport& report);
  KnowledgeBase& kb_;
};

}  // namespace spark
