#include "localizer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "base/mapped_file.h"
#include "base/text.h"
#include "code/test_scope.h"
#include "formats/error_message.h"
#include "line_features.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDfFile = "df.bin";
constexpr const char* kRankerFile = "ranker.json";
constexpr const char* kCasesFile = "cases.bin";
// The cases file: "SPKCAS01", the count (u64), then per case rowid, failure epoch, id hash, content-key hash and
// labelled (0 or 1), u64 each, in rowid order.
constexpr char kCasesMagic[8] = {'S', 'P', 'K', 'C', 'A', 'S', '0', '1'};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The language a case's test id is written in: its first file's, else its `language` field's.
Language test_id_language(const Case& c) {
  return language_for(c.files.empty() ? std::string_view() : std::string_view(c.files.front().path), c.language);
}

const SourceFile& test_file_of(const Case& c) {
  const TestIdParts parts = parse_test_id(c.test_id, test_id_language(c));
  for (const auto& f : c.files)
    if (!parts.path.empty() && same_file(parts.path, f.path)) return f;
  return c.files.front();
}

// Runs fn(worker, i) for every i in [0, n) on up to `threads` threads; each i goes to the next free worker.
template <class Fn>
void parallel_for(size_t n, unsigned threads, Fn&& fn) {
  const auto workers = static_cast<unsigned>(std::min<size_t>(threads, n));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(0u, i);
    return;
  }
  std::atomic<size_t> next{0};
  const auto work = [&](unsigned w) {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(w, i);
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
}

std::unique_ptr<Embedder> make_embedder(const EmbedderConfig& config) {
  if (config.kind == "openai") return std::make_unique<OpenAiEmbedder>(config.openai);
  return std::make_unique<HashedTfidfEmbedder>(config.builtin);
}

Status check_embedder_kind(const EmbedderConfig& config) {
  if (config.kind != "builtin" && config.kind != "openai")
    return fail("unknown embedder \"" + config.kind + "\" (known: builtin, openai)");
  if (config.kind == "openai" && config.openai.base_url.empty())
    return fail("the openai embedder needs a base URL (SPARK_EMBED_BASE_URL or --embed-url)");
  return {};
}

}  // namespace

