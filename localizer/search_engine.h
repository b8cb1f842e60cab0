// S = search(τ_f, D', r): the embedder and the vector index of a knowledge base, loaded from its index folder
// (DIR/index) and checked against the store; and the index folder's files besides the vectors.
//
// Ownership: a SearchEngine owns its embedder, index, ranker model and structure cache; it does not own the knowledge
// base it was opened on, which must outlive it. Thread safety: search() and the const accessors may be called from
// several threads at once; embed(), persist() and structures() are for one thread. What may fail: a missing, damaged
// or stale index, an embedder that does not match it, and the store — each an error that names the file and the
// command that repairs it (`spark index`, `spark index --rebuild`).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/mapped_file.h"
#include "code/structure_cache.h"
#include "formats/case.h"
#include "localizer/case_embedding.h"
#include "localizer/line_features.h"
#include "localizer/ranker.h"
#include "retrieval/vector_index.h"
#include "store/knowledge_base.h"

namespace spark {

// The files an index folder holds besides the vectors, by their names in the manifest.
namespace index_files {
inline constexpr const char* kDocumentFrequencies = "df.bin";  // the built-in embedder's statistics
inline constexpr const char* kRanker = "ranker.json";          // the built-in ranker's model
inline constexpr const char* kCases = "cases.bin";             // what filtering needs of every case (CaseFacts)

// The cases file: "SPKCAS01", the count (u64), then per case rowid, failure epoch, id hash, content-key hash and
// labelled (0 or 1), u64 each (little-endian), in rowid order: each row is a CaseFacts as it lies in memory. Written
// atomically; a file of another size or header is an error.
Status write_cases(const std::filesystem::path& path, std::span<const CaseFacts> facts);
// The cases file mapped, its rows used in place (no copy): valid while the returned mapping lives.
struct MappedCases {
  std::shared_ptr<const MappedFile> file;
  std::span<const CaseFacts> rows;
};
// `mapped`, when given, is the file already mapped (and verified) by the index's load; errors still name `path`.
Result<MappedCases> map_cases(const std::filesystem::path& path, std::shared_ptr<const MappedFile> mapped = nullptr);

inline constexpr const char* kLabels = "labels.bin";  // what a retrieval reads of each labelled case (CaseLabel)
// The labels file: "SPKLAB01", the count (u64), then per label its rowid, offset and size (u64 each, little-endian,
// in rowid order; the offset counts from the end of this table), then the labels (label_to_json). Written atomically.
Status write_labels(const std::filesystem::path& path, std::vector<std::pair<int64_t, std::string>> labels);
// The labels file mapped; find() reads one label in place. A file of another header or a table that points outside
// it is an error; a label that does not read back is find()'s error.
class MappedLabels {
 public:
  static Result<MappedLabels> open(const std::filesystem::path& path, std::shared_ptr<const MappedFile> mapped);
  // nullopt when the file holds no label of `rowid` (a case added after the index was built).
  Result<std::optional<CaseLabel>> find(int64_t rowid) const;
  size_t size() const { return count_; }

