// `spark mine`: cases from a repository's history — from recorded outcomes, by running the tests to find a known
// failure's fix (--run), or with --discover every test-code fix of the history, found by running the candidates at
// each commit and its parent (miner/discover.h), with their progress and totals on stderr and the sync that labels
// the fixes found.
#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/history.h"
#include "localizer/case_embedding.h"  // index_threads
#include "miner/discover.h"
#include "miner/discover_report.h"
#include "miner/git_history.h"
#include "miner/miner.h"
#include "miner/runner.h"

namespace spark::cli {

namespace {

struct MineArgs {
  HistorySettings history;
  std::vector<std::string> outcomes;
  std::string commit;      // for JUnit reports not named <sha>.xml
  std::string output;      // also write this run's labelled cases here ("-" = standard output)
  std::string quarantine;  // also write this run's quarantined cases here
  // --run: find the fix by running the tests (no recorded outcomes).
  std::string run;  // "CMD {test_id}"
  std::vector<std::string> tests;
  std::string from;  // the failing commit
  std::string to = "HEAD";
  double timeout = 600;
  // --discover: every test-code fix of the history, found by running the candidates at each commit and its parent.
  bool discover = false;
  bool dry_run = false;           // list the candidates, run nothing
  unsigned jobs = 1;              // runs at once
  std::string shard;              // "I/N": this runner's part of the commits
  bool retry_unrunnable = false;  // run again what was stored as could-not-run
  size_t max_tests = 100;         // a commit reaching more tests is left out (0: no bound)
  size_t break_search = 64;       // how far back each fix's last pass is searched (0: not searched)
};

// The runs of one repository's candidates, then the sync that labels the fixes they found.
int discover_in(const GitRepository& repo, const std::vector<FixCandidate>& candidates, const MineArgs& args,
                const SyncOptions& options, KnowledgeBase& kb) {
  MiningStore store(kb);
  DiscoverOptions d;
  d.command = args.run;
  d.timeout = args.timeout;
  d.jobs = args.jobs;
  d.retry_unrunnable = args.retry_unrunnable;
  d.break_search = args.break_search;
  RunTotals totals;
  totals.break_search = d.break_search;
  const Status ran = discover_into(store, repo, candidates, d, options, totals);
  if (const int signal = stop_signal_caught()) {
    note(ran ? "discover: stopped by " + signal_name(signal) : ran.error().message);
    note("discover: the tests decided before it are stored; the same command continues where it stopped");
    return 128 + signal;
  }
  if (!ran) return report_error(ran.error());
  for (const auto& n : run_notes(totals, d.confirm)) note(n);
  // The failures found lie at the parents of the walked commits, which a time range can leave out.
  SyncOptions labelling = options;
  labelling.since.reset();
  labelling.until.reset();
  auto report = store.sync(repo, {}, labelling);
  if (!report) return report_error(report.error());
  // Cases an earlier discovery labelled before their last pass was known get what changed since.
  auto caught_up = store.add_change_since(repo, totals.passes_found, labelling);
  if (!caught_up) return report_error(caught_up.error());
  if (*caught_up)
    note("discover: " + plural(*caught_up, "case") + " labelled before gained what changed since the last pass");
  print_summary(*report, "");
  return 0;
}

// `spark mine --discover`.
int cmd_discover(const Common& common, const MineArgs& args) {
  if (!args.outcomes.empty() || !args.tests.empty() || !args.from.empty())
    return usage_error("--discover finds the failures itself: no --outcomes, --test or --from with it");
  if (args.run.empty() && !args.dry_run)
    return usage_error("--discover needs --run \"CMD {test_id}\": the command that runs one test");
  if (!args.run.empty() && !names_a_test(args.run))
    return usage_error("--run: the command must name the test with {test_id} or {file} (and {function}, {class})");
  auto shard = parse_shard(args.shard);
  if (!shard) return usage_error(shard.error());
  auto options = sync_options(args.history);
  if (!options) return report_error(options.error());
  std::unique_ptr<KnowledgeBase> kb;
  if (!args.dry_run) {
    auto opened = open_kb(common, true);
    if (!opened) return report_error(opened.error());
    kb = std::move(*opened);
  }
  const std::vector<std::string> repos =
      args.history.repos.empty() ? std::vector<std::string>{"."} : args.history.repos;
  std::string listed;
  for (const auto& path : repos) {
    auto repo = GitRepository::open(path);
    if (!repo) return report_error(repo.error());
    if ((*repo)->root_commit().empty())
      return report_error(fail(path + ": the repository has no commits: nothing to discover").error());
    ScanOptions scan{options->first_parent, options->since, options->until, options->test_only_fixes,
                     options->test_code,    shard->first,   shard->second,  args.max_tests,
                     index_threads(0)};
    ScanReport scanned;
    auto candidates = scan_fix_candidates(**repo, scan, scanned);
    if (!candidates) return report_error(candidates.error());
    for (const auto& n : scan_notes(path, scanned, *candidates, options->first_parent)) note(n);
    if (args.dry_run) {
      listed += args.output.empty() ? candidates_text(*candidates) : candidates_jsonl(*candidates);
      continue;
    }
    // A stop signal ends the runs under way, their processes and work trees, then spark as the signal would.
    int rc = 0;
    {
      StopSignals stop;
      rc = discover_in(**repo, *candidates, args, *options, *kb);
    }
    if (const int signal = stop_signal_caught()) {
      kb.reset();
      end_by_signal(signal);
    }
    if (rc != 0) return rc;
  }
  if (args.dry_run) return write_output(args.output.empty() ? "" : args.output, listed);
  MiningStore store(*kb);
  return write_exports(store, args.output, args.quarantine);
}

int cmd_mine(const Common& common, const MineArgs& given) {
  if (given.discover) return cmd_discover(common, given);
  if (given.history.repos.size() > 1) return usage_error("--repo may be given several times only with --discover");
  MineArgs args = given;
  if (!given.history.repos.empty()) args.history.repo = given.history.repos.front();
  if (args.dry_run || args.jobs != 1 || !args.shard.empty() || args.retry_unrunnable || args.max_tests != 100 ||
      args.break_search != 64)
    return usage_error(
        "--dry-run, -j, --shard, --max-tests-per-commit, --retry-unrunnable and --break-search go with --discover");
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
  std::vector<std::string> notes;
  auto outcomes = read_outcome_files(args.outcomes, args.commit, **repo, notes);
  for (const auto& n : std::exchange(notes, {})) note(n);
  if (!outcomes) return report_error(outcomes.error());
  if (!args.run.empty()) {
    options->tip = args.to;
    BisectOptions bisect;
    bisect.command = args.run;
    bisect.timeout = args.timeout;
    bisect.first_parent = options->first_parent;
    bisect.progress = [](const std::string& line) { note("run: " + line); };
    auto found = bisect_fixes(**repo, args.tests, args.from, args.to, bisect, note);
    if (!found) return report_error(found.error());
    for (auto& o : *found) outcomes->push_back(std::move(o));
  }
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  MiningStore store(**kb);
  auto report = store.sync(**repo, *outcomes, *options);
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
  sub->add_flag(
      "--dry-run", mine_args.dry_run,
      "with --discover: list the candidates and why, run nothing (with -o FILE: as JSON Lines there instead)");
  sub->add_option("-j,--jobs", mine_args.jobs, "with --discover: runs at once (default 1)")->check(CLI::Range(1, 256));
  sub->add_option("--shard", mine_args.shard,
                  "with --discover: I/N, this runner's share of the commits (several runners, one shared store)");
  sub->add_option("--max-tests-per-commit", mine_args.max_tests,
                  "with --discover: leave out (and name) a commit whose change reaches more tests than this, a shared "
                  "hook or set-up (default 100; 0: no bound)");
  sub->add_flag("--retry-unrunnable", mine_args.retry_unrunnable,
                "with --discover: run again the tests stored as could-not-run (after fixing the environment)");
  sub->add_option("--break-search", mine_args.break_search,
                  "with --discover: how many commits back from each fix's failure its last pass is searched, by "
                  "doubling then bisecting (default 64; 0: not searched)")
      ->check(CLI::Range(0, 100000));

  return {sub, [args](Config& config, Common& common) {
            history_from_config(config, args->history);
            return cmd_mine(common, *args);
          }};
}

}  // namespace spark::cli