const std::string* ScopeCache::find(uint64_t key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

void ScopeCache::put(uint64_t key, std::string scope) {
  if (bytes_ + scope.size() > max_bytes_) {
    map_.clear();
    bytes_ = 0;
  }
  bytes_ += scope.size();
  map_.emplace(key, std::move(scope));
}

namespace {

// The failing test's own function: for Python by the light lookup (a scan of the lines, PythonParser::function_span);
// the full structure when that finds nothing, and for the other languages.
std::string scope_code_of(const std::string& test_id, const std::string& path, const std::string& content,
                          const std::string& case_language, StructureCache& cache) {
  const Language language = language_for(path, case_language);
  if (language == Language::python) {
    const TestIdParts parts = parse_test_id(test_id, language);
    const auto span =
        cache.function_span(content, path, parts.classes.empty() ? "" : parts.classes.back(), parts.function);
    if (span) return lines_text(content, span->first, span->second);
  }
  return scope_text(content, estimate_scope(*cache.get(content, path, case_language), test_id));
}

// Which of a case's files is its test file: the one its test id names, else the first.
template <class Files, class PathOf>
size_t test_file_index(const std::string& test_id, const std::string& case_language, const Files& files,
                       PathOf&& path_of) {
  const TestIdParts parts = parse_test_id(
      test_id, language_for(files.empty() ? std::string() : std::string(path_of(files.front())), case_language));
  for (size_t i = 0; i < files.size(); ++i)
    if (!parts.path.empty() && same_file(parts.path, path_of(files[i]))) return i;
  return 0;
}

}  // namespace

EmbedText embed_text(const Case& c, StructureCache& cache, ScopeCache* scopes) {
  EmbedText t;
  t.error_message = c.error_message;
  for (const auto& f : c.files) {
    t.code += f.content;
    t.code += '\n';
  }
  const SourceFile& tf = test_file_of(c);
  const uint64_t key = fnv1a64(c.test_id, fnv1a64(tf.content)) ^ tf.content.size();
  if (scopes)
    if (const std::string* hit = scopes->find(key)) {
      t.scope_code = *hit;
      return t;
    }
  t.scope_code = scope_code_of(c.test_id, tf.path, tf.content, c.language, cache);
  if (scopes) scopes->put(key, t.scope_code);
  return t;
}

unsigned index_threads(unsigned asked) {
  if (asked == 0)
    if (const char* env = std::getenv("SPARK_THREADS"); env && *env)
      asked = static_cast<unsigned>(std::strtoul(env, nullptr, 10));
  if (asked == 0) asked = std::thread::hardware_concurrency();
  return std::clamp(asked, 1u, 16u);
}

namespace {

Status write_cases_file(const fs::path& path, const std::vector<CaseFacts>& facts) {
  std::string bytes(kCasesMagic, sizeof kCasesMagic);
  const uint64_t n = facts.size();
  bytes.append(reinterpret_cast<const char*>(&n), sizeof n);
  bytes.reserve(bytes.size() + facts.size() * 5 * sizeof(uint64_t));
  for (const auto& f : facts) {
    const uint64_t row[5] = {static_cast<uint64_t>(f.rowid), static_cast<uint64_t>(f.failure_epoch), f.id_hash,
                             f.key_hash, f.labelled ? 1u : 0u};
    bytes.append(reinterpret_cast<const char*>(row), sizeof row);
  }
  return write_file_atomic(path, bytes);
}

Result<std::vector<CaseFacts>> read_cases_file(const fs::path& path) {
  auto map = MappedFile::open(path);
  if (!map) return std::unexpected(map.error());
  const std::string_view bytes = (*map)->view();
  uint64_t n = 0;
  const size_t head = sizeof kCasesMagic + sizeof n;
  if (bytes.size() >= head) std::memcpy(&n, bytes.data() + sizeof kCasesMagic, sizeof n);
  if (bytes.size() < head || std::memcmp(bytes.data(), kCasesMagic, sizeof kCasesMagic) != 0 ||
      n > bytes.size() / (5 * sizeof(uint64_t)) || bytes.size() != head + n * 5 * sizeof(uint64_t))
    return fail(path.string() + ": not a cases file of this index (header or size); run `spark index --rebuild`");
  std::vector<CaseFacts> out(n);
  const char* p = bytes.data() + head;
  for (size_t i = 0; i < n; ++i, p += 5 * sizeof(uint64_t)) {
    uint64_t row[5];
    std::memcpy(row, p, sizeof row);
    out[i] = {static_cast<int64_t>(row[0]), static_cast<int64_t>(row[1]), row[2], row[3], row[4] != 0};
  }
  return out;
}

using VectorSink = std::function<Status(const std::vector<int64_t>&, const std::vector<float>&)>;
// Embeds the stored cases `rowids` with the built-in embedder's statistics as they are, each test-file version once,
// on worker threads; `sink` gets batches in rowid order.
Status embed_stored_cases(KnowledgeBase& kb, HashedTfidfEmbedder& embedder, const std::vector<int64_t>& rowids,
                          const VectorSink& sink);
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// SearchEngine

Result<std::unique_ptr<SearchEngine>> SearchEngine::open(KnowledgeBase& kb, EmbedderConfig config,
                                                         std::vector<std::string>& notes, bool verify_vectors) {
  const fs::path dir = kb.index_dir();
  std::error_code ec;
  if (!fs::exists(dir / "manifest.json", ec)) return fail("no vector index in " + dir.string() + ": run `spark index`");
  // One manifest for everything loaded: the index verifies its files and the extra ones against it.
  VectorIndexOptions index_options;
  index_options.verify_vectors = verify_vectors;
  auto loaded = VectorIndex::load(dir, index_options);
  if (!loaded) return std::unexpected(loaded.error());
  const IndexManifest* manifest = &loaded->second;
  if (config.kind.empty()) config.kind = manifest->embedder.starts_with("openai/") ? "openai" : "builtin";
  if (auto s = check_embedder_kind(config); !s) return std::unexpected(s.error());
  std::unique_ptr<Embedder> embedder = make_embedder(config);
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder.get())) {
    const std::string df = manifest->file_of(kDfFile);
    if (df.empty()) return fail((dir / "manifest.json").string() + ": names no document frequencies (" + kDfFile + ")");
    if (auto s = builtin->load(dir / df); !s) return std::unexpected(s.error());
  }
  if (config.kind == "builtin" && embedder->identity() != manifest->embedder)
    return fail(dir.string() + ": the index was built with embedder \"" + manifest->embedder +
                "\", the configuration asks for \"" + embedder->identity() + "\": run `spark index --rebuild`");
  if (config.kind == "openai" && !manifest->embedder.starts_with(embedder->identity()))
    return fail(dir.string() + ": the index was built with embedder \"" + manifest->embedder +
                "\", the configuration asks for \"" + embedder->identity() + "\": run `spark index --rebuild`");
  const std::string ranker_file = manifest->file_of(kRankerFile);
  if (ranker_file.empty()) return fail((dir / "manifest.json").string() + ": names no ranker (" + kRankerFile + ")");
  auto ranker = RankerModel::load(dir / ranker_file);
  if (!ranker) return std::unexpected(ranker.error());
  std::unique_ptr<SearchEngine> engine(
      new SearchEngine(std::move(embedder), std::move(loaded->first), std::move(*ranker)));
  engine->embedder_identity_ = manifest->embedder;
  for (const auto& e : manifest->extra_files) engine->extras_.push_back({e.name, e.file});

  auto generation = kb.generation();
  if (!generation) return std::unexpected(generation.error());
  if (*generation == manifest->generation) {
    // The store has not changed since the index was saved: the cases file says what filtering needs, with no pass
    // over the store's rows (an index saved by an earlier spark has none: read from the store, written by persist).
    if (const std::string cases_file = manifest->file_of(kCasesFile); !cases_file.empty()) {
      auto facts = read_cases_file(dir / cases_file);
      if (!facts) return std::unexpected(facts.error());
      engine->facts_ = std::move(*facts);
    } else {
      auto entries = kb.entries();
      if (!entries) return std::unexpected(entries.error());
      engine->facts_ = facts_of(*entries);
      engine->facts_from_store_ = true;
    }
    if (engine->facts_.size() != engine->index_.size())
      return fail(dir.string() + ": the index does not match the knowledge base: run `spark index --rebuild`");
  } else {
    auto entries = kb.entries();
    if (!entries) return std::unexpected(entries.error());
    std::unordered_set<int64_t> present;
    for (const auto& e : *entries) present.insert(e.rowid);
    if (engine->index_.size() > present.size())
      return fail(dir.string() +
                  ": the index holds cases the knowledge base no longer has: run `spark index --rebuild`");
    std::vector<int64_t> missing;
    for (const auto& e : *entries)
      if (!engine->index_.contains(e.rowid)) missing.push_back(e.rowid);
    if (missing.size() + engine->index_.size() != present.size())
      return fail(dir.string() + ": the index does not match the knowledge base: run `spark index --rebuild`");
    std::unordered_map<int64_t, int64_t> group;
    for (const auto& e : *entries) group[e.rowid] = static_cast<int64_t>(fnv1a64(e.test_id));
    const auto add = [&](const std::vector<int64_t>& rowids, const std::vector<float>& flat) -> Status {
      if (flat.size() != rowids.size() * engine->index_.dimension())
        return fail("the embedder returned vectors of another dimension than the index's " +
                    std::to_string(engine->index_.dimension()));
      std::vector<int64_t> groups;
      for (int64_t rowid : rowids) groups.push_back(group.at(rowid));
      engine->index_.add(rowids, flat, groups);
      return {};
    };
    if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(engine->embedder_.get())) {
      const auto te = std::chrono::steady_clock::now();
      if (auto s = embed_stored_cases(kb, *builtin, missing, add); !s) return std::unexpected(s.error());
      if (std::getenv("SPARK_DEBUG_TIMES"))
        std::fprintf(stderr, "catch-up: embedded and added %zu case(s) in %.2f s\n", missing.size(), seconds_since(te));
    } else {
      std::vector<float> flat;
      for (int64_t rowid : missing) {
        auto c = kb.load(rowid);
        if (!c) return std::unexpected(c.error());
        auto v = engine->embed(*c);
        if (!v) return std::unexpected(v.error());
        flat.insert(flat.end(), v->begin(), v->end());
      }
      if (auto s = add(missing, flat); !s) return std::unexpected(s.error());
    }
    engine->added_ids_ = missing;
    engine->facts_ = facts_of(*entries);
    engine->facts_from_store_ = true;
    if (!missing.empty())
      notes.push_back("the index lacked " + std::to_string(missing.size()) +
                      " case(s) added since it was built; embedded them for this run");
  }
  return engine;
}

Status SearchEngine::persist(KnowledgeBase& kb) {
  auto generation = kb.generation();
  if (!generation) return std::unexpected(generation.error());
  if (facts_from_store_) {
    // The cases file of the state being saved: a new file, named by the new manifest.
    const std::string name = VectorIndex::fresh_name("cases", ".bin");
    if (auto s = write_cases_file(kb.index_dir() / name, facts_); !s) return s;
    std::erase_if(extras_, [](const VectorIndex::Extra& e) { return e.name == kCasesFile; });
    extras_.push_back({kCasesFile, name});
  }
  if (auto s = index_.save(kb.index_dir(), embedder_identity_, *generation, extras_); !s) return s;
  facts_from_store_ = false;
  return {};
}

Result<std::vector<float>> SearchEngine::embed(const Case& c) {
  auto v = embedder_->embed({embed_text(c, structures_)});
  if (!v) return std::unexpected(v.error());
  if (v->size() != 1 || v->front().size() != index_.dimension())
    return fail("the embedder returned a vector of dimension " + std::to_string(v->empty() ? 0 : v->front().size()) +
                ", the index has " + std::to_string(index_.dimension()));
  return std::move(v->front());
}

// ---------------------------------------------------------------------------------------------------------------
// Held-out localization (ranker learning, evaluation)

namespace {

// What localizing one held-out case needs before its view: the case, and the faulty lines of the cases retrieved for
// it (itself and its exact duplicates excluded).
struct HeldOutMaterial {
  Case c;
  std::vector<RetrievedFaultyLine> faulty;
  std::vector<double> sims;
  std::vector<std::string> ids;
};

class HeldOutSource {
 public:
  HeldOutSource(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const VectorIndex& index,
                const std::function<Result<std::vector<float>>(int64_t, const Case&)>& vector_of,
                const HeldOutOptions& options)
      : kb_(kb), index_(index), vector_of_(vector_of), options_(options) {
    for (const auto& e : entries) {
      by_content_[e.content_key].push_back(e.rowid);
      entry_of_[e.rowid] = &e;
    }
  }

