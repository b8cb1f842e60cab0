// What is asked before "which line", joined to each localization of a run: the failing test's history from the
// recorded outcomes (mining_store.h), what changed since its last pass (git), its verdict (verdict.h) with the
// knowledge base's product examples, and, when an LLM ranked, the suggested edits (suggest.h). `spark localize`,
// `spark record` and anything else that localizes call it after the localizer, on the same results.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "formats/case.h"
#include "localizer/localizer.h"
#include "store/knowledge_base.h"

namespace spark {

struct TriageContext {
  std::string repository = ".";  // the repository the failures are of: its commits' times, its own modules
  std::string commit;            // the commit the failures are at; "" = the work tree (HEAD and its edits)
  std::string test_code;         // `mine.test_code`: what is test code ("" = the default rule)
  std::string since;             // `localize --since`: the commit the tests last passed at ("" = the recorded runs')
};

// Sets each query's change since its test last passed (Case::change, miner/change_since.h), which the ranker's change
// features read: from `triage.since` when given, else from the store's recorded runs of its test (its last pass, and
// the first failure after it); to the failure's commit, or HEAD and the query's files as they are. A query that knows
// its change keeps it; one whose test has no known pass gets none (the features stay 0). An unknown --since is an
// error; what else cannot be read (no repository, a pass a shallow clone lacks) is said in `notes`.
Status add_change_since(KnowledgeBase* kb, const TriageContext& triage, std::vector<Case>& queries,
                        std::vector<std::string>& notes);

// Fills history, verdict and suggestions of each localized result (results[i] is queries[i]'s). A store that cannot
// be read leaves the history out and says so in `notes` or the result's notes; the localization stands. `kb` may be
// null (no knowledge base): the verdict is then the query's alone.
void add_triage(KnowledgeBase* kb, const TriageContext& context, const std::vector<Case>& queries,
                std::vector<Result<Localization>>& results, std::vector<std::string>& notes);

}  // namespace spark
