#include "search_engine.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "base/files.h"
#include "base/mapped_file.h"
#include "base/text.h"
#include "base/work_pool.h"

namespace spark {

namespace fs = std::filesystem;

namespace index_files {

namespace {
constexpr char kCasesMagic[8] = {'S', 'P', 'K', 'C', 'A', 'S', '0', '1'};
}

Status write_cases(const fs::path& path, const std::vector<CaseFacts>& facts) {
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

Result<std::vector<CaseFacts>> read_cases(const fs::path& path) {
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

}  // namespace index_files

Result<std::unique_ptr<SearchEngine>> SearchEngine::open(KnowledgeBase& kb, EmbedderConfig config,
                                                         std::vector<std::string>& notes, bool verify_vectors) {
  using namespace index_files;
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
    const std::string df = manifest->file_of(kDocumentFrequencies);
    if (df.empty())
      return fail((dir / "manifest.json").string() + ": names no document frequencies (" + kDocumentFrequencies + ")");
    if (auto s = builtin->load(dir / df); !s) return std::unexpected(s.error());
  }
  if (config.kind == "builtin" && embedder->identity() != manifest->embedder)
    return fail(dir.string() + ": the index was built with embedder \"" + manifest->embedder +
                "\", the configuration asks for \"" + embedder->identity() + "\": run `spark index --rebuild`");
  if (config.kind == "openai" && !manifest->embedder.starts_with(embedder->identity()))
    return fail(dir.string() + ": the index was built with embedder \"" + manifest->embedder +
                "\", the configuration asks for \"" + embedder->identity() + "\": run `spark index --rebuild`");
  const std::string ranker_file = manifest->file_of(kRanker);
  if (ranker_file.empty()) return fail((dir / "manifest.json").string() + ": names no ranker (" + kRanker + ")");
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
    if (const std::string cases_file = manifest->file_of(kCases); !cases_file.empty()) {
      auto facts = read_cases(dir / cases_file);
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
    if (auto s = engine->catch_up(kb, *entries, notes); !s) return std::unexpected(s.error());
  }
  return engine;
}

Status SearchEngine::catch_up(KnowledgeBase& kb, const std::vector<CaseEntry>& entries,
                              std::vector<std::string>& notes) {
  const fs::path dir = kb.index_dir();
  std::unordered_set<int64_t> present;
  for (const auto& e : entries) present.insert(e.rowid);
  if (index_.size() > present.size())
    return fail(dir.string() + ": the index holds cases the knowledge base no longer has: run `spark index --rebuild`");
  std::vector<int64_t> missing;
  for (const auto& e : entries)
    if (!index_.contains(e.rowid)) missing.push_back(e.rowid);
  if (missing.size() + index_.size() != present.size())
    return fail(dir.string() + ": the index does not match the knowledge base: run `spark index --rebuild`");
  std::unordered_map<int64_t, int64_t> group;
  for (const auto& e : entries) group[e.rowid] = static_cast<int64_t>(fnv1a64(e.test_id));
  const auto add = [&](const std::vector<int64_t>& rowids, const std::vector<float>& flat) -> Status {
    if (flat.size() != rowids.size() * index_.dimension())
      return fail("the embedder returned vectors of another dimension than the index's " +
                  std::to_string(index_.dimension()));
    std::vector<int64_t> groups;
    groups.reserve(rowids.size());
    for (int64_t rowid : rowids) groups.push_back(group.at(rowid));
    index_.add(rowids, flat, groups);
    return {};
  };
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder_.get())) {
    StoredEmbeddingOptions options;
    options.only = &missing;
    options.threads = index_threads(0);
    if (auto s = embed_stored_cases(kb, *builtin, options, add); !s) return std::unexpected(s.error());
  } else {
    std::vector<float> flat;
    for (int64_t rowid : missing) {
      auto c = kb.load(rowid);
      if (!c) return std::unexpected(c.error());
      auto v = embed(*c);
      if (!v) return std::unexpected(v.error());
      flat.insert(flat.end(), v->begin(), v->end());
    }
    if (auto s = add(missing, flat); !s) return s;
  }
  added_ids_ = missing;
  facts_ = facts_of(entries);
  facts_from_store_ = true;
  if (!missing.empty())
    notes.push_back("the index lacked " + std::to_string(missing.size()) +
                    " case(s) added since it was built; embedded them for this run");
  return {};
}

Status SearchEngine::persist(KnowledgeBase& kb) {
  auto generation = kb.generation();
  if (!generation) return std::unexpected(generation.error());
  if (facts_from_store_) {
    // The cases file of the state being saved: a new file, named by the new manifest.
    const std::string name = VectorIndex::fresh_name("cases", ".bin");
    if (auto s = index_files::write_cases(kb.index_dir() / name, facts_); !s) return s;
    std::erase_if(extras_, [](const VectorIndex::Extra& e) { return e.name == index_files::kCases; });
    extras_.push_back({index_files::kCases, name});
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

}  // namespace spark