  Result<HeldOutMaterial> material(int64_t rowid) {
    HeldOutMaterial m;
    auto c = kb_.load(rowid);
    if (!c) return std::unexpected(c.error());
    m.c = std::move(*c);
    const CaseEntry* e = entry_of_.at(rowid);
    std::unordered_set<int64_t> excluded(by_content_[e->content_key].begin(), by_content_[e->content_key].end());
    excluded.insert(rowid);
    auto v = vector_of_(rowid, m.c);
    if (!v) return std::unexpected(v.error());
    auto hits = index_.search(v->data(), options_.r, std::nullopt, excluded);
    std::erase_if(hits, [&](const SearchHit& h) { return h.similarity < options_.similarity_floor; });
    for (const auto& h : hits) {
      auto it = loaded_.find(h.rowid);
      if (it == loaded_.end()) {
        if (loaded_.size() > 512) loaded_.clear();
        auto rc = kb_.load(h.rowid);
        if (!rc) return std::unexpected(rc.error());
        it = loaded_.emplace(h.rowid, std::move(*rc)).first;
      }
      append_faulty_lines(it->second, m.sims.size(), m.faulty);
      m.sims.push_back(h.similarity);
      m.ids.push_back(it->second.id);
    }
    return m;
  }

 private:
  KnowledgeBase& kb_;
  const VectorIndex& index_;
  const std::function<Result<std::vector<float>>(int64_t, const Case&)>& vector_of_;
  HeldOutOptions options_;
  std::unordered_map<std::string, std::vector<int64_t>> by_content_;
  std::unordered_map<int64_t, const CaseEntry*> entry_of_;
  std::unordered_map<int64_t, Case> loaded_;  // retrieved cases, bounded
};

}  // namespace

