#include "cli/record.h"

#include <cstdio>

#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "localizer/queries.h"
#include "localizer/record_run.h"
#include "miner/miner.h"
#include "miner/recording.h"
#include "store/postgres_db.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

// A report run in a work tree that differs from HEAD: its outcomes are the work tree's, not HEAD's, so nothing is
// stored (a failure of an edit would be HEAD's failure, closed as flaky by HEAD's next pass, and learnt from HEAD's
// lines). The failures are localized as the work tree has them, as `spark localize --junit` does.
int record_work_tree(const Common& common, const RecordArgs& args, const GitRepository& repo, const std::string& head,
                     const std::vector<std::string>& changed) {
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

int record_report(const Common& common, const GitRepository& repo, const RecordArgs& args) {
  RecordRequest request;
  request.junit = args.junit;
  request.commit = args.commit;
  request.history = args.history;
  request.where.open = [&] { return open_kb(common, true); };
  request.where.server = is_postgres_url(common.kb_dir);
  request.where.local_dir = common.local_dir;
  request.where.retry_seconds = record_retry_seconds();
  request.want_queries = args.localize;
  auto run = record_outcomes(repo, request, [](const std::string& n) { note(n); });
  if (!run) return report_error(run.error());
  if (!run->changed.empty()) return record_work_tree(common, args, repo, run->commit, run->changed);
  // When nothing is localized below, the ranker still learns from the cases this run labelled (localize does it else).
  if (run->queries.empty()) {
    if (args.localize && args.localize_args.format == "json") std::printf("[]\n");
    learn_ranker_if_due(common);
    return 0;
  }
  // The outcomes are stored by now: whatever ends the localizing (an error, or an exception main would report
  // without this context), the run says so.
  int localized = 1;
  try {
    // The repository recorded (`--repo`) is the one the triage reads: its commits' times, its own modules.
    LocalizeArgs localize_args = args.localize_args;
    localize_args.root = repo.workdir().string();
    localize_args.commit = run->commit;
    localized = localize_queries(common, localize_args, run->queries, true);
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
  sub->add_option("--format", rec.localize_args.format, "text | json | sarif | github | markdown")
      ->check(CLI::IsMember(kFormats));
  sub->add_option("--sarif", rec.localize_args.sarif_output,
                  "also write the localization as SARIF to this file (code scanning)");
  sub->add_option("--markdown", rec.localize_args.markdown_output,
                  "also write the Markdown summary (--format markdown) to this file ($GITHUB_STEP_SUMMARY, a comment)");
  flags.bind(sub, "-k", "localize.k")->check(CLI::Range(1, 100000));
  flags.bind(sub, "-r", "localize.r")->check(CLI::Range(1, 1000));
  flags.bind(sub, "--mode", "llm.mode")->check(CLI::IsMember(kModes));
  add_llm_flags(sub, flags);
  add_verify_flags(sub, rec.localize_args.verify, true);

  return {sub, [args, no_localize](Config& config, Common& common) {
            history_from_config(config, args->history);
            if (auto s = localize_settings(config, args->localize_args); !s) return usage_error(s.error());
            args->localize = !*no_localize;
            return cmd_record(common, *args);
          }};
}

}  // namespace spark::cli
