// What `spark mine --discover` reports: the fix candidates of a scan (as text or JSON Lines), what the scan and the
// runs came to, as the lines spark prints on stderr.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/progress.h"
#include "base/result.h"
#include "miner/discover.h"
#include "miner/mining_store.h"

namespace spark {

// The candidates, one per line with their tests below (text), or one JSON object per line.
std::string candidates_text(const std::vector<FixCandidate>& candidates);
std::string candidates_jsonl(const std::vector<FixCandidate>& candidates);

// What the scan of `repo` found, and what it left out and why.
std::vector<std::string> scan_notes(const std::string& repo, const ScanReport& r,
                                    const std::vector<FixCandidate>& candidates, bool first_parent);

// What the runs came to, over every candidate.
struct RunTotals {
  size_t candidates = 0, runs = 0, reused = 0, fixes = 0, flaky = 0, fail_at_commit = 0, pass_at_parent = 0;
  size_t gone_at_commit = 0, unrunnable_known = 0;
  size_t breaks_found = 0, breaks_not_found = 0, breaks_unknown = 0, break_runs = 0;
  size_t break_search = 0;                                           // DiscoverOptions::break_search, for the note
  std::vector<std::pair<std::string, std::string>> passes_found;     // CandidateRuns::passes_found, of every candidate
  std::map<std::string, std::pair<size_t, std::string>> unrunnable;  // reason → (count, an example)
  std::vector<std::string> skipped;                                   // commits that did not check out
  size_t setups = 0;
  double setup_seconds = 0, run_seconds = 0;

  void add(const CandidateRuns& r);
};

// What the runs came to (`confirm`: the extra runs at the parent that confirm a fix).
std::vector<std::string> run_notes(const RunTotals& t, unsigned confirm);

// The runs of `repo`'s candidates (discover_fixes), their outcomes stored in `store` as each candidate ends (under
// `options`), their progress shown (DiscoverProgress), and what they came to added to `totals`.
Status discover_into(MiningStore& store, const GitRepository& repo, const std::vector<FixCandidate>& candidates,
                     const DiscoverOptions& d, const SyncOptions& options, RunTotals& totals);

// --shard I/N as (I - 1, N); "" is (0, 1), every commit.
Result<std::pair<unsigned, unsigned>> parse_shard(const std::string& text);

// The runs' progress on stderr (base/progress.h) after each test: on a terminal one line rewritten in place, else at
// most every 10 seconds. The time left is estimated from the tests done (a candidate can hold hundreds).
class DiscoverProgress {
 public:
  explicit DiscoverProgress(const std::vector<FixCandidate>& candidates);
  void tested(const CandidateRuns& r);
  void candidate_done(const RunTotals& t);
  // Ends a terminal's line that an early stop left open.
  void finish() const;

 private:
  void show(bool last);

  ProgressLine line_;
  size_t tests_ = 0, done_ = 0, runs_ = 0, candidates_ = 0, fixes_ = 0, unrunnable_ = 0;
  std::string last_reason_;                                            // the latest could-not-run's reason
  std::map<const FixCandidate*, std::pair<size_t, size_t>> runs_of_;  // (runs, could-not-run) counted so far
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double shown_ = -1e9;
};

}  // namespace spark
