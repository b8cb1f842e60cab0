#include "localizer/index_lifecycle.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/clock.h"
#include "base/text.h"

namespace spark {

namespace fs = std::filesystem;

std::string outdated_embedder(const fs::path& index_dir) {
  if (!path_exists(index_dir / "manifest.json")) return "";
  auto m = VectorIndex::read_manifest(index_dir);
  if (!m || !HashedTfidfEmbedder::is_outdated(m->embedder)) return "";
  return m->embedder.substr(0, m->embedder.find('/'));
}

Result<std::unique_ptr<SearchEngine>> open_or_rebuild(KnowledgeBase& kb, EmbedderConfig config,
                                                      std::vector<std::string>& notes, bool verify_vectors) {
  std::string lost;
  auto engine = SearchEngine::open(kb, config, notes, verify_vectors, &lost);
  if (engine) return engine;
  // An index an earlier spark wrote in its format: load() refuses it, naming its manifest; a build writes this one's.
  auto m = VectorIndex::read_manifest(kb.index_dir());
  const bool earlier_format = m && m->format != IndexManifest::kFormat;
  if (lost.empty() && !earlier_format) return engine;
  if (config.kind.empty() && m && m->embedder.starts_with("openai/")) config.kind = "openai";
  auto built = build_index(kb, config, IndexBuildOptions{});
  if (earlier_format) {
    if (!built) return fail(engine.error().message + " (could not be built again: " + built.error().message + ")");
    notes.push_back("the vector index was written in an earlier spark's format (" +
                    (kb.index_dir() / "manifest.json").string() + ": format " + std::to_string(m->format) +
                    ", this spark reads " + std::to_string(IndexManifest::kFormat) + "): rebuilt it over " +
                    std::to_string(built->cases) + " case(s), as `spark index` does");
    return SearchEngine::open(kb, config, notes, verify_vectors);
  }
  if (!built)
    return fail("the vector index in " + kb.index_dir().string() + " holds cases the knowledge base no longer has (" +
                lost + ") and could not be built again: " + built.error().message);
  notes.push_back("the vector index held cases the knowledge base no longer has (" + lost +
                  ": a write lost in a power cut, an older backup restored, or rows deleted on the server): rebuilt "
                  "it over " +
                  std::to_string(built->cases) + " case(s)");
  return SearchEngine::open(kb, config, notes, verify_vectors);
}

Result<std::unique_ptr<SearchEngine>> open_or_build_engine(KnowledgeBase& kb, const EmbedderConfig& config,
                                                           std::vector<std::string>& notes) {
  auto any = kb.has_cases();
  TRY(any);
  if (!*any) return std::unique_ptr<SearchEngine>();
  if (const std::string outdated = outdated_embedder(kb.index_dir());
      !path_exists(kb.index_dir() / "manifest.json") || !outdated.empty()) {
    auto built = build_index(kb, config, IndexBuildOptions{});
    TRY(built);
    auto count = kb.count();
    TRY(count);
    notes.push_back((outdated.empty()
                         ? "the knowledge base had no vector index: built it over "
                         : "the vector index was made by an older embedder (" + outdated + "): rebuilt it over ") +
                    std::to_string(*count) + " case(s), as `spark index` does");
  }
  // A query maps the vectors and reads the pages its search touches (`spark index` verifies every byte).
  auto engine = open_or_rebuild(kb, config, notes, /*verify_vectors=*/false);
  // A `spark index` in another process may have replaced the index between reading its manifest and its files (old
  // files go once the new manifest is in place): a second look reads the new one.
  if (!engine) engine = open_or_rebuild(kb, config, notes, /*verify_vectors=*/false);
  if (!engine) {
    // The file's own error names the command already ("…; run `spark index --rebuild`"): said once, here.
    std::string why = engine.error().message;
    for (const std::string tail : {"; run `spark index --rebuild`", ": run `spark index --rebuild`"})
      if (why.ends_with(tail)) why.resize(why.size() - tail.size());
    return fail(why + " (the vector index in " + kb.index_dir().string() +
                " is damaged or incomplete: `spark index --rebuild` makes it again from the store)");
  }
  // From here on the store is read a retrieved case at a time.
  kb.map_reads();
  return engine;
}

namespace {

// "learns at 20 labelled cases" (a prior ranker), "learns again at 25 labelled cases".
std::string learns_next(const RankerModel& m) {
  return std::string(m.origin == "prior" ? "learns at " : "learns again at ") +
         std::to_string(next_training_at(m.labelled_cases, IndexBuildOptions{})) + " labelled cases";
}

// The note a retraining leaves: from how many labelled cases it learnt (or that it kept the prior), what it replaced,
// how long it took, and when it learns next.
std::string relearnt_note(const RankerRelearnt& r) {
  const RankerModel& m = r.now;
  if (m.origin == "prior")
    return "ranker: kept its prior weights at " + std::to_string(m.labelled_cases) + " labelled cases (fewer than " +
           std::to_string(TrainingOptions{}.min_training_cases) + " have a faulty line and others to learn from); it " +
           learns_next(m);
  return "ranker retrained on " + std::to_string(m.training_cases) + " labelled cases (was " + r.was + ") in " +
         seconds_text(m.train_seconds) + "; it " + learns_next(m);
}

// Whether open_or_rebuild built the index again (its note is then in `notes`): an engine opened on an index it had to
// catch up added cases since its load, and says so in a note of its own; a rebuilt one added none.
bool rebuilt(const SearchEngine& engine, const std::vector<std::string>& notes) {
  return engine.added_since_load() == 0 && !notes.empty();
}

// The index is the store's as it is now: the same generation, made by the embedder kind `config` names (any, when it
// names none).
bool index_matches_store(const Result<IndexManifest>& m, const Result<int64_t>& generation,
                         const EmbedderConfig& config) {
  return m && generation && m->generation == *generation &&
         (config.kind.empty() || m->embedder.starts_with(config.kind == "openai" ? "openai/" : "builtin"));
}

// Stale by cases added since, few enough that the index's statistics and ranker still hold: at most a quarter of the
// indexed ones (cases removed or replaced, or more added, need a full build).
bool can_catch_up(const Result<IndexManifest>& m, const Result<int64_t>& generation, const Result<size_t>& count) {
  return m && generation && count && *count >= m->count && *count - m->count <= std::max<size_t>(1, m->count / 4);
}

// update_index's catching up: the cases added since embedded with the index's statistics, the ranker learning when
// due, the index saved. nullopt (and why in `notes`) when the index could not be opened: it is then built.
Result<std::optional<IndexUpdate>> catch_up_for_index(KnowledgeBase& kb, const EmbedderConfig& config,
                                                      std::vector<std::string>& notes) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> opening;  // what catching up embedded: the outcome says it
  auto engine = SearchEngine::open(kb, config, opening);
  if (!engine) {
    notes.push_back("rebuilding the vector index: " + engine.error().message);
    return std::nullopt;
  }
  IndexUpdate update;
  update.outcome = IndexUpdate::Outcome::caught_up;
  learn_ranker_if_due(kb, **engine, update.learnt);
  TRY((*engine)->persist(kb));
  update.seconds = seconds_since(t0);
  update.added = (*engine)->added_since_load();
  update.cases = (*engine)->index().size();
  return std::optional<IndexUpdate>(std::move(update));
}

}  // namespace

