// The vector index's lifecycle: a knowledge base's index is a cache of its cases, built when missing, caught up when
// cases arrived since it was saved, built again when it cannot be trusted (made by an older embedder, holding cases
// the store no longer has), and opened a second time when a `spark index` in another process replaced it meanwhile.
// Each command that searches or updates the index goes through one function here:
//   open_or_build_engine  `spark localize` (and `spark record`): the engine a query searches with;
//   update_index          `spark index`: up to date, caught up, or built (again);
//   catch_up_index        `spark import`: the cases just imported added to an existing index;
//   learn_ranker_if_due   the ranker learns again when its labelled cases grew: on an open engine (saying so), or
//                         from the knowledge base alone for a command that localizes nothing (index_build.h has the
//                         step itself).
//
// What each step did is said in `notes` (one sentence each, for stderr), in the order it happened; a failure is an
// error naming the index folder and the command that repairs it. Ownership: a returned engine refers to `kb`, which
// must outlive it. Thread safety: one command per knowledge base and process; another process may build or update
// the same index meanwhile (the manifest switch is atomic).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "localizer/index_build.h"
#include "localizer/search_engine.h"
#include "store/knowledge_base.h"

namespace spark {

// The embedder an index in `index_dir` was made with when an older built-in one ("builtin-tfidf-v1"), else "" (no
// index, another kind, or the current one).
std::string outdated_embedder(const std::filesystem::path& index_dir);

// SearchEngine::open; when the index holds cases the knowledge base no longer has (the store went back: a write lost
// in a power cut, an older backup restored, rows deleted on the server), the index is first built again from the
// store, with the embedder kind it was made by unless `config` names one, and `notes` says why. One rebuild, instead
// of every later command failing until someone runs `spark index --rebuild`. So is an index an earlier spark wrote in
// an earlier format (IndexManifest::kFormat), which the index refuses to load.
Result<std::unique_ptr<SearchEngine>> open_or_rebuild(KnowledgeBase& kb, EmbedderConfig config,
                                                      std::vector<std::string>& notes, bool verify_vectors = true);

// The engine a localization searches with; null when the knowledge base holds no case. An index missing (the first
// case was just learnt, say by `spark record`) or made by an older built-in embedder is built first, as `spark index`
// would; then it is opened as a query needs it (vectors mapped, not every byte verified: open_or_rebuild), the cases
// added since its save embedded; the store's reads then go through a memory map (KnowledgeBase::map_reads). An index
// replaced by another process between reading its manifest and its files is opened again once. An index that still
// cannot be opened is damaged or incomplete: the error says so and names `spark index --rebuild`.
Result<std::unique_ptr<SearchEngine>> open_or_build_engine(KnowledgeBase& kb, const EmbedderConfig& config,
                                                           std::vector<std::string>& notes);

// What `spark index` did (update_index).
struct IndexUpdate {
  enum class Outcome {
    up_to_date,  // the index matches the store and every file its checksum: nothing built
    caught_up,   // the cases added since its save were embedded with its statistics and added
    built,       // built (again) from every case of the store
  };
  Outcome outcome = Outcome::built;
  size_t cases = 0;                 // up_to_date, caught_up: the cases the index holds
  std::string kind;                 // up_to_date: flat | hnsw
  size_t added = 0;                 // caught_up: the cases added
  double seconds = 0;               // caught_up, built: how long it took
  IndexReport report;               // built: what build_index made
  std::vector<std::string> learnt;  // caught_up: the ranker's notes, said after the outcome
};

// `spark index`: with `rebuild` false, an index up to date is verified (every file against its checksum) and the
// ranker learns again when due; one the store has grown by at most a quarter since (an import interrupted before its
// index update, records from other tools) is caught up, the statistics kept; anything else — no index, an older
// embedder, another embedder kind than `config` names, cases removed or replaced, a damaged file, more cases added —
// is built from scratch, as it is with `rebuild`. Why it was built again is in `notes`, said before the outcome.
Result<IndexUpdate> update_index(KnowledgeBase& kb, const EmbedderConfig& config, bool rebuild,
                                 std::vector<std::string>& notes);

// What `spark import` did to an existing index (catch_up_index).
struct IndexCatchUp {
  size_t added = 0;                 // the cases embedded and added (0 when it was built again)
  bool rebuilt = false;             // built again: why is in `notes` (else `notes` holds nothing to say)
  std::vector<std::string> learnt;  // the ranker's notes
  std::optional<Error> not_saved;   // the index could not be saved (a full disk): the next command catches it up
};

// After an import of new cases into a store with an index: opens the index (every file verified: open_or_rebuild),
// embeds the new cases with its statistics, lets the ranker learn when due (learn_ranker_if_due) and saves it. An
// error when the index cannot be opened; a failed save is not_saved, the cases being committed already.
Result<IndexCatchUp> catch_up_index(KnowledgeBase& kb, const EmbedderConfig& config, std::vector<std::string>& notes);

// With an open engine: learns its ranker again when due (learn_ranker_if_due) and says so in `notes`; true when it
// learnt (the caller's persist() saves it). A failure is a note: the ranker stays as it was, and the command goes on.
bool learn_ranker_if_due(KnowledgeBase& kb, SearchEngine& engine, std::vector<std::string>& notes);

// With the knowledge base alone (`spark record` localizing nothing, `spark index` on an index up to date): when the
// ranker is due to learn, opens the index (open_or_rebuild, its notes said when it was built again), learns, saves
// and says so in `notes`. An index not built yet is left to the command that builds it. An error when the index
// could not be opened or saved: the ranker then stays as it was.
Status learn_ranker_if_due(KnowledgeBase& kb, const EmbedderConfig& config, std::vector<std::string>& notes);

// What `spark index` prints of an update (stdout); the ranker's notes (`learnt`) are said apart.
std::string index_update_text(const IndexUpdate& update, const std::filesystem::path& index_dir);

// After `spark import` stored `summary`: an existing index caught up with the new cases (catch_up_index). What it
// prints on stdout is returned; what it says on stderr goes to `notes`. The cases are committed by then, so an index
// that could not be opened or saved is a note (the next command that opens it catches it up), not an error.
std::string index_after_import(KnowledgeBase& kb, const EmbedderConfig& config, const ImportSummary& summary,
                               std::vector<std::string>& notes);

// `spark kb status`'s ranker line: what it learnt from, when, and when it learns next; "" without an index.
std::string ranker_status(KnowledgeBase& kb);

// A knowledge base and its search engine, opened for one localization run.
struct OpenedIndex {
  std::unique_ptr<KnowledgeBase> kb;
  std::unique_ptr<SearchEngine> engine;  // none when the knowledge base holds no case
  bool ranker_relearnt = false;          // the ranker learnt again before this run (saved with the index after it)
};
// Opens `kb`'s engine (open_or_build_engine); when labelled cases arrived since the ranker last learnt, it learns
// again before the run ranks (learn_ranker_if_due). Searches then run one at a time, on the calling thread.
Result<OpenedIndex> open_for_run(std::unique_ptr<KnowledgeBase> kb, const EmbedderConfig& config,
                                 std::vector<std::string>& notes);
// After the run: cases learned since the index was built were embedded for it, and a ranker may have learnt again;
// both are kept with the index, so no manual `spark index` is needed (the embedder's statistics are refitted only by
// `spark index --rebuild`). A failed save is a note.
void keep_what_the_run_learnt(OpenedIndex& r, std::vector<std::string>& notes);

}  // namespace spark