 private:
  std::filesystem::path path_;
  std::shared_ptr<const MappedFile> file_;
  size_t count_ = 0;
};
}  // namespace index_files

// The similarity below which a search of an index made by `embedder` is repeated exactly rather than answered by the
// HNSW graph (VectorIndexOptions::exact_below): with the built-in embedder, the similarity two failures of one test in
// one test-file version reach from their code alone (a query less similar to every stored failure shares its test
// code with none, and the graph walks badly to it); the OpenAI-compatible embedder's similarities have no such known
// scale, and its searches keep the graph's answer. Set wherever an index is searched for localization: a query's
// engine and the ranker's training at `spark index`, so both retrieve alike.
float exact_search_bound(const Embedder& embedder);

class SearchEngine {
 public:
  // Loads the index. When the knowledge base has cases the index lacks (added since), they are embedded and added in
  // memory and `notes` says so; when the index cannot be trusted (damaged, other embedder, cases replaced), the error
  // says to run `spark index --rebuild`. A knowledge base with no index yet is an error naming that command.
  // `verify_vectors` false maps the vectors file after checking its size and header only, and does not hash again the
  // files the index folder's verified list vouches for (VectorIndexOptions): what a query needs; an update or a build
  // verifies every byte of every file. `store_lost_cases`, when given, is set to why when the error is that the index
  // holds cases the knowledge base no longer has (its cases file and the store's rows disagree: a write lost in a
  // power cut, an older backup restored, rows deleted on the server), which a rebuild repairs (open_or_rebuild,
  // engine.h); it is left empty on any other error.
  static Result<std::unique_ptr<SearchEngine>> open(KnowledgeBase& kb, EmbedderConfig config,
                                                    std::vector<std::string>& notes, bool verify_vectors = true,
                                                    std::string* store_lost_cases = nullptr);
  Result<std::vector<float>> embed(const Case& c);
  std::vector<SearchHit> search(const std::vector<float>& query, size_t r,
                                const std::optional<std::vector<int64_t>>& allowed,
                                const std::unordered_set<int64_t>& excluded) const {
    return index_.search(query.data(), r, allowed, excluded);
  }
  const VectorIndex& index() const { return index_; }
  VectorIndex& index() { return index_; }
  // Saves the index with the cases embedded since it was loaded (after `spark import`), under the knowledge base's
  // current generation. The statistics and the ranker stay as `spark index` made them.
  Status persist(KnowledgeBase& kb);
  size_t added_since_load() const { return added_ids_.size(); }
  const RankerModel& ranker() const { return ranker_; }
  // Replaces the ranker by `model` (learnt again as cases arrived, index_build.h): written to a new file of the index
  // folder, which the next persist() names in the manifest (a reader sees the old ranker or the new one).
  Status replace_ranker(KnowledgeBase& kb, RankerModel model);
  StructureCache& structures() { return structures_; }
  // What a retrieval reads of the labelled case at `rowid`, from the index's labels file; nullopt when the index keeps
  // none of it (a case embedded after the build, an index saved by an earlier spark): the caller reads the store.
  Result<std::optional<CaseLabel>> label(int64_t rowid) const {
    return labels_ ? labels_->find(rowid) : Result<std::optional<CaseLabel>>{std::nullopt};
  }
  // Every case of the knowledge base as the index holds it (rowid order): the index's cases file, mapped, when the
  // store has not changed since it was saved, else read from the store.
  std::span<const CaseFacts> facts() const { return facts_; }

 private:
  SearchEngine(std::unique_ptr<Embedder> e, VectorIndex i, RankerModel r)
      : embedder_(std::move(e)), index_(std::move(i)), ranker_(std::move(r)) {}
  // Embeds the store's cases the loaded index lacks and adds them (in memory). `indexed` is the index's cases file
  // (empty for an index saved without one): a case at a rowid the index holds must be the one it embedded there.
  // `store_lost_cases` as for open().
  Status catch_up(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, std::span<const CaseFacts> indexed,
                  std::vector<std::string>& notes, std::string* store_lost_cases);
  std::unique_ptr<Embedder> embedder_;
  VectorIndex index_;
  RankerModel ranker_;
  StructureCache structures_;
  std::string embedder_identity_;
  std::vector<int64_t> added_ids_;          // embedded since load
  std::vector<VectorIndex::Extra> extras_;  // the loaded state's extra files (kept by persist)
  std::optional<index_files::MappedLabels> labels_;
  // Set the facts: read from the store (persist writes them as a new cases file), or the mapped cases file's rows.
  void set_facts(std::vector<CaseFacts> from_store);
  void set_facts(index_files::MappedCases mapped);
  std::span<const CaseFacts> facts_;             // one of the two below
  std::vector<CaseFacts> facts_from_store_;      // read from the store (not yet in a cases file)
  std::shared_ptr<const MappedFile> facts_map_;  // the cases file facts_ lies in
  bool facts_need_file_ = false;                 // read from the store: persist writes them as a new cases file
};

}  // namespace spark
