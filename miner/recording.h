// The recording lifecycle of CI (`spark record`, the post-commit hook, `spark failures`): a report's outcomes stored
// with retries and a spool when a server store cannot be reached, outcomes of an edited work tree told apart from
// HEAD's, open failures grouped by test, expired when their test is gone, and re-run after a commit.
//
// The spool: a report whose outcomes could not be stored on a server store (the server down or unreachable) is kept
// as an outcomes file (the corpus format's JSON Lines) in LOCAL_DIR/spool/, written atomically; the next store that
// reaches the server stores it with its own outcomes and then removes it.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "miner/git_history.h"
#include "miner/miner.h"
#include "miner/mining_store.h"
#include "store/knowledge_base.h"

namespace spark {

// What the lifecycle has to say while it works (a retry, a spooled report): said at once, not collected.
using NoteSink = std::function<void(const std::string&)>;

// The spool's folder of a local folder.
std::filesystem::path spool_dir(const std::string& local_dir);
// The spooled reports of a local folder, oldest first.
std::vector<std::filesystem::path> spool_files(const std::string& local_dir);
// Writes `outcomes` as a new spool file; its path.
Result<std::filesystem::path> spool_outcomes(const std::string& local_dir,
                                             const std::vector<RecordedOutcome>& outcomes);

// Where a report is stored.
struct RecordingStore {
  std::function<Result<std::unique_ptr<KnowledgeBase>>()> open;  // opens (creating) the knowledge base
  bool server = false;        // a server store: spooled reports go along, and a report is spooled when it stays away
  std::string local_dir;      // the spool's folder (with a server store)
  double retry_seconds = 0;   // how long a server store that cannot be reached is tried again
};
// How long `spark record` tries a server store that cannot be reached: SPARK_KB_RETRY_SECONDS, else 0.
double record_retry_seconds();

struct StoredReport {
  SyncReport sync;  // its snapshots are this report's (positions in its outcomes)
  size_t spooled_reports = 0, spooled_outcomes = 0;  // stored with it, from the spool
  int attempts = 1;
};

// What `spark record` says of a stored report beyond the sync's summary (sync_notes): the spooled reports stored with
// it, and the attempts it took.
std::vector<std::string> stored_notes(const StoredReport& stored);

// Stores a report's outcomes (MiningStore::sync). With a server store, spooled reports go along; a lost connection
// (a server restart) retries the whole step, which is safe (outcomes are keyed; sync finishes what an interrupted
// run began), with back-off; and when the server stays unreachable the report is spooled, so nothing is lost (the
// error is still returned).
Result<StoredReport> store_report(const RecordingStore& where, const GitRepository& repo,
                                  const std::vector<RecordedOutcome>& outcomes, const SyncOptions& options,
                                  const NoteSink& note);

// A sync's summary, as the lines spark prints: what was stored (`verb`: "recorded"; "" says nothing of outcomes), what
// was settled and how, what is still open, a shallow clone's boundary, the outlier rule and what it moved.
std::vector<std::string> sync_notes(const SyncReport& r, const std::string& verb);

// The files of the work tree that make a test run there differ from a run at HEAD (`head`, a full sha): tracked files
// that differ from HEAD's (edited, staged, deleted), and the report's test files that HEAD does not have. spark's own
// configuration (.spark.toml) changes no outcome and does not count. Empty when the work tree is HEAD's (or the
// repository is bare).
Result<std::vector<std::string>> work_tree_changes(const GitRepository& repo, const std::string& head,
                                                   const std::vector<RecordedOutcome>& outcomes);
// Why `spark record` stored nothing of a report run in a work tree that differs from HEAD (`changed`: three named,
// the rest counted), and what to do; `localizing`: the failures are localized as the work tree has them.
std::string work_tree_note(const std::string& head, const std::vector<std::string>& changed, bool localizing);

// The open failures of one test, oldest first.
struct OpenTest {
  std::vector<StoredFailure> failures;
  const StoredFailure& first() const { return failures.front(); }
};
std::vector<OpenTest> group_by_test(const std::vector<StoredFailure>& open);

// A tip's history (every parent), oldest first, and each commit's place in it: how old a failure is in commits, and
// which failures a commit's test files may expire (a failure recorded on another branch is not the tip's to judge).
struct TipHistory {
  std::string head;
  std::vector<CommitInfo> commits;
  std::unordered_map<std::string, size_t> position;
  bool has(const std::string& sha) const { return position.count(sha) > 0; }
};
Result<TipHistory> tip_history(const GitRepository& repo, const std::string& tip);

// Expires the open failures whose test no longer exists at `commit` (mining_store.h's test_gone_at), among those
// recorded at commits in its history; returns a note per test expired.
Result<std::vector<std::string>> expire_gone_failures(KnowledgeBase& kb, const GitRepository& repo,
                                                      const std::string& commit);

// `spark hooks install`: the repository's post-commit hook runs `spark_path hooks post-commit` after each commit
// (rewritten when spark's is there already; a hook of the user's is kept and chained: it runs first).
Status install_post_commit_hook(const GitRepository& repo, const std::string& spark_path, const NoteSink& note);
// `spark hooks uninstall`: spark's hook removed, a chained one put back.
Status uninstall_post_commit_hook(const GitRepository& repo, const NoteSink& note);

// What the post-commit hook runs again for the open failures, each once: a pytest node id whose function the work
// tree's file still defines (a parametrized id without its row), its file when the function is gone, a collection
// error by its file; other ids as they are. A failure whose test file the work tree lacks is named in `notes`.
Result<std::vector<std::string>> rerun_targets(KnowledgeBase& kb, const std::filesystem::path& workdir,
                                               std::vector<std::string>& notes);

// What the installed hook does after each commit with this record.test_command, or, unset, that it only counts.
std::string hook_does_text(const std::string& test_command);
// The hook's word when `tests` tests have open failures and no record.test_command is set to re-run them.
std::string hook_needs_command_text(size_t tests);

// Runs the hook's `command` (record.test_command: {tests} and {junit} expanded, runner.h) in `workdir` for `tests`,
// for at most `timeout` seconds. An error when it could not run or wrote no JUnit report at `junit` (then the end of
// its output is quoted).
Status rerun_tests(const std::string& command, const std::vector<std::string>& tests,
                   const std::filesystem::path& workdir, const std::filesystem::path& junit, double timeout);

}  // namespace spark
