#include "history.h"

#include "base/text.h"
#include "recording.h"

namespace spark::cli {

void add_history(CLI::App* sub, Flags& flags, HistoryArgs& h, bool many_repos) {
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

void history_from_config(const Config& config, HistoryArgs& h) {
  h.sigma = config.number("mine.sigma");
  h.test_only_fixes = config.boolean("mine.test_only_fixes");
  h.test_code = config.str("mine.test_code");
  h.project = config.str("project");
}

Result<SyncOptions> sync_options(const HistoryArgs& h) {
  SyncOptions o;
  o.first_parent = !h.all_parents;
  o.sigma = h.sigma;
  o.project = h.project;
  o.test_only_fixes = h.test_only_fixes;
  if (!h.test_code.empty()) {
    auto rule = TestCodeRule::parse(h.test_code);
    TRY(rule);
    o.test_code = std::move(*rule);
  }
  for (const auto& [text, slot] : {std::pair{h.since, &o.since}, std::pair{h.until, &o.until}}) {
    if (text.empty()) continue;
    // A date alone is its midnight, UTC.
    const bool date_only = text.size() == 10 && text[4] == '-' && text[7] == '-';
    auto t = parse_iso8601(date_only ? text + "T00:00:00Z" : text);
    if (!t)
      return fail("--since/--until \"" + text + "\" is neither a date (2023-01-01) nor an ISO-8601 time " +
                  "(2023-01-01T12:00:00Z)");
    *slot = *t;
  }
  return o;
}

void print_summary(const SyncReport& r, const std::string& verb) {
  for (const auto& n : sync_notes(r, verb)) note(n);
}

namespace {

std::string cases_jsonl(const std::vector<StoredFailure>& failures) {
  std::string out;
  for (const auto& f : failures)
    if (f.labelled) out += json_text(case_to_json(*f.labelled)) + "\n";
  return out;
}

}  // namespace

int write_exports(MiningStore& store, const std::string& output, const std::string& quarantine) {
  if (!output.empty()) {
    auto corpus = store.failures(corpus_statuses());
    if (!corpus) return report_error(corpus.error());
    if (int rc = write_output(output, cases_jsonl(*corpus)); rc != 0) return rc;
  }
  if (!quarantine.empty()) {
    auto q = store.failures({FailureStatus::quarantined});
    if (!q) return report_error(q.error());
    if (int rc = write_output(quarantine, cases_jsonl(*q)); rc != 0) return rc;
  }
  return 0;
}

}  // namespace spark::cli
