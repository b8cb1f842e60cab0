// `spark hooks install | uninstall | post-commit`: the git post-commit hook that re-runs the tests with open failures
// after each commit and records their outcomes.

#include <filesystem>

#include "base/process.h"
#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/record.h"
#include "miner/recording.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

struct HooksArgs {
  std::string action;  // install | uninstall | post-commit
  std::string repo = ".";
  std::string test_command;  // post-commit: "CMD {junit} {tests}"
  double timeout = defaults::kHookTimeout;
  std::string spark_path;  // install: the spark binary the hook calls
  HistorySettings history;
};

int hooks_install(const HooksArgs& args, const GitRepository& repo) {
  if (auto s = install_post_commit_hook(repo, args.spark_path, [](const std::string& n) { note(n); }); !s)
    return report_error(s.error());
  note(hook_does_text(args.test_command));
  return 0;
}

int hooks_uninstall(const GitRepository& repo) {
  if (auto s = uninstall_post_commit_hook(repo, [](const std::string& n) { note(n); }); !s)
    return report_error(s.error());
  return 0;
}

// After a commit: the tests with open failures run again (record.test_command), and their outcomes are recorded.
int hooks_post_commit(const Common& common, const HooksArgs& args, const GitRepository& repo) {
  if (!kb_exists(common)) return 0;  // nothing recorded yet
  std::vector<std::string> tests;
  {
    auto kb = open_kb(common, false);
    if (!kb) return report_error(kb.error());
    std::vector<std::string> notes;
    auto targets = rerun_targets(**kb, repo.workdir(), notes);
    for (const auto& n : notes) note(n);
    if (!targets) return report_error(targets.error());
    tests = std::move(*targets);
  }
  if (tests.empty()) return 0;
  if (args.test_command.empty()) {
    note(hook_needs_command_text(tests.size()));
    return 0;
  }
  auto made = make_temp_dir("spark-hook");
  if (!made) return report_error(made.error());
  const fs::path tmp = *made;
  const fs::path junit = tmp / "report.xml";
  note("re-running " + plural(tests.size(), "test") + " with open failures");
  int rc = 0;
  if (auto ran = rerun_tests(args.test_command, tests, repo.workdir(), junit, args.timeout); !ran) {
    rc = report_error(ran.error());
  } else {
    RecordArgs record;
    record.history = args.history;
    record.history.repo = repo.workdir().string();
    record.junit = junit.string();
    record.localize = false;
    rc = record_report(common, repo, record);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return rc;
}

int cmd_hooks(const Common& common, const HooksArgs& args) {
  auto repo = GitRepository::open(args.repo);
  if (!repo) return report_error(repo.error());
  if (args.action == "install") return hooks_install(args, **repo);
  if (args.action == "uninstall") return hooks_uninstall(**repo);
  return hooks_post_commit(common, args, **repo);
}

}  // namespace

Command add_hooks(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<HooksArgs>();
  auto* sub = app.add_subcommand("hooks", "git hooks: install | uninstall the post-commit hook; post-commit runs it");
  sub->add_option("action", args->action, "install | uninstall | post-commit")
      ->required()
      ->check(CLI::IsMember({"install", "uninstall", "post-commit"}));
  add_history(sub, flags, args->history);
  sub->add_option("--spark", args->spark_path, "install: the spark binary the hook runs (default: this one)");
  flags.bind(sub, "--test-command", "record.test_command",
             "post-commit: re-runs tests, {tests} = test ids, {junit} = report path");
  return {sub, [args](Config& config, Common& common) {
            history_from_config(config, args->history);
            args->test_command = config.str("record.test_command");
            args->timeout = config.number("record.timeout");
            if (args->spark_path.empty()) {
              std::error_code ec;
              auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
              args->spark_path = ec ? std::string("spark") : self.string();
            }
            args->repo = args->history.repo;
            return cmd_hooks(common, *args);
          }};
}

}  // namespace spark::cli
