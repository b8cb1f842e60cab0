// What `spark mine --discover` reports: the fix candidates of a scan (as text or JSON Lines), what the scan and the
// runs came to, as the lines spark prints on stderr.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "discover.h"

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
  std::map<std::string, std::pair<size_t, std::string>> unrunnable;  // reason → (count, an example)
  std::vector<std::string> skipped;                                   // commits that did not check out
  size_t setups = 0;
  double setup_seconds = 0, run_seconds = 0;

  void add(const CandidateRuns& r);
};

// What the runs came to (`confirm`: the extra runs at the parent that confirm a fix).
std::vector<std::string> run_notes(const RunTotals& t, unsigned confirm);

}  // namespace spark
