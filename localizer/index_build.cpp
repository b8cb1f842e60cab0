#include "localizer/index_build.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <unordered_map>

#include "base/clock.h"
#include "base/text.h"
#include "base/work_pool.h"
#include "formats/case.h"
#include "localizer/held_out.h"
#include "localizer/line_features.h"
#include "localizer/search_engine.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

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

// The order in which learn_ranker visits the sample: by the files' paths, then their versions, so that a worker's
// structure cache parses each version once (a spread-out sample of 500 cases held 278 versions, parsed ~490 times in
// rowid order) and the next version of a file incrementally from the one before. Each result still goes to the case's
// own slot: the model does not depend on this order.
Result<std::vector<size_t>> by_version(KnowledgeBase& kb, const std::vector<const CaseEntry*>& labelled) {
  std::unordered_map<int64_t, size_t> slot;
  int64_t first = labelled.empty() ? 0 : labelled.front()->rowid;
  for (size_t i = 0; i < labelled.size(); ++i) {
    slot.emplace(labelled[i]->rowid, i);
    first = std::min(first, labelled[i]->rowid);
  }
  std::vector<std::string> version(labelled.size());
  TRY(kb.for_each_sketch(first, [&](KnowledgeBase::CaseSketch&& sketch) -> Status {
    const auto it = slot.find(sketch.rowid);
    if (it == slot.end()) return {};
    std::string& v = version[it->second];
    for (const auto& [path, key] : sketch.files) v += path + "\n";
    for (const auto& [path, key] : sketch.files) v += key + "\n";
    return {};
  }));
  std::vector<size_t> order(labelled.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return version[a] < version[b]; });
  return order;
}

// One pass over the sample: each case is parsed once, for both the statement kinds' prior and its features. The
// prior is known only at the end, so each kept row carries its line's kind (an index into `kinds`) in the kind-prior
// slot until then. In chunks, in by_version's order: the cases are loaded and searched in order (one store
// connection), their views parsed and featured on worker threads (a structure cache each), and each folded into its
// own slot of the training set, so the model is the one a single thread learns in rowid order.
Result<RankerModel> learn_ranker(KnowledgeBase& kb, const std::vector<CaseEntry>& entries,
                                 const std::vector<const CaseEntry*>& labelled, const VectorIndex& index,
                                 const std::function<std::vector<float>(int64_t)>& vector_of,
                                 const IndexBuildOptions& options) {
  const unsigned threads = index_threads(options.threads);
  std::vector<TrainingCase> training(labelled.size());
  std::vector<StructureCache> caches;
  for (unsigned w = 0; w < threads; ++w) caches.emplace_back(16);
  KindCounts kind_counts;  // sums of whole counts: the same in any order
  std::vector<std::string> kinds;
  std::unordered_map<std::string, size_t> kind_index;
  const KindPrior no_prior;
  const VectorOf stored_vector = [&](int64_t rowid, const Case&) -> Result<std::vector<float>> {
    return vector_of(rowid);
  };
  HeldOutSource source(kb, entries, index, stored_vector, HeldOutOptions{options.r, options.similarity_floor, {}});
  auto order = by_version(kb, labelled);
  TRY(order);
  // Small chunks: each view holds every line's features (7,000 lines in the largest test files). The next chunk's
  // material is loaded and searched on this thread (the store's connection) while the workers parse the current one.
  constexpr size_t kChunk = 16;
  const auto load = [&](size_t start) -> Result<std::vector<HeldOutMaterial>> {
    std::vector<HeldOutMaterial> items;
    const size_t n = std::min(kChunk, order->size() - start);
    items.reserve(n);  // views point into the cases: no reallocation after they are made
    for (size_t i = 0; i < n; ++i) {
      auto m = source.material(labelled[(*order)[start + i]]->rowid);
      TRY(m);
      items.push_back(std::move(*m));
    }
    return items;
  };
  Result<std::vector<HeldOutMaterial>> current = order->empty() ? std::vector<HeldOutMaterial>{} : load(0);
  for (size_t start = 0; start < order->size(); start += kChunk) {
    TRY(current);
    std::vector<HeldOutMaterial>& items = *current;
    const size_t n = items.size();
    std::vector<std::optional<QueryView>> views(n);
    // Each worker takes a contiguous run of the chunk: the cases of one version, and the versions of one file, stay
    // on one structure cache.
    auto working = std::async(std::launch::async, [&] {
      const auto workers = static_cast<unsigned>(std::min<size_t>(threads, n));
      parallel_for(workers, workers, [&](unsigned w, size_t part) {
        for (size_t i = part * n / workers; i < (part + 1) * n / workers; ++i) {
          views[i] = make_query_view(items[i].c, caches[w]);
          compute_features(*views[i], items[i].faulty, items[i].sims, options.epsilon, no_prior,
                           items[i].c.error_message);
        }
      });
    });
    auto next = start + kChunk < order->size() ? load(start + kChunk) : std::vector<HeldOutMaterial>{};
    working.get();
    for (size_t i = 0; i < n; ++i) {
      QueryView& view = *views[i];
      const size_t slot = (*order)[start + i];
      kind_counts.add(view, items[i].c.faulty_lines);
      for (auto& ql : view.lines) {
        const auto& s = *view.files[ql.file].structure;
        const std::string kind = kind_key(s.language, s.kind[static_cast<size_t>(ql.line - 1)]);
        auto [it, added] = kind_index.emplace(kind, kinds.size());
        if (added) kinds.push_back(kind);
        ql.x[kKindPrior] = static_cast<double>(it->second);
      }
      training[slot] = training_case(view, items[i].c.faulty_lines);
      thin_training_case(training[slot], slot, options.training.negatives_per_case);
    }
    views.clear();  // before the cases they point into
    current = std::move(next);
  }
  const KindPrior prior = kind_counts.prior();
  std::vector<double> prior_of(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) prior_of[i] = prior.get(kinds[i]);
  for (auto& tc : training)
    for (auto& row : tc.rows) row[kKindPrior] = prior_of[static_cast<size_t>(row[kKindPrior])];
  return train_ranker(std::move(training), prior, options.training);
}

