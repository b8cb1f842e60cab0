#include "localizer/record_run.h"

#include "localizer/queries.h"
#include "miner/miner.h"

namespace spark {

Result<RecordedRun> record_outcomes(const GitRepository& repo, const RecordRequest& request, const NoteSink& note) {
  RecordedRun run;
  auto commit = repo.resolve(request.commit.empty() ? "HEAD" : request.commit);
  TRY(commit);
  run.commit = *commit;
  std::vector<std::string> warnings;
  auto outcomes = read_outcomes_junit(request.junit, run.commit, repo, &warnings);
  if (!outcomes) {
    for (const auto& w : warnings) note(w);
    return std::unexpected(outcomes.error());
  }
  auto options = sync_options(request.history);
  TRY(options);
  // Outcomes recorded at HEAD are HEAD's only when the work tree they ran in is HEAD's.
  if (auto head = repo.resolve("HEAD"); head && *head == run.commit) {
    auto changed = work_tree_changes(repo, *head, *outcomes);
    if (!changed)
      note("the work tree could not be compared with HEAD (" + changed.error().message +
           "): the outcomes are recorded as HEAD's");
    else if (!changed->empty()) {
      run.changed = std::move(*changed);
      return run;
    }
  }
  for (const auto& w : warnings) note(w);
  options->tip = run.commit;
  options->snapshot = true;
  auto stored = store_report(request.where, repo, *outcomes, *options, note);
  TRY(stored);
  run.stored = true;
  for (const auto& n : sync_notes(stored->sync, "recorded")) note(n);
  for (const auto& n : stored_notes(*stored)) note(n);
  std::vector<FailureSnapshot> snapshots = std::move(stored->sync.snapshots);
  run.sync = std::move(stored->sync);
  // Open failures whose test no longer exists at the recorded commit are expired, each with a note; a failure here
  // only costs the notes (the outcomes are stored).
  const auto expired = [&]() -> Result<std::vector<std::string>> {
    auto kb = request.where.open();
    TRY(kb);
    return expire_gone_failures(**kb, repo, run.commit);
  }();
  if (!expired)
    note("open failures were not checked for tests that are gone: " + expired.error().message);
  else
    for (const auto& n : *expired) note(n);
  if (!request.want_queries) return run;
  // The report's failures: test code from git objects at the commit, as recorded.
  std::vector<std::string> notes;
  run.queries = recorded_queries(repo, run.commit, *outcomes, options->test_code, snapshots, notes);
  for (const auto& n : notes) note(n);
  return run;
}

}  // namespace spark