Status for_each_held_out(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const std::vector<int64_t>& cases,
                         const VectorIndex& index,
                         const std::function<Result<std::vector<float>>(int64_t, const Case&)>& vector_of,
                         const HeldOutOptions& options, StructureCache& cache,
                         const std::function<Status(const HeldOut&)>& fn) {
  HeldOutSource source(kb, entries, index, vector_of, options);
  for (int64_t rowid : cases) {
    auto m = source.material(rowid);
    if (!m) return std::unexpected(m.error());
    QueryView view = make_query_view(m->c, cache);
    if (auto s = fn(HeldOut{m->c, view, m->faulty, m->sims, m->ids}); !s) return s;
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Index building

namespace {

// Leave-one-out material for the ranker: each labelled case localized against the rest.
// The labelled cases the ranker learns from: all of them, or a deterministic spread-out sample of a large corpus.
std::vector<const CaseEntry*> training_sample(const std::vector<CaseEntry>& entries, size_t max_cases) {
  std::vector<const CaseEntry*> labelled;
  for (const auto& e : entries)
    if (e.labelled) labelled.push_back(&e);
  if (labelled.size() <= max_cases) return labelled;
  std::vector<const CaseEntry*> sample;
  const double step = static_cast<double>(labelled.size()) / static_cast<double>(max_cases);
  for (size_t i = 0; i < max_cases; ++i) sample.push_back(labelled[static_cast<size_t>(static_cast<double>(i) * step)]);
  return sample;
}

// One pass over the sample: each case is parsed once, for both the statement kinds' prior and its features. The
// prior is known only at the end, so each kept row carries its line's kind (an index into `kinds`) in the kind-prior
// slot until then. In chunks: the cases are loaded and searched in order (one store connection), their views parsed
// and featured on worker threads (a structure cache each), and folded into the training set in order, so the model
// is the one a single thread learns.
Result<RankerModel> learn_ranker(KnowledgeBase& kb, const std::vector<CaseEntry>& entries,
                                 const std::vector<const CaseEntry*>& labelled, const VectorIndex& index,
                                 const std::function<std::vector<float>(int64_t)>& vector_of,
                                 const IndexBuildOptions& options) {
  const unsigned threads = index_threads(options.threads);
  std::vector<TrainingCase> training;
  std::vector<StructureCache> caches;
  for (unsigned w = 0; w < threads; ++w) caches.emplace_back(16);
  KindCounts kind_counts;
  std::vector<std::string> kinds;
  std::unordered_map<std::string, size_t> kind_index;
  const KindPrior no_prior;
  const std::function<Result<std::vector<float>>(int64_t, const Case&)> stored_vector =
      [&](int64_t rowid, const Case&) -> Result<std::vector<float>> { return vector_of(rowid); };
  HeldOutSource source(kb, entries, index, stored_vector, HeldOutOptions{options.r, options.similarity_floor});
  // Small chunks: each view holds every line's features (7,000 lines in the largest test files).
  constexpr size_t kChunk = 16;
  for (size_t start = 0; start < labelled.size(); start += kChunk) {
    const size_t n = std::min(kChunk, labelled.size() - start);
    std::vector<HeldOutMaterial> items;
    items.reserve(n);  // views point into the cases: no reallocation after they are made
    for (size_t i = 0; i < n; ++i) {
      auto m = source.material(labelled[start + i]->rowid);
      if (!m) return std::unexpected(m.error());
      items.push_back(std::move(*m));
    }
    std::vector<std::optional<QueryView>> views(n);
    parallel_for(n, threads, [&](unsigned w, size_t i) {
      views[i] = make_query_view(items[i].c, caches[w]);
      compute_features(*views[i], items[i].faulty, items[i].sims, options.epsilon, no_prior, items[i].c.error_message);
    });
    for (size_t i = 0; i < n; ++i) {
      QueryView& view = *views[i];
      kind_counts.add(view, items[i].c.faulty_lines);
      for (auto& ql : view.lines) {
        const auto& s = *view.files[ql.file].structure;
        const std::string kind = kind_key(s.language, s.kind[static_cast<size_t>(ql.line - 1)]);
        auto [it, added] = kind_index.emplace(kind, kinds.size());
        if (added) kinds.push_back(kind);
        ql.x[kKindPrior] = static_cast<double>(it->second);
      }
      training.push_back(training_case(view, items[i].c.faulty_lines));
      thin_training_case(training.back(), training.size() - 1, options.training.negatives_per_case);
    }
  }
  const KindPrior prior = kind_counts.prior();
  std::vector<double> prior_of(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) prior_of[i] = prior.get(kinds[i]);
  for (auto& tc : training)
    for (auto& row : tc.rows) row[kKindPrior] = prior_of[static_cast<size_t>(row[kKindPrior])];
  return train_ranker(std::move(training), prior, options.training);
}

}  // namespace

namespace {

// The built-in embedder over a whole knowledge base, each test-file version tokenised once per pass and each failing
// test's scope once, however many cases share them; the cases' vectors are put together from cached blocks
// (HashedTfidfEmbedder::assemble), bit-identical to embedding each case alone. Work is spread over worker threads
// by version. Memory: one block per distinct version and per distinct (test, version) (1 KB each at the default
// dimension), plus the contents of one chunk of versions.
class VersionEmbedding {
 public:
  VersionEmbedding(KnowledgeBase& kb, HashedTfidfEmbedder& embedder, unsigned threads)
      : kb_(kb), embedder_(embedder), threads_(threads), caches_(threads) {}

  // The cases to embed: all, or only those of `only` (all of whose rowids are at least `min_rowid`).
  Status collect(const std::unordered_set<int64_t>* only = nullptr, int64_t min_rowid = 0) {
    std::unordered_map<std::string, size_t> version_of, scope_of;
    auto s = kb_.for_each_sketch(min_rowid, [&](KnowledgeBase::CaseSketch&& c) -> Status {
      if (only && !only->contains(c.rowid)) return {};
      std::string vkey;
      for (const auto& [path, key] : c.files) vkey += key + "\n";
      auto [vit, vnew] = version_of.emplace(vkey, versions_.size());
      if (vnew) {
        Version v;
        for (auto& [path, key] : c.files) {
          v.paths.push_back(path);
          v.keys.push_back(key);
        }
        versions_.push_back(std::move(v));
      }
      Version& v = versions_[vit->second];
      // A sketch has no `language` field: the files' extensions tell (what a case of a known language has).
      const size_t file = test_file_index(c.test_id, "", v.paths, [](const std::string& p) { return p; });
      auto [sit, snew] = scope_of.emplace(std::to_string(vit->second) + "\n" + std::to_string(file) + "\n" + c.test_id,
                                          scopes_.size());
      if (snew) {
        scopes_.push_back({vit->second, file, c.test_id, 0});
        v.scopes.push_back(sit->second);
      }
      ++scopes_[sit->second].cases;
      v.cases.push_back(cases_.size());
      cases_.push_back({c.rowid, vit->second, sit->second});
      return {};
    });
    if (!s) return s;
    // Versions of the same test file one after another: each is then parsed incrementally from the one before.
    order_.resize(versions_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    const auto path_of = [&](size_t vi) -> const std::string& {
      const Version& v = versions_[vi];
      return v.paths[scopes_[v.scopes.front()].file];
    };
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return path_of(a) < path_of(b); });
    return {};
  }

  size_t cases() const { return cases_.size(); }
  size_t versions() const { return versions_.size(); }
  size_t scopes() const { return scopes_.size(); }

  // Pass 1: the failing tests' scopes and, with `fit`, document frequencies (else the embedder's are used).
  Status fit(bool fit = true) {
    std::vector<DocumentFrequencies> df(threads_);
    scope_text_.assign(scopes_.size(), {});
    auto s = for_each_version_chunk(
        [&](unsigned w, size_t vi, const std::string& code, const std::vector<std::string>& contents,
            const std::vector<std::string>& messages) {
          const Version& v = versions_[vi];
          if (fit)
            HashedTfidfEmbedder::count_documents(HashedTfidfEmbedder::code_terms(code),
                                                 static_cast<uint32_t>(v.cases.size()), df[w]);
          for (size_t si : v.scopes) {
            const Scope& sc = scopes_[si];
            scope_text_[si] = scope_code_of(sc.test_id, v.paths[sc.file], contents[sc.file], "", caches_[w]);
            if (fit)
              HashedTfidfEmbedder::count_documents(HashedTfidfEmbedder::scope_terms(scope_text_[si]), sc.cases, df[w]);
          }
          if (fit)
            for (const auto& m : messages) HashedTfidfEmbedder::count_documents(embedder_.error_terms(m), 1, df[w]);
        },
        /*messages=*/fit);
    if (!s) return s;
    if (!fit) return {};
    embedder_.fit_begin();
    for (size_t w = 0; w < df.size(); ++w) {
      embedder_.fit_merge(df[w], w == 0 ? cases_.size() : 0);
      DocumentFrequencies().swap(df[w]);
    }
    embedder_.fit_end();
    return {};
  }

  // Pass 2: the code block of each version and the scope block of each failing test in it; then the cases' vectors
  // in rowid order, `sink` called with batches of (rowids, row-major vectors).
  Status vectors(const std::function<Status(const std::vector<int64_t>&, const std::vector<float>&)>& sink) {
    const auto l = embedder_.layout();
    std::vector<float> code_blocks(versions_.size() * l.code), scope_blocks(scopes_.size() * l.scope);
    auto s = for_each_version_chunk(
        [&](unsigned, size_t vi, const std::string& code, const std::vector<std::string>&,
            const std::vector<std::string>&) {
          const Version& v = versions_[vi];
          embedder_.block(HashedTfidfEmbedder::code_terms(code), code_blocks.data() + vi * l.code, l.code);
          for (size_t si : v.scopes) {
            embedder_.block(HashedTfidfEmbedder::scope_terms(scope_text_[si]), scope_blocks.data() + si * l.scope,
                            l.scope);
            std::string().swap(scope_text_[si]);
          }
        },
        /*messages=*/false);
    if (!s) return s;
    const size_t dim = embedder_.dimension();
    constexpr size_t kBatch = 1024;
    std::vector<int64_t> rowids;
    std::vector<float> out;
    std::vector<std::vector<float>> error_blocks(threads_, std::vector<float>(l.error));
    for (size_t start = 0; start < cases_.size(); start += kBatch) {
      const size_t end = std::min(cases_.size(), start + kBatch);
      rowids.clear();
      for (size_t i = start; i < end; ++i) rowids.push_back(cases_[i].rowid);
      auto messages = kb_.error_messages(rowids);
      if (!messages) return std::unexpected(messages.error());
      out.assign(rowids.size() * dim, 0.0f);
      parallel_for(rowids.size(), threads_, [&](unsigned w, size_t j) {
        const CaseRef& c = cases_[start + j];
        float* err = error_blocks[w].data();
        embedder_.block(embedder_.error_terms((*messages)[j]), err, l.error);
        const auto v =
            embedder_.assemble(err, scope_blocks.data() + c.scope * l.scope, code_blocks.data() + c.version * l.code);
        std::copy(v.begin(), v.end(), out.begin() + static_cast<std::ptrdiff_t>(j * dim));
      });
      if (auto st = sink(rowids, out); !st) return st;
    }
    return {};
  }

 private:
  struct Version {
    std::vector<std::string> paths, keys;
    std::vector<size_t> cases;   // indices into cases_
    std::vector<size_t> scopes;  // indices into scopes_
  };
  struct Scope {
    size_t version = 0, file = 0;
    std::string test_id;
    uint32_t cases = 0;
  };
  struct CaseRef {
    int64_t rowid = 0;
    size_t version = 0, scope = 0;
  };

  // Loads versions in chunks (their contents, and the error messages of their cases when asked) and calls
  // fn(worker, version, code, contents, messages) for each on the worker threads.
  template <class Fn>
  Status for_each_version_chunk(Fn&& fn, bool messages = true) {
    constexpr size_t kChunk = 64;
    for (size_t start = 0; start < order_.size(); start += kChunk) {
      const size_t end = std::min(order_.size(), start + kChunk);
      std::vector<std::vector<std::string>> contents(end - start), texts(end - start);
      std::vector<std::string> codes(end - start);
      for (size_t p = start; p < end; ++p) {
        const Version& v = versions_[order_[p]];
        auto got = kb_.blobs(v.keys);
        if (!got) return std::unexpected(got.error());
        contents[p - start] = std::move(*got);
        for (const auto& c : contents[p - start]) {
          codes[p - start] += c;
          codes[p - start] += '\n';
        }
        if (messages) {
          std::vector<int64_t> rowids;
          for (size_t ci : v.cases) rowids.push_back(cases_[ci].rowid);
          auto m = kb_.error_messages(rowids);
          if (!m) return std::unexpected(m.error());
          texts[p - start] = std::move(*m);
        }
      }
      // Each worker takes a contiguous run of the chunk, so consecutive versions of a file stay on one parser.
      const unsigned workers = static_cast<unsigned>(std::min<size_t>(threads_, end - start));
      parallel_for(workers, workers, [&](unsigned w, size_t part) {
        const size_t n = end - start;
        for (size_t j = part * n / workers; j < (part + 1) * n / workers; ++j)
          fn(w, order_[start + j], codes[j], contents[j], texts[j]);
      });
    }
    return {};
  }

  KnowledgeBase& kb_;
  HashedTfidfEmbedder& embedder_;
  unsigned threads_;
  std::vector<StructureCache> caches_;  // one per worker
  std::vector<Version> versions_;
  std::vector<Scope> scopes_;
  std::vector<CaseRef> cases_;
  std::vector<size_t> order_;  // versions in processing order
  std::vector<std::string> scope_text_;
};

Status embed_stored_cases(KnowledgeBase& kb, HashedTfidfEmbedder& embedder, const std::vector<int64_t>& rowids,
                          const VectorSink& sink) {
  if (rowids.empty()) return {};
  VersionEmbedding pass(kb, embedder, index_threads(0));
  const std::unordered_set<int64_t> only(rowids.begin(), rowids.end());
  if (auto s = pass.collect(&only, *std::min_element(rowids.begin(), rowids.end())); !s) return s;
  if (pass.cases() != rowids.size())
    return fail(kb.name() + ": " + std::to_string(rowids.size() - pass.cases()) +
                " case(s) have no files (a damaged store)");
  const auto t0 = std::chrono::steady_clock::now();
  if (auto s = pass.fit(/*fit=*/false); !s) return s;
  const auto t1 = std::chrono::steady_clock::now();
  auto s = pass.vectors(sink);
  if (std::getenv("SPARK_DEBUG_TIMES"))
    std::fprintf(stderr, "catch-up: %zu versions, %zu scopes: scopes %.2f s, vectors %.2f s\n", pass.versions(),
                 pass.scopes(), std::chrono::duration<double>(t1 - t0).count(), seconds_since(t1));
  return s;
}

}  // namespace

Result<IndexReport> build_index(KnowledgeBase& kb, EmbedderConfig config, const IndexBuildOptions& options) {
  if (config.kind.empty()) config.kind = "builtin";
  if (auto s = check_embedder_kind(config); !s) return std::unexpected(s.error());
  IndexReport report;
  auto generation = kb.generation();
  if (!generation) return std::unexpected(generation.error());
  auto entries = kb.entries();
  if (!entries) return std::unexpected(entries.error());
  report.cases = entries->size();
  for (const auto& e : *entries) report.labelled += e.labelled ? 1 : 0;
  const unsigned threads = index_threads(options.threads);
  report.threads = threads;

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Embedder> embedder = make_embedder(config);
  // Vectors stream into the index in batches: no full copy of them is ever held (at 100k cases × 1024 floats one
  // copy is 400 MB).
  std::optional<VectorIndex> index;
  double add_seconds = 0;
  size_t dim = 0;
  if (auto s = kb.clear_embeddings(); !s) return std::unexpected(s.error());
  std::unordered_map<int64_t, int64_t> group_of;
  for (const auto& e : *entries) group_of[e.rowid] = static_cast<int64_t>(fnv1a64(e.test_id));
  const auto add = [&](const std::vector<int64_t>& rowids, const std::vector<float>& vectors) -> Status {
    if (rowids.empty()) return {};
    if (!index) {
      dim = vectors.size() / rowids.size();
      index.emplace(VectorIndex::for_count(dim, entries->size(), options.index));
    }
    if (vectors.size() != rowids.size() * dim) return fail("the embedder returned vectors of different dimensions");
    // A test's cases form one group: the HNSW search scores its near-duplicates exactly.
    std::vector<int64_t> groups;
    for (int64_t rowid : rowids) groups.push_back(group_of.at(rowid));
    const auto ta = std::chrono::steady_clock::now();
    index->add(rowids, vectors, groups);
    add_seconds += seconds_since(ta);
    return {};
  };
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder.get())) {
    VersionEmbedding pass(kb, *builtin, threads);
    if (auto s = pass.collect(); !s) return std::unexpected(s.error());
    if (pass.cases() != entries->size())
      return fail(kb.name() + ": " + std::to_string(entries->size() - pass.cases()) +
                  " case(s) have no files (a damaged store)");
    report.versions = pass.versions();
    report.scopes = pass.scopes();
    const auto tf = std::chrono::steady_clock::now();
    if (auto s = pass.fit(); !s) return std::unexpected(s.error());
    const auto tv = std::chrono::steady_clock::now();
    if (auto s = pass.vectors(add); !s) return std::unexpected(s.error());
    if (std::getenv("SPARK_DEBUG_TIMES"))
      std::fprintf(stderr, "collect %.2f s, fit %.2f s, vectors %.2f s\n",
                   std::chrono::duration<double>(tf - t0).count(), std::chrono::duration<double>(tv - tf).count(),
                   seconds_since(tv));
  } else {
    std::vector<int64_t> batch_ids;
    std::vector<EmbedText> batch;
    StructureCache cache;
    ScopeCache scope_cache;
    const auto flush = [&]() -> Status {
      if (batch.empty()) return {};
      auto got = embedder->embed(batch);
      if (!got) return std::unexpected(got.error());
      std::vector<float> flat;
      for (const auto& v : *got) {
        if (!got->empty() && v.size() != got->front().size())
          return fail("the embedder returned vectors of different dimensions");
        flat.insert(flat.end(), v.begin(), v.end());
      }
      if (auto s = add(batch_ids, flat); !s) return s;
      batch.clear();
      batch_ids.clear();
      return {};
    };
    auto pass = kb.for_each([&](int64_t rowid, const Case& c) -> Status {
      batch_ids.push_back(rowid);
      batch.push_back(embed_text(c, cache, &scope_cache));
      return batch.size() >= 16 ? flush() : Status{};
    });
    if (!pass) return std::unexpected(pass.error());
    if (auto s = flush(); !s) return std::unexpected(s.error());
  }
  report.embedder = embedder->identity();
  report.embed_seconds = seconds_since(t0) - add_seconds;

  const auto t1 = std::chrono::steady_clock::now();
  if (!index) index.emplace(embedder->dimension(), options.index);  // an empty knowledge base
  report.kind = index->is_hnsw() ? "hnsw" : "flat";
  report.index_seconds = add_seconds + seconds_since(t1);

  const auto t2 = std::chrono::steady_clock::now();
  // The ranker learns from a spread-out sample of the labelled cases; the statement kinds' prior from the same.
  const auto sample = training_sample(*entries, options.max_training_cases);
  const auto vector_of = [&](int64_t rowid) { return index->vector(rowid); };
  auto ranker = learn_ranker(kb, *entries, sample, *index, vector_of, options);
  if (!ranker) return std::unexpected(ranker.error());
  report.ranker = ranker->origin;
  report.train_seconds = seconds_since(t2);

  const fs::path dir = kb.index_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  // Every file of the new state under a new name; the manifest switches to them (old or new state after a crash).
  std::vector<VectorIndex::Extra> extra = {{kRankerFile, VectorIndex::fresh_name("ranker", ".json")}};
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder.get())) {
    extra.push_back({kDfFile, VectorIndex::fresh_name("df", ".bin")});
    if (auto s = builtin->save(dir / extra.back().file); !s) return std::unexpected(s.error());
  }
  if (auto s = ranker->save(dir / extra.front().file); !s) return std::unexpected(s.error());
  extra.push_back({kCasesFile, VectorIndex::fresh_name("cases", ".bin")});
  if (auto s = write_cases_file(dir / extra.back().file, facts_of(*entries)); !s) return std::unexpected(s.error());
  if (auto s = index->save(dir, report.embedder, *generation, extra); !s) return std::unexpected(s.error());
  report.vectors = index->distinct();
  return report;
}

