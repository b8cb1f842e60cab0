#include "mine.h"

#include "commands.h"
#include "flags.h"
#include "git_history.h"
#include "miner.h"
#include "runner.h"

namespace spark::cli {

namespace {

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

}  // namespace

Command add_mine(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<MineArgs>();
  MineArgs& mine_args = *args;
  auto* sub = app.add_subcommand("mine",
                                 "label failures from git history into the knowledge base: each failure's "
                                 "first later passing commit is its fix");
  add_history(sub, flags, mine_args.history, /*many_repos=*/true);
  sub->add_option("--outcomes", mine_args.outcomes, "outcome files: JSON Lines (.jsonl) or JUnit XML (<sha>.xml)")
      ->check(CLI::ExistingFile);
  sub->add_option("--commit", mine_args.commit, "the commit of JUnit reports not named <sha>.xml");
  sub->add_option("-o,--output", mine_args.output,
                  "also write the mined corpus (every labelled case) as JSON Lines "
                  "(- = standard output)");
  sub->add_option("--quarantine", mine_args.quarantine, "also write the quarantined cases as JSON Lines");
  sub->add_option("--run", mine_args.run,
                  "no recorded outcomes: run this command per commit, e.g. "
                  "\"python3 -m pytest {test_id}\" (exit 0 = passed)");
  sub->add_option("--test", mine_args.tests, "with --run: a test that fails at --from");
  sub->add_option("--from", mine_args.from, "with --run: the commit the tests fail at");
  sub->add_option("--to", mine_args.to, "with --run: the end of the range searched for the fix (default HEAD)");
  sub->add_option("--run-timeout", mine_args.timeout, "with --run: seconds per run (default 600)")
      ->check(CLI::Range(0.1, 86400.0));
  sub->add_flag("--discover", mine_args.discover,
                "no recorded outcomes, no known failure: find every test-code fix of the history by running each "
                "candidate test at the commit and its parent ({test_id}, {file}, {function}, {class} in --run)");
  sub->add_flag("--dry-run", mine_args.dry_run, "with --discover: list the candidates and why, run nothing (with -o FILE: as JSON Lines there instead)");
  sub->add_option("-j,--jobs", mine_args.jobs, "with --discover: runs at once (default 1)")->check(CLI::Range(1, 256));
  sub->add_option("--shard", mine_args.shard,
                  "with --discover: I/N, this runner's share of the commits (several runners, one shared store)");
  sub->add_option("--max-tests-per-commit", mine_args.max_tests,
                  "with --discover: leave out (and name) a commit whose change reaches more tests than this, a shared "
                  "hook or set-up (default 100; 0: no bound)");
  sub->add_flag("--retry-unrunnable", mine_args.retry_unrunnable,
                "with --discover: run again the tests stored as could-not-run (after fixing the environment)");

  return {sub, [args](Config& config, Common& common) {
            history_from_config(config, args->history);
            return cmd_mine(common, *args);
          }};
}

}  // namespace spark::cli
