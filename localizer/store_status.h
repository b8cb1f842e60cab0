// `spark kb status`: what a knowledge base holds, how it was chosen, its local index, ranker and spool, as text.
#pragma once

#include <string>

#include "base/result.h"
#include "store/knowledge_base.h"

namespace spark {

// The status lines of `kb`: its engine and schema, its row counts, its open failures, its generation, the local
// index and ranker, and the reports spooled in `local_folder` (the store's own folder, or local_dir for a server
// store). `chosen_by` says how the store was chosen ("" to leave it out).
Result<std::string> store_status_text(KnowledgeBase& kb, const std::string& chosen_by,
                                      const std::string& local_folder);

}  // namespace spark