// ---------------------------------------------------------------------------------------------------------------
// Algorithm 1

namespace {

std::string short_sha(const std::optional<std::string>& sha) { return sha ? sha->substr(0, 10) : std::string(); }

std::string fmt(double v, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Why a line ranks where it does, strongest contribution first.
std::vector<std::string> explain(const QueryLine& ql, const RankerModel& model,
                                 const std::vector<RetrievedCase>& retrieved,
                                 const std::vector<RetrievedFaultyLine>& faulty, const std::string& kind,
                                 double epsilon, const std::optional<GateReport>& gate) {
  std::vector<std::pair<double, std::string>> r;
  const auto contrib = [&](Feature f) { return model.weights[f] * ql.x[f]; };
  if (ql.best_match >= 0 && ql.best_distance <= 0.5) {
    const auto& fl = faulty[static_cast<size_t>(ql.best_match)];
    const auto& rc = retrieved[fl.case_index];
    std::string s = (ql.best_distance <= epsilon ? "annotated: resembles faulty line " : "similar to faulty line ") +
                    std::to_string(fl.line) + " of case " + rc.id;
    if (rc.fixed_commit) s += " (fixed in " + short_sha(rc.fixed_commit) + ")";
    s += ", distance " + fmt(ql.best_distance) + ", case similarity " + fmt(rc.similarity);
    r.emplace_back(contrib(kAnnotated) + contrib(kResembles), s);
  }
  if (ql.x[kTracebackLine] > 0)
    r.emplace_back(contrib(kTracebackLine), "the test stopped here (deepest traceback frame in the test code)");
  if (ql.x[kTracebackFrame] > 0) r.emplace_back(contrib(kTracebackFrame), "named by the traceback");
  if (ql.x[kNearFailure] > 0.05)
    r.emplace_back(contrib(kNearFailure),
                   "ran shortly before the failing line (" +
                       std::to_string(static_cast<int>(std::lround(-3.0 * std::log(ql.x[kNearFailure])))) +
                       " statement(s) before it)");
  if (ql.x[kNotReached] > 0)
    r.emplace_back(contrib(kNotReached), "after the failing line in the same function (did not run)");
  if (ql.x[kOwnBody] > 0) r.emplace_back(contrib(kOwnBody), "in the failing test's own body");
  if (ql.x[kSupport] > 0) r.emplace_back(contrib(kSupport), "in set-up, a fixture or a helper the failing test uses");
  if (ql.x[kKindPrior] != 0 && !kind.empty())
    r.emplace_back(contrib(kKindPrior), "'" + kind + "' lines are " + (ql.x[kKindPrior] > 0 ? "more" : "less") +
                                            " often faulty than others in this knowledge base");
  if (ql.x[kErrorOverlap] > 0)
    r.emplace_back(contrib(kErrorOverlap),
                   "shares " + fmt(100 * ql.x[kErrorOverlap], 0) + "% of its names and values with the error");
  if (ql.x[kSlice] > 0)
    r.emplace_back(contrib(kSlice), "sets a value the failing line uses (data flow, " +
                                        std::to_string(static_cast<int>(std::lround(1.0 / ql.x[kSlice]))) +
                                        " step(s) back)");
  if (ql.x[kValueMatch] > 0)
    r.emplace_back(contrib(kValueMatch), ql.x[kValueMatch] >= 1.0
                                             ? "holds a value the failure shows"
                                             : "holds " + fmt(100 * ql.x[kValueMatch], 0) +
                                                   "% of its literals among the values the failure shows");
  if (ql.x[kNameMatch] > 0) r.emplace_back(contrib(kNameMatch), "uses a name the error quotes");
  if (ql.x[kSameTest] > 0)
    r.emplace_back(contrib(kSameTest),
                   "resembles a faulty line of an earlier failure of this same test (trust learnt: " +
                       std::string(model.weights[kSameTest] >= 0 ? "more" : "less") + ")");
  if (ql.x[kTracebackLine] > 0 && gate)
    r.emplace_back(contrib(kGate),
                   "the failure's form (" +
                       (gate->exception.empty() ? std::string("no exception read") : gate->exception) +
                       (gate->raised_in_test ? ", raised in the test's code" : ", raised beneath the test") +
                       (gate->generic_check ? ", a generic check" : "") +
                       ") makes this statement the fault with probability " + fmt(gate->probability));
  std::stable_sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [w, s] : r) out.push_back(std::move(s));
  return out;
}

}  // namespace

