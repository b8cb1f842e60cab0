#include "localizer/search_engine.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
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

// A row of the file is a CaseFacts in memory: five 64-bit fields, no padding, little-endian.
static_assert(sizeof(CaseFacts) == 5 * sizeof(uint64_t) && std::is_standard_layout_v<CaseFacts> &&
                  std::is_trivially_copyable_v<CaseFacts> && offsetof(CaseFacts, labelled) == 4 * sizeof(uint64_t),
              "the cases file's rows are CaseFacts in place");
static_assert(std::endian::native == std::endian::little, "the cases file is little-endian");

Status write_cases(const fs::path& path, std::span<const CaseFacts> facts) {
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

namespace {

// An index file that opens with an 8-byte magic and a u64 count: mapped (unless `mapped` is it already) and its count
// read; nullopt when the file is too short for that header or opens with another magic.
struct Counted {
  std::shared_ptr<const MappedFile> file;
  std::optional<uint64_t> count;
};
Result<Counted> map_counted(const fs::path& path, std::shared_ptr<const MappedFile> mapped, const char (&magic)[8]) {
  if (!mapped) {
    auto map = MappedFile::open(path);
    TRY(map);
    mapped = std::move(*map);
  }
  const std::string_view bytes = mapped->view();
  Counted out{std::move(mapped), std::nullopt};
  if (bytes.size() >= sizeof magic + sizeof(uint64_t) && std::memcmp(bytes.data(), magic, sizeof magic) == 0) {
    uint64_t n = 0;
    std::memcpy(&n, bytes.data() + sizeof magic, sizeof n);
    out.count = n;
  }
  return out;
}

}  // namespace

Result<MappedCases> map_cases(const fs::path& path, std::shared_ptr<const MappedFile> mapped) {
  auto counted = map_counted(path, std::move(mapped), kCasesMagic);
  TRY(counted);
  const std::string_view bytes = counted->file->view();
  const size_t head = sizeof kCasesMagic + sizeof(uint64_t);
  const uint64_t n = counted->count.value_or(0);
  if (!counted->count || n > bytes.size() / sizeof(CaseFacts) || bytes.size() != head + n * sizeof(CaseFacts))
    return fail(path.string() + ": not a cases file of this index (header or size); run `spark index --rebuild`");
  // The mapping is page-aligned and the rows start 16 bytes in: each row is an aligned CaseFacts (an implicit-lifetime
  // aggregate of five 64-bit integers; any bytes are valid values of it).
  const auto* rows = reinterpret_cast<const CaseFacts*>(bytes.data() + head);
  return MappedCases{std::move(counted->file), std::span<const CaseFacts>(rows, n)};
}

constexpr char kLabelsMagic[8] = {'S', 'P', 'K', 'L', 'A', 'B', '0', '1'};

Status write_labels(const fs::path& path, std::vector<std::pair<int64_t, std::string>> labels) {
  std::sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string bytes(kLabelsMagic, sizeof kLabelsMagic);
  const auto u64 = [&](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); };
  u64(labels.size());
  uint64_t offset = 0;
  for (const auto& [rowid, text] : labels) {
    u64(static_cast<uint64_t>(rowid));
    u64(offset);
    u64(text.size());
    offset += text.size();
  }
  for (const auto& [rowid, text] : labels) bytes += text;
  return write_file_atomic(path, bytes);
}

Result<MappedLabels> MappedLabels::open(const fs::path& path, std::shared_ptr<const MappedFile> mapped) {
  auto counted = map_counted(path, std::move(mapped), kLabelsMagic);
  TRY(counted);
  const size_t head = sizeof kLabelsMagic + sizeof(uint64_t);
  const uint64_t n = counted->count.value_or(0);
  if (!counted->count || n > (counted->file->view().size() - head) / 24)
    return fail(path.string() + ": not a labels file of this index (header or size); run `spark index --rebuild`");
  MappedLabels labels;
  labels.path_ = path;
  labels.file_ = std::move(counted->file);
  labels.count_ = static_cast<size_t>(n);
  return labels;
}

Result<std::optional<CaseLabel>> MappedLabels::find(int64_t rowid) const {
  const std::string_view bytes = file_->view();
  const size_t table = sizeof kLabelsMagic + sizeof(uint64_t), body = table + count_ * 24;
  const auto field = [&](size_t row, size_t k) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + table + row * 24 + k * 8, sizeof v);
    return v;
  };
  size_t lo = 0, hi = count_;  // the first row whose rowid is at least `rowid`
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (static_cast<int64_t>(field(mid, 0)) < rowid)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == count_ || static_cast<int64_t>(field(lo, 0)) != rowid) return std::optional<CaseLabel>();
  const uint64_t offset = field(lo, 1), size = field(lo, 2);
  if (offset > bytes.size() - body || size > bytes.size() - body - offset)
    return fail(path_.string() + ": the label of case " + std::to_string(rowid) +
                " lies outside the file; run `spark index --rebuild`");
  auto label = label_from_json(bytes.substr(body + offset, size));
  if (!label)
    return fail(path_.string() + ": case " + std::to_string(rowid) + ": " + label.error().message +
                "; run `spark index --rebuild`");
  return std::optional<CaseLabel>(std::move(*label));
}

}  // namespace index_files

