// `spark record`: a JUnit report's outcomes stored (miner/recording.h), the failures it opened localized at once.
#pragma once

#include <string>

#include "cli/common.h"
#include "cli/history.h"
#include "cli/localize.h"
#include "miner/git_history.h"

namespace spark::cli {

struct RecordArgs {
  HistorySettings history;
  std::string junit;
  std::string commit;  // default HEAD
  bool localize = true;
  LocalizeArgs localize_args;
};

// Records the report args.junit at args.commit of `repo` (args.history.repo is not read: `repo` is it); the exit
// code. The post-commit hook records its runs through this too.
int record_report(const Common& common, const GitRepository& repo, const RecordArgs& args);

}  // namespace spark::cli