bool learn_ranker_if_due(KnowledgeBase& kb, SearchEngine& engine, std::vector<std::string>& notes) {
  auto relearnt = learn_ranker_if_due(kb, engine);
  if (!relearnt) {
    notes.push_back("the ranker did not learn again (it stays as it was): " + relearnt.error().message);
    return false;
  }
  if (!*relearnt) return false;
  notes.push_back(relearnt_note(**relearnt));
  return true;
}

Status learn_ranker_if_due(KnowledgeBase& kb, const EmbedderConfig& config, std::vector<std::string>& notes) {
  // A cheap look first: the ranker's schedule against the store's count of cases (labelled or not).
  auto ranker = load_saved_ranker(kb.index_dir());
  if (ranker && !*ranker) return {};  // no index yet: the first localize or `spark index` builds it, ranker included
  auto count = kb.count();
  TRY(count);
  if (ranker && *count < next_training_at((*ranker)->labelled_cases, IndexBuildOptions{})) return {};
  std::vector<std::string> opening, learnt;
  auto engine = open_or_rebuild(kb, config, opening, /*verify_vectors=*/false);
  TRY(engine);
  if (rebuilt(**engine, opening)) notes.insert(notes.end(), opening.begin(), opening.end());
  // The cases embedded on the way (added since the index was saved) are kept with the new ranker.
  if (learn_ranker_if_due(kb, **engine, learnt))
    if (auto s = (*engine)->persist(kb); !s) return s;
  notes.insert(notes.end(), learnt.begin(), learnt.end());
  return {};
}

