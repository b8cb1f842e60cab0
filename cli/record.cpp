#include "cli/record.h"

#include <cstdio>

#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "localizer/queries.h"
#include "miner/miner.h"
#include "miner/recording.h"
#include "store/postgres_db.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

// Stores a report's outcomes (recording.h's store_report) and says what was stored; the exit code. `snapshots`: the
// files the store's sync read of the report's failures.
int store_recorded(const Common& common, const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                   const SyncOptions& options, std::vector<FailureSnapshot>& snapshots) {
  RecordingStore where;
  where.open = [&] { return open_kb(common, true); };
  where.server = is_postgres_url(common.kb_dir);
  where.local_dir = common.local_dir;
  where.retry_seconds = record_retry_seconds();
  auto stored = store_report(where, repo, outcomes, options, [](const std::string& n) { note(n); });
  if (!stored) return report_error(stored.error());
  print_summary(stored->sync, "recorded");
  for (const auto& n : stored_notes(*stored)) note(n);
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
  note(work_tree_note(head, changed, args.localize));
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

int record_report(const Common& common, const GitRepository& repository, const RecordArgs& args) {
  const GitRepository* repo = &repository;
  auto commit = (*repo).resolve(args.commit.empty() ? "HEAD" : args.commit);
  if (!commit) return report_error(commit.error());
  std::vector<std::string> warnings;
  auto outcomes = read_outcomes_junit(args.junit, *commit, *repo, &warnings);
  if (!outcomes) {
    for (const auto& w : warnings) note(w);
    return report_error(outcomes.error());
  }
  auto options = sync_options(args.history);
  if (!options) return report_error(options.error());
  // Outcomes recorded at HEAD are HEAD's only when the work tree they ran in is HEAD's.
  if (auto head = repo->resolve("HEAD"); head && *head == *commit) {
    auto changed = work_tree_changes(*repo, *head, *outcomes);
    if (!changed)
      note("the work tree could not be compared with HEAD (" + changed.error().message +
           "): the outcomes are recorded as HEAD's");
    else if (!changed->empty())
      return record_work_tree(common, args, *repo, *head, *changed);
  }
  for (const auto& w : warnings) note(w);
  options->tip = *commit;
  options->snapshot = true;
  std::vector<FailureSnapshot> snapshots;
  if (const int stored = store_recorded(common, *repo, *outcomes, *options, snapshots); stored != 0) return stored;
  expire_recorded(common, *repo, *commit);
  // When nothing is localized below, the ranker still learns from the cases this run labelled (localize does it else).
  if (!args.localize) {
    learn_ranker_if_due(common);
    return 0;
  }
  // This report's failures, localized at once: test code from git objects at the commit, as recorded.
  std::vector<std::string> notes;
  const std::vector<Case> queries = recorded_queries(*repo, *commit, *outcomes, options->test_code, snapshots, notes);
  snapshots.clear();
  snapshots.shrink_to_fit();
  for (const auto& n : notes) note(n);
  if (queries.empty()) {
    if (args.localize_args.format == "json") std::printf("[]\n");
    learn_ranker_if_due(common);
    return 0;
  }
  // The outcomes are stored by now: whatever ends the localizing (an error, or an exception main would report
  // without this context), the run says so.
  int localized = 1;
  try {
    // The repository recorded (`--repo`) is the one the triage reads: its commits' times, its own modules.
    LocalizeArgs localize_args = args.localize_args;
    localize_args.root = repo->workdir().string();
    localize_args.commit = *commit;
    localized = localize_queries(common, localize_args, queries, true);
  } catch (const std::exception& e) {
    report_error(Error{e.what()});
  }
  if (localized != 0) note("the outcomes were recorded (see the summary above); only localizing the failures failed");
  return localized;
}

namespace {

int cmd_record(const Common& common, const RecordArgs& args) {
  auto repo = GitRepository::open(args.history.repo);
  if (!repo) return report_error(repo.error());
  return record_report(common, **repo, args);
}

}  // namespace

Command add_record(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<RecordArgs>();
  RecordArgs& rec = *args;
  auto no_localize = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("record",
                                 "CI post-failure step: record a JUnit report's outcomes at a commit, "
                                 "localize its failures, label the failures its passes fix");
  add_history(sub, flags, rec.history);
  sub->add_option("--junit", rec.junit, "the JUnit XML report of the test run")->required()->check(CLI::ExistingFile);
  sub->add_option("--commit", rec.commit, "the commit tested (default HEAD)");
  sub->add_flag("--no-localize", *no_localize, "only record; do not localize the failures");
  sub->add_option("--format", rec.localize_args.format, "text | json | sarif | github | markdown")->check(CLI::IsMember(kFormats));
  sub->add_option("--sarif", rec.localize_args.sarif_output,
                  "also write the localization as SARIF to this file (code scanning)");
  sub->add_option("--markdown", rec.localize_args.markdown_output,
                  "also write the Markdown summary (--format markdown) to this file ($GITHUB_STEP_SUMMARY, a comment)");
  flags.bind(sub, "-k", "localize.k")->check(CLI::Range(1, 100000));
  flags.bind(sub, "-r", "localize.r")->check(CLI::Range(1, 1000));
  flags.bind(sub, "--mode", "llm.mode")->check(CLI::IsMember(kModes));
  add_llm_flags(sub, flags);

  return {sub, [args, no_localize](Config& config, Common& common) {
            history_from_config(config, args->history);
            if (auto s = localize_settings(config, args->localize_args); !s) return usage_error(s.error());
            args->localize = !*no_localize;
            return cmd_record(common, *args);
          }};
}

}  // namespace spark::cli
