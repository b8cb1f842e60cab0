#include "cli/history.h"

#include "base/text.h"
#include "miner/recording.h"

namespace spark::cli {

void add_history(CLI::App* sub, Flags& flags, HistorySettings& h, bool many_repos) {
  if (many_repos)
    sub->add_option("--repo", h.repos, "the git repository (default .); --discover: may be given several times")
        ->check(CLI::ExistingDirectory);
  else
    sub->add_option("--repo", h.repo, "the git repository (default .)")->check(CLI::ExistingDirectory);
  sub->add_flag("--all-parents", h.all_parents, "walk every parent, not only the first-parent line");
  sub->add_option("--since", h.since, "only commits from this time (2023-01-01, or an ISO-8601 time)");
  sub->add_option("--until", h.until, "only commits up to this time (2023-01-01, or an ISO-8601 time)");
  flags.bind(sub, "--sigma", "mine.sigma")->check(CLI::Range(0.0, 100.0));
  flags.bind(sub, "--project", "project");
  flags.bind_switch(sub, "--test-only-fixes", "mine.test_only_fixes", "true",
                    "label only fixes that changed nothing but test code");
}

void print_summary(const SyncReport& r, const std::string& verb) {
  for (const auto& n : sync_notes(r, verb)) note(n);
}

int write_exports(MiningStore& store, const std::string& output, const std::string& quarantine) {
  if (!output.empty()) {
    auto corpus = store.cases_jsonl(corpus_statuses());
    if (!corpus) return report_error(corpus.error());
    if (int rc = write_output(output, *corpus); rc != 0) return rc;
  }
  if (!quarantine.empty()) {
    auto q = store.cases_jsonl({FailureStatus::quarantined});
    if (!q) return report_error(q.error());
    if (int rc = write_output(quarantine, *q); rc != 0) return rc;
  }
  return 0;
}

}  // namespace spark::cli
