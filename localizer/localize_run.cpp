#include "localizer/localize_run.h"

#include <optional>

#include "code/structure_cache.h"
#include "localizer/index_lifecycle.h"
#include "localizer/llm_stage.h"

namespace spark {

Result<LocalizeRunResult> localize_run(LocalizeRun& run, std::vector<Case>& queries, std::vector<std::string>& notes) {
  const LocalizeSettings& settings = *run.settings;
  auto stage = stage_options(settings, run.redactor);
  TRY(stage);
  OpenedIndex retrieval;
  if (run.kb) {
    auto opened = open_for_run(std::move(run.kb), run.embedder, notes);
    TRY(opened);
    retrieval = std::move(*opened);
  }
  TRY(add_change_since(retrieval.kb.get(), run.triage, queries, notes));
  Localizer localizer(retrieval.kb.get(), retrieval.engine.get());
  std::optional<LlmClient> client;
  if (settings.llm && stage->mode != Mode::builtin) {
    LlmOptions o = with_run_deadline(*settings.llm, settings.llm_deadline);
    if (run.on_client) run.on_client(o);
    client.emplace(std::move(o));
  }
  StructureCache cache;
  if (retrieval.engine) {
    // Parsed test-file versions persist: a later process localizing a failure of a version it has seen reads its
    // structure instead of parsing the file again.
    retrieval.engine->structures().persist_in(run.structures);
    cache.persist_in(run.structures);
  }
  LlmStage llm_stage(localizer, cache, client ? &*client : nullptr, std::move(*stage));
  LocalizeRunResult out;
  out.results = llm_stage.run(queries, run.options, run.progress);
  out.llm_asked = client.has_value();
  add_triage(retrieval.kb.get(), run.triage, queries, out.results, notes);
  keep_what_the_run_learnt(retrieval, notes);
  return out;
}

}  // namespace spark