// Algorithm 1 of the paper, one function per step over plain data; Localizer::localize runs them in order.
namespace {

// D' = filter(τ_f, D, p): the labelled cases the policy keeps for this query, and the cases never retrieved for it.
struct Filtered {
  std::vector<int64_t> subset;           // rowids, ascending, none of `excluded`
  std::unordered_set<int64_t> excluded;  // the query itself, its exact duplicates, and the caller's exclusions
};

Filtered filter_step(const std::vector<CaseFacts>& facts, const std::vector<int64_t>& labelled, const Case& query,
                     const Policy& policy, const std::unordered_set<int64_t>& extra_excluded, Localization& out) {
  Filtered d;
  d.excluded = extra_excluded;
  // The query itself (its id) and its exact duplicates (its content key) are never retrieved. The cases file holds
  // 64-bit hashes of both (with the length): a wrong match is a ~1e-14 chance per query at 10^5 cases.
  const uint64_t id_hash = fact_hash(query.id), key_hash = fact_hash(content_key(query));
  for (const auto& f : facts)
    if (f.id_hash == id_hash || f.key_hash == key_hash) d.excluded.insert(f.rowid);
  out.knowledge_base_size = labelled.size();
  // `all` keeps every labelled case: no pass over the cases per query.
  d.subset = policy.name == "all" ? labelled : filter_corpus(facts, query.failure_epoch, policy);
  if (d.excluded.size() > 64) {
    std::erase_if(d.subset, [&](int64_t id) { return d.excluded.contains(id); });
  } else {
    for (int64_t id : d.excluded)  // ascending rowids: each excluded one found by bisection
      if (auto at = std::lower_bound(d.subset.begin(), d.subset.end(), id); at != d.subset.end() && *at == id)
        d.subset.erase(at);
  }
  out.filtered_size = d.subset.size();
  return d;
}

// S = search(τ_f, D', r): the r most similar cases of D' (or r drawn at random, or none, by the mode's retrieval),
// those below the similarity floor dropped. The notes say why S is empty when it is.
Result<std::vector<SearchHit>> search_step(const KnowledgeBase* kb, SearchEngine* engine,
                                           const std::vector<int64_t>& labelled, const Case& query,
                                           const LocalizeOptions& options, const Filtered& d, Localization& out) {
  std::vector<SearchHit> similar;
  if (options.retrieval == Retrieval::none) {
    // The baseline: no knowledge is used.
  } else if (options.retrieval == Retrieval::random && !d.subset.empty()) {
    std::vector<int64_t> drawn;
    for (int64_t id : d.subset)
      if (std::binary_search(labelled.begin(), labelled.end(), id)) drawn.push_back(id);
    std::mt19937_64 rng(options.seed ^ fnv1a64(query.id.empty() ? query.test_id : query.id));
    std::shuffle(drawn.begin(), drawn.end(), rng);
    auto qv = engine->embed(query);
    if (!qv) return std::unexpected(qv.error());
    for (size_t i = 0; i < std::min(options.r, drawn.size()); ++i) {
      const auto v = engine->index().vector(drawn[i]);
      double dot = 0;
      for (size_t j = 0; j < v.size() && j < qv->size(); ++j) dot += static_cast<double>(v[j]) * (*qv)[j];
      similar.push_back({drawn[i], static_cast<float>(dot)});
    }
  } else if (!d.subset.empty()) {
    auto qv = engine->embed(query);
    if (!qv) return std::unexpected(qv.error());
    const bool everything = d.subset.size() + d.excluded.size() >= engine->index().size() &&
                            out.knowledge_base_size == engine->facts().size();
    similar = engine->search(*qv, options.r, everything ? std::nullopt : std::optional(d.subset), d.excluded);
    const size_t before = similar.size();
    std::erase_if(similar, [&](const SearchHit& h) { return h.similarity < options.similarity_floor; });
    if (similar.empty() && before > 0)
      out.notes.push_back("no case in the knowledge base is similar enough (best cosine below the floor " +
                          fmt(options.similarity_floor) + "): baseline behaviour, no annotations");
  } else if (!kb) {
    out.notes.push_back("no knowledge base yet: baseline behaviour, no annotations");
  } else if (!engine || out.knowledge_base_size == 0) {
    out.notes.push_back(
        "the knowledge base has no labelled case yet (it learns one when a failing test is fixed): "
        "baseline behaviour, no annotations");
  } else {
    out.notes.push_back("the policy " + options.policy.name +
                        " leaves no case for this failure: baseline behaviour, no annotations");
  }
  return similar;
}

// X = retrieve(S): the faulty lines' contents of the similar cases, with the cases' summaries in out.retrieved.
Result<std::vector<RetrievedFaultyLine>> retrieve_step(KnowledgeBase& kb, const std::vector<SearchHit>& similar,
                                                       std::vector<double>& sims, Localization& out) {
  std::vector<RetrievedFaultyLine> faulty;
  for (const auto& hit : similar) {
    auto c = kb.load(hit.rowid);
    if (!c) return std::unexpected(c.error());
    RetrievedCase rc;
    rc.rowid = hit.rowid;
    rc.id = c->id;
    rc.test_id = c->test_id;
    rc.project = c->project;
    rc.faulty_commit = c->faulty_commit;
    rc.fixed_commit = c->fixed_commit;
    rc.similarity = hit.similarity;
    const size_t first = faulty.size();
    append_faulty_lines(*c, out.retrieved.size(), faulty);
    rc.faulty_lines = c->faulty_lines;
    for (size_t i = first; i < faulty.size(); ++i) rc.faulty_text.push_back(faulty[i].text);
    sims.push_back(hit.similarity);
    out.retrieved.push_back(std::move(rc));
  }

  return faulty;
}

// τ' = annotate(τ_f, X, ε): each query line's closest retrieved faulty line, the lines within ε annotated
// (out.annotations), and the features the ranker weighs; the notes say what the ranker could read only in part.
void annotate_step(QueryView& view, const Case& query, const std::vector<RetrievedFaultyLine>& faulty,
                   const std::vector<double>& sims, const LocalizeOptions& options, const RankerModel& model,
                   Localization& out) {
  compute_features(view, faulty, sims, options.epsilon, model.kind_prior, query.error_message);
  apply_gate(model.gate, view);
  // Inputs the ranker can read only in part: said in the notes, the ranking goes on.
  for (const auto& f : view.files)
    if (f.structure->language == Language::other)
      out.notes.push_back(f.source->path +
                          ": spark reads no structure in this language (it knows Python, Java, "
                          "JavaScript and TypeScript): its lines are ranked one by one, without statements, blocks, "
                          "functions or the test's scope");
    else if (f.structure->has_syntax_errors)
      out.notes.push_back(f.source->path + " does not parse cleanly as " +
                          std::string(language_display_name(f.structure->language)) +
                          " (syntax errors): its statements, blocks and data flow near the errors are approximate; "
                          "every line is still ranked");
  if (view.frames.empty())
    out.notes.push_back("the error message holds no traceback: ranked without a failing statement");
  else if (view.stop_file < 0)
    out.notes.push_back(
        "the traceback names no line of the test files (it ends in other code): ranked without a "
        "failing statement");
  if (!query.test_id.empty() &&
      std::none_of(view.files.begin(), view.files.end(), [](const QueryView::File& f) { return f.scope.found; }))
    out.notes.push_back("the test id " + query.test_id +
                        " names no function found in the test files: ranked without "
                        "the test's scope (every line alike)");
  if (query.error_message.size() > kErrorMessageReadLimit)
    out.notes.push_back("the error message is " + fmt(static_cast<double>(query.error_message.size()) / (1 << 20), 1) +
                        " MB: the ranker read its first " + std::to_string(kErrorMessageReadLimit / 4 / 1024) +
                        " KB and its last " + std::to_string(kErrorMessageReadLimit * 3 / 4 / 1024) + " KB");
  if (view.has_stop) {
    GateReport g;
    g.line = {view.files[static_cast<size_t>(view.stop_file)].source->path, view.stop_line};
    g.probability = model.gate.probability(view.gate);
    g.exception = view.form.exception;
    g.form = std::string(exception_group_name(view.form.group));
    g.raised_in_test = view.raised_in_test;
    g.generic_check = view.form.generic_check;
    out.gate = g;
  }
  for (const auto& ql : view.lines)
    if (ql.best_match >= 0 && ql.best_distance <= options.epsilon) {
      const auto& fl = faulty[static_cast<size_t>(ql.best_match)];
      out.annotations.push_back(
          {{view.files[ql.file].source->path, ql.line}, ql.best_distance, fl.case_index, {fl.path, fl.line}});
    }
}

// L = rank(τ', k): line scores from the ranker, aggregated to the requested element level by their best line, the
// top k with their reasons (and --explain's breakdown).
void rank_step(const QueryView& view, const std::vector<RetrievedFaultyLine>& faulty, const LocalizeOptions& options,
               const RankerModel& model, Localization& out) {
  std::vector<double> probability;
  {
    std::vector<FeatureVector> rows;
    rows.reserve(view.lines.size());
    for (const auto& ql : view.lines) rows.push_back(ql.x);
    probability = model.probabilities(rows, view.has_stop, view.gate);
  }
  struct Group {
    const QueryLine* best = nullptr;
    double score = -1e300;
    int first = 0, last = 0;
    bool annotated = false;
    const char* cannot_be_faulty = nullptr;  // why it comes last (set once, before sorting)
  };
  std::map<std::pair<size_t, int>, Group> groups;
  for (size_t li = 0; li < view.lines.size(); ++li) {
    const QueryLine& ql = view.lines[li];
    const auto& s = *view.files[ql.file].structure;
    const int unit = unit_of(s, options.level, ql.line);
    Group& g = groups[{ql.file, options.level == Level::line ? ql.line : unit}];
    const double score = probability[li];
    if (!g.best || score > g.score) {
      g.best = &ql;
      g.score = score;
    }
    g.first = g.first == 0 ? ql.line : std::min(g.first, ql.line);
    g.last = std::max(g.last, ql.line);
    g.annotated = g.annotated || (ql.best_match >= 0 && ql.best_distance <= options.epsilon);
  }
  std::vector<const Group*> order;
  for (const auto& [key, g] : groups) order.push_back(&g);
  const auto distance_to_stop = [&](const Group* g) {
    return view.stop_file == static_cast<int>(g->best->file) ? std::abs(g->best->line - view.stop_line) : 1 << 30;
  };
  // Lines that cannot be the fault come after every other element unless evidence says otherwise (a similar case's
  // faulty line resembles them, the traceback names them, or the error repeats their names or values): comments,
  // `def`/`class` header lines, imports, docstrings and `pass`. Decorators are not among them: a parametrize list
  // holds test data that can be wrong. (Tree-sitter puts a comment that opens a block into that block's statement,
  // so a comment is told by its text.)
  const auto cannot_be_faulty = [&](const Group* g) -> const char* {
    if (options.level != Level::line && options.level != Level::statement) return nullptr;
    const QueryLine& ql = *g->best;
    if (g->annotated || ql.x[kTracebackLine] > 0 || ql.x[kTracebackFrame] > 0 || ql.x[kErrorOverlap] > 0)
      return nullptr;
    const std::string_view text = trim(ql.text);
    const CodeStructure& s = *view.files[ql.file].structure;
    const bool braces =
        s.language == Language::java || s.language == Language::javascript || s.language == Language::typescript;
    if (text.starts_with('#') && !braces) return "a comment";
    if (braces && (text.starts_with("//") || text.starts_with("/*") || text.starts_with("*"))) return "a comment";
    const std::string& kind = s.kind[static_cast<size_t>(ql.line - 1)];
    if ((kind == "def" && (text.starts_with("def ") || text.starts_with("async def "))) ||
        (kind == "class" && text.starts_with("class ")))
      return "a definition's header";
    // A Java method's header (not a JavaScript test's call, whose arguments can hold test data).
    if (kind == "def" && s.language == Language::java && text.find('=') == std::string_view::npos)
      return "a definition's header";
    if (kind == "brace") return "a closing bracket";
    if (kind == "import" || kind == "import_from" || kind == "future_import" || kind == "package") return "an import";
    if (kind == "docstring") return "a docstring";
    if (kind == "pass") return "a pass statement";
    return nullptr;
  };
  // Once per element, not per comparison: a 7,000-line file sorts ~90,000 times.
  for (auto& [key, g] : groups) g.cannot_be_faulty = cannot_be_faulty(&g);
  std::stable_sort(order.begin(), order.end(), [&](const Group* a, const Group* b) {
    const bool a_last = a->cannot_be_faulty != nullptr, b_last = b->cannot_be_faulty != nullptr;
    if (a_last != b_last) return b_last;
    if (a->score != b->score) return a->score > b->score;
    if (a->annotated != b->annotated) return a->annotated;
    return distance_to_stop(a) < distance_to_stop(b);
  });
  if (options.explain) {
    LineExplanation ex;
    ex.line = *options.explain;
    if (ex.line.path.empty() && !view.files.empty()) ex.line.path = view.files.front().source->path;
    const QueryLine* found = nullptr;
    for (const auto& ql : view.lines)
      if (ql.line == ex.line.line && same_file(view.files[ql.file].source->path, ex.line.path)) found = &ql;
    if (!found) {
      ex.note = ex.line.path + ":" + std::to_string(ex.line.line) +
                " is not a non-blank line of the test files: blank lines and lines outside them are not ranked";
    } else {
      ex.code = std::string(trim(found->text));
      for (size_t f = 0; f < kFeatureCount; ++f) {
        const double c = model.weights[f] * found->x[f];
        ex.terms.push_back({std::string(feature_name(f)), found->x[f], model.weights[f], c});
      }
      ex.score = probability[static_cast<size_t>(found - view.lines.data())];
      for (size_t i = 0; i < order.size(); ++i)
        if (order[i]->best->file == found->file && order[i]->first <= found->line && found->line <= order[i]->last &&
            (options.level != Level::line || order[i]->best == found))
          ex.rank = i + 1;
    }
    out.explanation = std::move(ex);
  }
  if (order.size() > options.k) order.resize(options.k);
  for (const Group* g : order) {
    const QueryLine& ql = *g->best;
    RankedElement e;
    e.path = view.files[ql.file].source->path;
    e.line = options.level == Level::line ? ql.line : g->first;
    e.end_line = options.level == Level::line ? ql.line : g->last;
    e.score = g->score;
    e.code = std::string(trim(view.files[ql.file].lines[static_cast<size_t>(e.line - 1)]));
    e.annotated = g->annotated;
    e.reasons =
        explain(ql, model, out.retrieved, faulty, view.files[ql.file].structure->kind[static_cast<size_t>(ql.line - 1)],
                options.epsilon, out.gate);
    if (const char* what = g->cannot_be_faulty)
      e.reasons.push_back(std::string(what) +
                          " with no evidence against it: ranked after the lines that can be faulty");
    out.ranked.push_back(std::move(e));
  }
}

}  // namespace