// The ranker learnt from the labelled cases of `entries` (learn_ranker, on a spread-out sample of at most
// max_training_cases), each localized held out against `index`; stamped with the labelled cases it learnt at, the time
// and how long learning took.
Result<RankerModel> learn_stamped_ranker(KnowledgeBase& kb, const std::vector<CaseEntry>& entries,
                                         const VectorIndex& index, const IndexBuildOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto sample = training_sample(entries, options.max_training_cases);
  const auto vector_of = [&](int64_t rowid) { return index.vector(rowid); };
  auto ranker = learn_ranker(kb, entries, sample, index, vector_of, options);
  if (!ranker) return ranker;
  ranker->labelled_cases =
      static_cast<size_t>(std::count_if(entries.begin(), entries.end(), [](const CaseEntry& e) { return e.labelled; }));
  ranker->trained_at = now_epoch();
  ranker->train_seconds = seconds_since(t0);
  return ranker;
}

// HNSW's approximate search against the exact one (VectorIndex::search_exact), on a spread-out sample of the stored
// vectors, each a query with itself excluded: how often HNSW's best is as similar as the exact best.
void check_recall(const VectorIndex& index, const std::vector<CaseEntry>& entries, IndexReport& report) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = std::min(kRecallSample, entries.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t rowid = entries[i * entries.size() / n].rowid;
    const std::vector<float> v = index.vector(rowid);
    if (v.empty()) continue;
    const auto approximate = index.search(v.data(), 1, std::nullopt, {rowid});
    auto exact = index.search_exact(v.data(), 2);
    std::erase_if(exact, [&](const SearchHit& h) { return h.rowid == rowid; });
    if (exact.empty()) continue;
    ++report.recall_checked;
    if (!approximate.empty() && approximate.front().similarity >= exact.front().similarity - 1e-6)
      ++report.recall_matched;
  }
  report.recall_seconds = seconds_since(t0);
}

// What a retrieval reads of each labelled case (CaseLabel), gathered while the cases are embedded and written beside
// the vectors (index_files::kLabels). A record that does not read back keeps no label: a retrieval of it reads the
// store, and says what is wrong.
class Labels {
 public:
  explicit Labels(unsigned threads) : parts_(threads) {}
  // The embedding's callback (StoredEmbeddingOptions::each_labelled): the labels of one version's labelled cases.
  decltype(StoredEmbeddingOptions::each_labelled) from_records() {
    return [this](unsigned w, const std::vector<int64_t>& rowids, const std::vector<std::string>& records,
                  const std::vector<std::string>& paths, const std::vector<std::string>& contents) {
      std::vector<std::optional<std::vector<std::string_view>>> split(paths.size());  // each file split once
      const LinesOf lines_of = [&](const std::string& path) -> const std::vector<std::string_view>* {
        for (size_t i = 0; i < paths.size() && i < contents.size(); ++i)
          if (paths[i] == path) {
            if (!split[i]) split[i] = split_lines(contents[i]);
            return &*split[i];
          }
        return nullptr;
      };
      for (size_t i = 0; i < rowids.size() && i < records.size(); ++i)
        if (auto label = stored_case_label(records[i], lines_of))
          parts_[w].emplace_back(rowids[i], label_to_json(*label));
    };
  }
  void add(int64_t rowid, const Case& c) { parts_.front().emplace_back(rowid, label_to_json(case_label(c))); }
  Status write(const fs::path& path) {
    std::vector<std::pair<int64_t, std::string>> all;
    for (auto& part : parts_) std::move(part.begin(), part.end(), std::back_inserter(all));
    parts_.clear();
    return index_files::write_labels(path, std::move(all));
  }

 private:
  std::vector<std::vector<std::pair<int64_t, std::string>>> parts_;  // one per worker
};

}  // namespace

