// The history flags `spark mine`, `record` and `hooks post-commit` share (miner/mining_store.h's HistorySettings), the
// summary a sync prints, and the corpus and quarantine written out.
#pragma once

#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/flags.h"
#include "formats/defaults.h"
#include "miner/mining_store.h"

namespace spark::cli {

// Adds the history options to `sub` (with `many_repos`, --repo may be given several times).
void add_history(CLI::App* sub, Flags& flags, HistorySettings& h, bool many_repos = false);
// The sync's summary on stderr: what was stored (`verb`: "recorded"; "" says nothing of outcomes), what was settled
// and how, the outlier rule.
void print_summary(const SyncReport& r, const std::string& verb);
// Writes the corpus (`output`) and the quarantine (`quarantine`) as JSON Lines where given; the exit code.
int write_exports(MiningStore& store, const std::string& output, const std::string& quarantine);

}  // namespace spark::cli
