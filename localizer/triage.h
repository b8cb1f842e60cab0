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
};

// Fills history, verdict and suggestions of each localized result (results[i] is queries[i]'s). A store that cannot
// be read leaves the history out and says so in `notes` or the result's notes; the localization stands. `kb` may be
// null (no knowledge base): the verdict is then the query's alone.
void add_triage(KnowledgeBase* kb, const TriageContext& context, const std::vector<Case>& queries,
                std::vector<Result<Localization>>& results, std::vector<std::string>& notes);

}  // namespace spark
