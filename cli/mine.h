// `spark mine`: cases from a repository's history (recorded outcomes, or running the tests), and --discover, which
// finds every test-code fix of the history by running the candidates (cli/discover.cpp).
#pragma once

#include <string>
#include <vector>

#include "common.h"
#include "history.h"

namespace spark::cli {

struct MineArgs {
  HistoryArgs history;
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
};

// `spark mine --discover`.
int cmd_discover(const Common& common, const MineArgs& args);

}  // namespace spark::cli