namespace {

// The error of an index that holds cases the knowledge base no longer has; `why` also goes to `store_lost_cases`.
std::unexpected<Error> lost_cases(const fs::path& dir, const std::string& why, std::string* store_lost_cases) {
  if (store_lost_cases) *store_lost_cases = why;
  return fail(dir.string() + ": the index holds cases the knowledge base no longer has (" + why +
              "): run `spark index --rebuild`");
}

}  // namespace

float exact_search_bound(const Embedder& embedder) {
  if (const auto* builtin = dynamic_cast<const HashedTfidfEmbedder*>(&embedder))
    return static_cast<float>(builtin->same_test_code_similarity());
  return VectorIndexOptions{}.exact_below;  // never
}

Result<std::unique_ptr<SearchEngine>> SearchEngine::open(KnowledgeBase& kb, EmbedderConfig config,
                                                         std::vector<std::string>& notes, bool verify_vectors,
                                                         std::string* store_lost_cases) {
  using namespace index_files;
  const fs::path dir = kb.index_dir();
  std::error_code ec;
  if (!fs::exists(dir / "manifest.json", ec)) return fail("no vector index in " + dir.string() + ": run `spark index`");
  // One manifest for everything loaded: the index verifies its files and the extra ones against it.
  VectorIndexOptions index_options;
  index_options.verify_vectors = verify_vectors;
  // A query's load: files an earlier load verified, unchanged since, are not hashed again (VectorIndexOptions).
  index_options.trust_verified_files = !verify_vectors;
  auto loaded = VectorIndex::load(dir, index_options);
  TRY(loaded);
  const IndexManifest* manifest = &loaded->second;
  if (config.kind.empty()) config.kind = manifest->embedder.starts_with("openai/") ? "openai" : "builtin";
  TRY(check_embedder_kind(config));
  std::unique_ptr<Embedder> embedder = make_embedder(config);
  if (auto* builtin = dynamic_cast<HashedTfidfEmbedder*>(embedder.get())) {
    const std::string df = manifest->file_of(kDocumentFrequencies);
    if (df.empty())
      return fail((dir / "manifest.json").string() + ": names no document frequencies (" + kDocumentFrequencies + ")");
    // Through the mapping the index verified it by: its pages are touched once, not once per mapping.
    TRY(builtin->load(dir / df, loaded->first.take_verified_extra(kDocumentFrequencies)));
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
  TRY(ranker);
  std::shared_ptr<const MappedFile> cases_map = loaded->first.take_verified_extra(kCases);
  std::optional<MappedLabels> labels;
  if (const std::string labels_file = manifest->file_of(kLabels); !labels_file.empty()) {
    auto mapped = MappedLabels::open(dir / labels_file, loaded->first.take_verified_extra(kLabels));
    TRY(mapped);
    labels = std::move(*mapped);
  }
  loaded->first.set_exact_below(exact_search_bound(*embedder));
  std::unique_ptr<SearchEngine> engine(
      new SearchEngine(std::move(embedder), std::move(loaded->first), std::move(*ranker)));
  engine->embedder_identity_ = manifest->embedder;
  engine->labels_ = std::move(labels);
  for (const auto& e : manifest->extra_files) engine->extras_.push_back({e.name, e.file});

  auto generation = kb.generation();
  TRY(generation);
  if (*generation == manifest->generation) {
    // The store has not changed since the index was saved: the cases file says what filtering needs, with no pass
    // over the store's rows (an index saved by an earlier spark has none: read from the store, written by persist).
    if (const std::string cases_file = manifest->file_of(kCases); !cases_file.empty()) {
      auto mapped = map_cases(dir / cases_file, std::move(cases_map));
      TRY(mapped);
      engine->set_facts(std::move(*mapped));
    } else {
      auto entries = kb.entries();
      TRY(entries);
      engine->set_facts(facts_of(*entries));
    }
    if (engine->facts_.size() != engine->index_.size())
      return fail(dir.string() + ": the index does not match the knowledge base: run `spark index --rebuild`");
    // The same generation is not yet the same cases: a store that went back (a lost write, an older backup) and was
    // then written to as often reaches the generation again with other cases, and a row deleted on the server leaves
    // it as it was. The store's count and last case, read without reading its rows, must be the index's.
    auto tail = kb.tail();
    TRY(tail);
    if (tail->count != engine->facts_.size())
      return lost_cases(dir,
                        "the store has " + std::to_string(tail->count) + " case(s) at the generation the index was " +
                            "saved at with " + std::to_string(engine->facts_.size()),
                        store_lost_cases);
    if (tail->count > 0 &&
        (tail->last_rowid != engine->facts_.back().rowid || fact_hash(tail->last_id) != engine->facts_.back().id_hash))
      return lost_cases(dir, "the store's last case is not the index's", store_lost_cases);
  } else {
    auto entries = kb.entries();
    TRY(entries);
    std::span<const CaseFacts> indexed;
    index_files::MappedCases indexed_map;
    if (const std::string cases_file = manifest->file_of(kCases); !cases_file.empty()) {
      auto mapped = map_cases(dir / cases_file, std::move(cases_map));
      TRY(mapped);
      indexed_map = std::move(*mapped);
      indexed = indexed_map.rows;
    }
    TRY(engine->catch_up(kb, *entries, indexed, notes, store_lost_cases));
  }
  return engine;
}

Status SearchEngine::catch_up(KnowledgeBase& kb, const std::vector<CaseEntry>& entries,
                              std::span<const CaseFacts> indexed, std::vector<std::string>& notes,
                              std::string* store_lost_cases) {
  const fs::path dir = kb.index_dir();
  std::vector<int64_t> missing;
  size_t replaced = 0;  // rows the index holds whose case in the store is another (its rowid used again)
  for (const auto& e : entries) {
    if (!index_.contains(e.rowid)) {
      missing.push_back(e.rowid);
      continue;
    }
    const auto at = std::lower_bound(indexed.begin(), indexed.end(), e.rowid,
                                     [](const CaseFacts& f, int64_t rowid) { return f.rowid < rowid; });
    if (at != indexed.end() && at->rowid == e.rowid && at->id_hash != fact_hash(e.id)) ++replaced;
  }
  // Every case of the index the store has is one of `entries`: the rest of the index is gone from the store.
  const size_t kept = entries.size() - missing.size();
  if (kept < index_.size())
    return lost_cases(dir,
                      std::to_string(index_.size() - kept) + " of its " + std::to_string(index_.size()) +
                          " case(s) are gone from the store",
                      store_lost_cases);
  if (replaced > 0)
    return lost_cases(dir, std::to_string(replaced) + " of its rows hold other cases in the store now",
                      store_lost_cases);
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
    TRY(embed_stored_cases(kb, *builtin, options, add));
  } else {
    std::vector<float> flat;
    for (int64_t rowid : missing) {
      auto c = kb.load(rowid);
      TRY(c);
      auto v = embed(*c);
      TRY(v);
      flat.insert(flat.end(), v->begin(), v->end());
    }
    if (auto s = add(missing, flat); !s) return s;
  }
  added_ids_ = missing;
  set_facts(facts_of(entries));
  if (!missing.empty())
    notes.push_back("the index lacked " + std::to_string(missing.size()) +
                    " case(s) added since it was built; embedded them for this run");
  return {};
}