Result<Localization> Localizer::localize(const Case& query, const LocalizeOptions& options,
                                         const std::unordered_set<int64_t>& extra_excluded) {
  Localization out;
  out.test_id = query.test_id;
  StructureCache& cache = engine_ ? engine_->structures() : fallback_structures_;
  const RankerModel model = options.ranker ? *options.ranker : engine_ ? engine_->ranker() : RankerModel::prior();
  out.ranker = "builtin (" + model.origin + ")";

  Filtered d;
  d.excluded = extra_excluded;
  static const std::vector<int64_t> kNone;
  const std::vector<int64_t>& labelled = kb_ && engine_ ? labelled_rowids() : kNone;
  if (kb_ && engine_) d = filter_step(engine_->facts(), labelled, query, options.policy, extra_excluded, out);
  auto similar = search_step(kb_, engine_, labelled, query, options, d, out);
  if (!similar) return std::unexpected(similar.error());
  out.degraded = similar->empty();
  std::vector<double> sims;
  auto faulty =
      similar->empty() ? Result<std::vector<RetrievedFaultyLine>>{} : retrieve_step(*kb_, *similar, sims, out);
  if (!faulty) return std::unexpected(faulty.error());
  QueryView view = make_query_view(query, cache);
  annotate_step(view, query, *faulty, sims, options, model, out);
  rank_step(view, *faulty, options, model, out);
  return out;
}

