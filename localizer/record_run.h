// `spark record`'s steps before its failures are localized, for the command line and the MCP server's `record` tool:
// a JUnit report's outcomes read at a commit, stored (miner/recording.h's store_report, with its retries and spool),
// the open failures whose test is gone at that commit expired, and the failures the report opened turned into queries
// from git objects at the commit. A report run in a work tree that differs from HEAD stores nothing: its outcomes are
// not HEAD's (`changed` says why). Everything a person should hear goes to `note`, in the order the command prints it.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "formats/case.h"
#include "miner/git_history.h"
#include "miner/mining_store.h"
#include "miner/recording.h"

namespace spark {

struct RecordRequest {
  std::string junit;         // the report
  std::string commit;        // the commit tested; "" = HEAD
  HistorySettings history;   // its `repo` is not read: the repository is given
  RecordingStore where;      // where the outcomes go
  bool want_queries = true;  // turn the failures the report opened into queries
};

struct RecordedRun {
  std::string commit;                // the full sha tested
  std::vector<std::string> changed;  // not empty: the work tree differs from HEAD, and nothing was stored
  bool stored = false;               // the outcomes were stored
  SyncReport sync;                   // the sync's report, when stored (its snapshots already spent)
  std::vector<Case> queries;         // the failures the report opened, at `commit` (with want_queries)
};

Result<RecordedRun> record_outcomes(const GitRepository& repo, const RecordRequest& request, const NoteSink& note);

}  // namespace spark
