// One localization run, as `spark localize` and `spark record` make it (and an agent's request would): the failures'
// queries ranked against a store with a localization's settings — the store opened for the run (open_for_run), the
// LLM asked when the mode wants one, the run itself (LlmStage), the triage joined, and what the run learnt kept.
// Nothing is printed: notes are returned, and the caller shows the results (report.h's report_run).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/redact.h"
#include "localizer/case_embedding.h"
#include "localizer/settings.h"
#include "localizer/triage.h"
#include "store/knowledge_base.h"

namespace spark {

struct LocalizeRun {
  const LocalizeSettings* settings = nullptr;
  LocalizeOptions options;                   // the settings' localize options, with the run's own (--explain)
  std::shared_ptr<const Redactor> redactor;  // null: redaction off
  std::unique_ptr<KnowledgeBase> kb;         // none: no knowledge base (the built-in ranker ranks alone)
  EmbedderConfig embedder;
  // Where parsed test-file versions persist between processes (StructureCache::persist_in); "" = not kept.
  std::filesystem::path structures;
  TriageContext triage;
  // Set on the LLM client's options before the client is made (a waiting line, say); may be empty.
  std::function<void(LlmOptions&)> on_client;
  std::function<void(size_t, size_t)> progress;  // the LLM stage's: queries done, in all
};

struct LocalizeRunResult {
  std::vector<Result<Localization>> results;  // results[i] is queries[i]'s
  bool llm_asked = false;                     // an LLM client was made for the run
};

// Runs `run` over `queries`; an error when the store, its index or the template cannot be opened.
// Each query's change since its last pass is set first (add_change_since).
Result<LocalizeRunResult> localize_run(LocalizeRun& run, std::vector<Case>& queries, std::vector<std::string>& notes);

}  // namespace spark