Status SearchEngine::persist(KnowledgeBase& kb) {
  auto generation = kb.generation();
  TRY(generation);
  if (facts_need_file_) {
    // The cases file of the state being saved: a new file, named by the new manifest.
    const std::string name = VectorIndex::fresh_name("cases", ".bin");
    if (auto s = index_files::write_cases(kb.index_dir() / name, facts_); !s) return s;
    std::erase_if(extras_, [](const VectorIndex::Extra& e) { return e.name == index_files::kCases; });
    extras_.push_back({index_files::kCases, name});
  }
  if (auto s = index_.save(kb.index_dir(), embedder_identity_, *generation, extras_); !s) return s;
  facts_need_file_ = false;
  return {};
}

Status SearchEngine::replace_ranker(KnowledgeBase& kb, RankerModel model) {
  const std::string name = VectorIndex::fresh_name("ranker", ".json");
  if (auto s = model.save(kb.index_dir() / name); !s) return s;
  std::erase_if(extras_, [](const VectorIndex::Extra& e) { return e.name == index_files::kRanker; });
  extras_.push_back({index_files::kRanker, name});
  ranker_ = std::move(model);
  return {};
}

void SearchEngine::set_facts(std::vector<CaseFacts> from_store) {
  facts_from_store_ = std::move(from_store);
  facts_map_.reset();
  facts_ = facts_from_store_;
  facts_need_file_ = true;
}

void SearchEngine::set_facts(index_files::MappedCases mapped) {
  facts_from_store_.clear();
  facts_map_ = std::move(mapped.file);
  facts_ = mapped.rows;
  facts_need_file_ = false;
}

Result<std::vector<float>> SearchEngine::embed(const Case& c) {
  auto v = embedder_->embed({embed_text(c, structures_)});
  TRY(v);
  if (v->size() != 1 || v->front().size() != index_.dimension())
    return fail("the embedder returned a vector of dimension " + std::to_string(v->empty() ? 0 : v->front().size()) +
                ", the index has " + std::to_string(index_.dimension()));
  return std::move(v->front());
}

}  // namespace spark