Result<IndexUpdate> update_index(KnowledgeBase& kb, const EmbedderConfig& config, bool rebuild,
                                 std::vector<std::string>& notes) {
  const fs::path dir = kb.index_dir();
  if (const std::string outdated = outdated_embedder(dir); !rebuild && !outdated.empty()) {
    notes.push_back("the vector index was made by an older embedder (" + outdated + "): rebuilding it");
  } else if (!rebuild && path_exists(dir / "manifest.json")) {
    auto m = VectorIndex::read_manifest(dir);
    auto g = kb.generation();
    if (index_matches_store(m, g, config)) {
      // Queries map the vectors unverified (their size and header only): here every file's checksum is checked.
      auto verified = VectorIndex::load(dir, VectorIndexOptions{});
      if (verified) {
        if (auto s = learn_ranker_if_due(kb, config, notes); !s)
          notes.push_back("the ranker did not learn again (it stays as it was): " + s.error().message);
        IndexUpdate update;
        update.outcome = IndexUpdate::Outcome::up_to_date;
        update.cases = m->count;
        update.kind = m->kind;
        return update;
      }
      notes.push_back("rebuilding the vector index: " + verified.error().message);
      m = std::unexpected(verified.error());
    }
    if (can_catch_up(m, g, kb.count())) {
      auto caught_up = catch_up_for_index(kb, config, notes);
      TRY(caught_up);
      if (*caught_up) return std::move(**caught_up);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto report = build_index(kb, config, IndexBuildOptions{});
  TRY(report);
  IndexUpdate update;
  update.outcome = IndexUpdate::Outcome::built;
  update.seconds = seconds_since(t0);
  update.report = std::move(*report);
  return update;
}

Result<IndexCatchUp> catch_up_index(KnowledgeBase& kb, const EmbedderConfig& config, std::vector<std::string>& notes) {
  std::vector<std::string> opening;
  auto engine = open_or_rebuild(kb, config, opening);
  TRY(engine);
  IndexCatchUp done;
  learn_ranker_if_due(kb, **engine, done.learnt);
  if (auto s = (*engine)->persist(kb); !s) {
    done.not_saved = s.error();
    return done;
  }
  done.rebuilt = rebuilt(**engine, opening);
  if (done.rebuilt) notes.insert(notes.end(), opening.begin(), opening.end());
  done.added = (*engine)->added_since_load();
  return done;
}

std::string ranker_status(KnowledgeBase& kb) {
  auto ranker = load_saved_ranker(kb.index_dir());
  if (!ranker) return "unreadable: " + ranker.error().message;
  if (!*ranker) return "";
  const RankerModel& m = **ranker;
  auto entries = kb.entries();
  const size_t now = entries ? static_cast<size_t>(std::count_if(entries->begin(), entries->end(),
                                                                 [](const CaseEntry& e) { return e.labelled; }))
                             : 0;
  const std::string when = m.trained_at > 0 ? format_iso8601(m.trained_at) + " in " + seconds_text(m.train_seconds)
                                            : "at a time not recorded (an earlier spark)";
  const std::string learnt = m.origin == "prior" ? "prior weights (last tried at " : m.origin + " (learnt at ";
  return learnt + std::to_string(m.labelled_cases) + " labelled cases, " + when + "); " + learns_next(m) + " (now " +
         std::to_string(now) + ")";
}

Result<OpenedIndex> open_for_run(std::unique_ptr<KnowledgeBase> kb, const EmbedderConfig& config,
                                 std::vector<std::string>& notes) {
  OpenedIndex r;
  r.kb = std::move(kb);
  auto engine = open_or_build_engine(*r.kb, config, notes);
  TRY(engine);
  r.engine = std::move(*engine);
  if (r.engine) {
    r.ranker_relearnt = learn_ranker_if_due(*r.kb, *r.engine, notes);
    VectorIndex::search_on_this_thread();  // one query at a time: no OpenMP team per search
  }
  return r;
}

void keep_what_the_run_learnt(OpenedIndex& r, std::vector<std::string>& notes) {
  if (!r.engine || (r.engine->added_since_load() == 0 && !r.ranker_relearnt)) return;
  if (auto s = r.engine->persist(*r.kb); !s)
    notes.push_back("the vector index was not updated: " + s.error().message);
  else if (r.engine->added_since_load() > 0)
    notes.push_back("kept them in the vector index");
}

std::string index_update_text(const IndexUpdate& update, const std::filesystem::path& index_dir) {
  char line[512];
  switch (update.outcome) {
    case IndexUpdate::Outcome::up_to_date:
      return "the vector index in " + index_dir.string() + " is up to date (" + std::to_string(update.cases) +
             " cases, " + update.kind + "; every file matches its checksum); use --rebuild to rebuild it\n";
    case IndexUpdate::Outcome::caught_up:
      std::snprintf(line, sizeof line,
                    "added %zu case(s) to the vector index in %.2f s (%zu cases; the statistics are kept: "
                    "`spark index --rebuild` refits them)\n",
                    update.added, update.seconds, update.cases);
      return line;
    case IndexUpdate::Outcome::built:
      break;
  }
  const IndexReport& r = update.report;
  std::string out;
  std::snprintf(line, sizeof line, "indexed %zu case(s) (%zu labelled) in %.2f s: %s index, embedder %s\n", r.cases,
                r.labelled, update.seconds, r.kind.c_str(), r.embedder.c_str());
  out += line;
  out += "ranker: " + r.ranker + "\n";
  std::snprintf(line, sizeof line,
                "time: embedding %.2f s, index %.2f s, ranker %.2f s (%u thread(s); %zu test-code version(s), %zu "
                "distinct vector(s))\n",
                r.embed_seconds, r.index_seconds, r.train_seconds, r.threads, r.versions, r.vectors);
  out += line;
  if (r.recall_checked) {
    std::snprintf(line, sizeof line,
                  "hnsw check: the nearest case as similar as an exact search finds for %zu of %zu sampled case(s) "
                  "(%.2f s)\n",
                  r.recall_matched, r.recall_checked, r.recall_seconds);
    out += line;
  }
  return out;
}

std::string index_after_import(KnowledgeBase& kb, const EmbedderConfig& config, const ImportSummary& summary,
                               std::vector<std::string>& notes) {
  if (!path_exists(kb.index_dir() / "manifest.json")) return "";
  if (summary.replaced > 0) {
    notes.push_back("cases were replaced: run `spark index --rebuild`");
    return "";
  }
  if (summary.added == 0) return "";
  std::vector<std::string> said;
  auto caught_up = catch_up_index(kb, config, said);
  if (!caught_up) {
    notes.push_back("the vector index was not updated: " + caught_up.error().message);
    return "";
  }
  if (caught_up->not_saved) {
    notes.push_back("the " + std::to_string(summary.added) +
                    " new case(s) are in the knowledge base; the vector index was not updated (" +
                    caught_up->not_saved->message +
                    "): the next `spark localize`, `spark record` or `spark index` catches it up");
    return "";
  }
  notes.insert(notes.end(), said.begin(), said.end());
  std::string out;
  if (!caught_up->rebuilt)
    out = "added " + std::to_string(caught_up->added) +
          " case(s) to the vector index (run `spark index --rebuild` now and then to refit its statistics)\n";
  notes.insert(notes.end(), caught_up->learnt.begin(), caught_up->learnt.end());
  return out;
}

}  // namespace spark
