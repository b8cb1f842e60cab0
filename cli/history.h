// The history options `spark mine`, `record` and `hooks post-commit` share, the sync's options made from them, and the
// summary a sync prints.
#pragma once

#include <string>
#include <vector>

#include "common.h"
#include "flags.h"
#include "formats/defaults.h"
#include "mining_store.h"

namespace spark::cli {

// The miner and the CI lifecycle (cli/lifecycle.cpp).
struct HistoryArgs {
  std::string repo = ".";
  std::vector<std::string> repos;  // `spark mine`: --repo given several times
  bool all_parents = false;
  std::string since, until;  // ISO-8601
  double sigma = defaults::kSigma;
  std::string project;
  bool test_only_fixes = false;
  std::string test_code;  // `mine.test_code`: globs of test code ("" = the default rule)
};

// Adds the history options to `sub` (with `many_repos`, --repo may be given several times).
void add_history(CLI::App* sub, Flags& flags, HistoryArgs& h, bool many_repos = false);
// The configuration's part of them (flags already applied to it).
void history_from_config(const Config& config, HistoryArgs& h);
// The sync's options; an error names a bad --since/--until or test-code glob.
Result<SyncOptions> sync_options(const HistoryArgs& h);
// The sync's summary on stderr: what was stored (`verb`: "recorded"; "" says nothing of outcomes), what was settled
// and how, the outlier rule.
void print_summary(const SyncReport& r, const std::string& verb);
// Writes the corpus (`output`) and the quarantine (`quarantine`) as JSON Lines where given; the exit code.
int write_exports(MiningStore& store, const std::string& output, const std::string& quarantine);

}  // namespace spark::cli
