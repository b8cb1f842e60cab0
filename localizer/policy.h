// Filtering policies: filter(τ_f, D, p) = D' (the paper's Definition 1). A policy keeps, by failure time, the subset
// of the knowledge base's labelled cases one query is localized against (the paper calls D the corpus and D' the
// knowledge base; docs/ARCHITECTURE.md, "Names").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/defaults.h"
#include "store/knowledge_base.h"

namespace spark {

struct Policy {
  std::string name = "all";                            // all | all-preceding | closest-by-time | closest-time-preceding
  double window_fraction = defaults::kWindowFraction;  // closest-*: the window is this share of the labelled cases ...
  size_t window = 0;                                   // ... or exactly this many cases when > 0
};

// Parses a policy name; the error lists the known ones.
Result<Policy> parse_policy(const std::string& name);
std::vector<std::string> policy_names();

// Rowids of the labelled cases the policy keeps for a query that failed at `query_epoch`, in ascending rowid.
// all: every labelled case. all-preceding: failure time strictly before the query's. closest-by-time: the `window`
// cases nearest in time (either side; ties by earlier time, then rowid). closest-time-preceding: the `window` nearest
// among the preceding ones. Window size = max(1, ceil(fraction × labelled cases)) unless `window` is set.
std::vector<int64_t> filter_by_policy(std::span<const CaseFacts> cases, int64_t query_epoch, const Policy& policy);
std::vector<int64_t> filter_by_policy(const std::vector<CaseEntry>& cases, int64_t query_epoch, const Policy& policy);

}  // namespace spark