const std::vector<int64_t>& Localizer::labelled_rowids() {
  if (!labelled_rowids_) {
    labelled_rowids_.emplace();
    for (const auto& f : engine_->facts())
      if (f.labelled) labelled_rowids_->push_back(f.rowid);
    std::sort(labelled_rowids_->begin(), labelled_rowids_->end());
  }
  return *labelled_rowids_;
}

std::string annotation_marker(Language language) {
  return std::string(comment_prefix(language)) + " " + std::string(kAnnotationText);
}

bool strip_annotation_marker(std::string& line) {
  const auto at = line.find(kAnnotationText);
  if (at == std::string::npos) return false;
  size_t cut = at;
  while (cut > 0 && line[cut - 1] == ' ') --cut;
  if (cut >= 2 && line.compare(cut - 2, 2, "//") == 0)
    cut -= 2;
  else if (cut >= 1 && line[cut - 1] == '#')
    cut -= 1;
  line.erase(cut);
  return true;
}

std::string Localizer::render_annotated(const Case& query, const std::vector<Annotation>& annotations) {
  std::set<std::pair<std::string, int>> marked;
  for (const auto& a : annotations) marked.insert({a.line.path, a.line.line});
  std::string out;
  for (const auto& f : query.files) {
    const Language language = language_for(f.path, query.language);
    if (query.files.size() > 1) out += std::string(comment_prefix(language)) + " file: " + f.path + "\n";
    const std::string marker = annotation_marker(language);
    const auto lines = split_lines(f.content);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (is_blank(lines[i])) continue;  // the paper's preprocessing: blank lines hidden, comments kept
      out += std::to_string(i + 1) + ": " + std::string(lines[i]);
      if (marked.contains({f.path, static_cast<int>(i) + 1})) out += "  " + marker;
      out += "\n";
    }
  }
  return out;
}

}  // namespace spark