Result<IndexReport> build_index(KnowledgeBase& kb, EmbedderConfig config, const IndexBuildOptions& options) {
  if (config.kind.empty()) config.kind = "builtin";
  TRY(check_embedder_kind(config));
  IndexReport report;
  auto generation = kb.generation();
  TRY(generation);
  auto entries = kb.entries();
  TRY(entries);
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
    groups.reserve(rowids.size());
    for (int64_t rowid : rowids) groups.push_back(group_of.at(rowid));
    const auto ta = std::chrono::steady_clock::now();
    index->add(rowids, vectors, groups);
    add_seconds += seconds_since(ta);
    return {};
  };
  Labels labels(threads);
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder.get())) {
    StoredEmbeddingOptions embedding;
    embedding.expected = entries->size();
    embedding.fit = true;
    embedding.threads = threads;
    embedding.each_labelled = labels.from_records();
    auto pass = embed_stored_cases(kb, *builtin, embedding, add);
    TRY(pass);
    report.versions = pass->versions;
    report.test_functions = pass->test_functions;
  } else {
    std::vector<int64_t> batch_ids;
    std::vector<EmbedText> batch;
    StructureCache cache;
    TestFunctionCache function_cache;
    const auto flush = [&]() -> Status {
      if (batch.empty()) return {};
      auto got = embedder->embed(batch);
      TRY(got);
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
      batch.push_back(embed_text(c, cache, &function_cache));
      if (c.labelled()) labels.add(rowid, c);
      return batch.size() >= 16 ? flush() : Status{};
    });
    TRY(pass);
    TRY(flush());
  }
  report.embedder = embedder->identity();
  report.embed_seconds = seconds_since(t0) - add_seconds;

  const auto t1 = std::chrono::steady_clock::now();
  if (!index) index.emplace(embedder->dimension(), options.index);  // an empty knowledge base
  report.kind = index->is_hnsw() ? "hnsw" : "flat";
  report.index_seconds = add_seconds + seconds_since(t1);
  if (index->is_hnsw()) check_recall(*index, *entries, report);

  // The ranker learns from a spread-out sample of the labelled cases; the statement kinds' prior from the same.
  // The check above measured the graph alone; the ranker learns from retrievals as a query's engine makes them.
  index->set_exact_below(exact_search_bound(*embedder));
  auto ranker = learn_stamped_ranker(kb, *entries, *index, options);
  TRY(ranker);
  report.ranker = ranker->origin;
  report.train_seconds = ranker->train_seconds;

  const fs::path dir = kb.index_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  // Every file of the new state under a new name; the manifest switches to them (old or new state after a crash).
  std::vector<VectorIndex::Extra> extra = {{index_files::kRanker, VectorIndex::fresh_name("ranker", ".json")}};
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder.get())) {
    extra.push_back({index_files::kDocumentFrequencies, VectorIndex::fresh_name("df", ".bin")});
    TRY(builtin->save(dir / extra.back().file));
  }
  TRY(ranker->save(dir / extra.front().file));
  extra.push_back({index_files::kCases, VectorIndex::fresh_name("cases", ".bin")});
  TRY(index_files::write_cases(dir / extra.back().file, facts_of(*entries)));
  extra.push_back({index_files::kLabels, VectorIndex::fresh_name("labels", ".bin")});
  TRY(labels.write(dir / extra.back().file));
  TRY(index->save(dir, report.embedder, *generation, extra));
  report.vectors = index->distinct();
  return report;
}

size_t next_training_at(size_t labelled_then, const IndexBuildOptions& options) {
  const size_t first = options.training.min_training_cases;
  if (labelled_then < first) return first;
  const auto growth = static_cast<size_t>(std::ceil(static_cast<double>(labelled_then) * options.learn_again_growth));
  return labelled_then + std::max<size_t>(1, growth);
}

Result<std::optional<RankerModel>> load_saved_ranker(const fs::path& index_dir) {
  if (!path_exists(index_dir / "manifest.json")) return std::nullopt;
  auto manifest = VectorIndex::read_manifest(index_dir);
  TRY(manifest);
  const std::string file = manifest->file_of(index_files::kRanker);
  if (file.empty())
    return fail((index_dir / "manifest.json").string() + ": names no ranker (" + index_files::kRanker + ")");
  auto ranker = RankerModel::load(index_dir / file);
  TRY(ranker);
  return std::optional<RankerModel>(std::move(*ranker));
}

Result<std::optional<RankerRelearnt>> learn_ranker_if_due(KnowledgeBase& kb, SearchEngine& engine,
                                                          const IndexBuildOptions& options) {
  size_t labelled = 0;
  for (const CaseFacts& f : engine.facts()) labelled += f.labelled ? 1 : 0;
  if (labelled < next_training_at(engine.ranker().labelled_cases, options)) return std::nullopt;
  auto entries = kb.entries();
  TRY(entries);
  // The cases of the engine's index: another process may have stored more since it loaded.
  std::erase_if(*entries, [&](const CaseEntry& e) { return !engine.index().contains(e.rowid); });
  auto ranker = learn_stamped_ranker(kb, *entries, engine.index(), options);
  TRY(ranker);
  RankerRelearnt report{engine.ranker().origin, *ranker};
  TRY(engine.replace_ranker(kb, std::move(*ranker)));
  return report;
}

}  // namespace spark
