// The vector index beside the knowledge base (DIR/index/): FAISS, inner product over L2-normalised vectors (= cosine).
//
// Small sets use an exact IndexFlatIP; from `hnsw_threshold` vectors on, IndexHNSWFlat. A search restricted to a
// subset (a filtering policy) that is small runs exactly over the stored vectors with an id selector, because HNSW
// with a narrow filter returns too few results (faiss 1.7.3). Ids are knowledge-base rowids, mapped by spark itself
// (IndexIDMap2::search with parameters throws in 1.7.3).
//
// On disk: vectors.faiss, ids.bin and manifest.json, which is written last and holds the format version, the
// embedder identity, the knowledge-base generation the index was built from, and checksums of the other two files.
// An index whose files do not match their manifest is never used.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "result.h"

namespace faiss {
struct Index;
}

namespace spark {

struct VectorIndexOptions {
  size_t hnsw_threshold = 20000;  // vectors from which HNSW is built
  int hnsw_m = 32;
  int ef_construction = 64;
  int ef_search = 128;
  size_t exact_subset_limit = 20000;  // a policy subset this small is searched exactly
};

struct IndexManifest {
  int format = 1;
  std::string embedder;
  int64_t generation = 0;
  size_t count = 0;
  size_t dimension = 0;
  std::string kind;  // "flat" or "hnsw"
  std::string vectors_checksum, ids_checksum;
  std::vector<std::pair<std::string, std::string>> extra_files;  // name, checksum
};

struct SearchHit {
  int64_t rowid = 0;
  float similarity = 0;
};

class VectorIndex {
 public:
  VectorIndex(size_t dimension, VectorIndexOptions options);
  // An empty index of the kind `expected_count` vectors call for (HNSW from the threshold on), so a large build adds
  // straight into HNSW instead of converting a full flat index.
  static VectorIndex for_count(size_t dimension, size_t expected_count, VectorIndexOptions options);
  ~VectorIndex();
  VectorIndex(VectorIndex&&) noexcept;
  VectorIndex& operator=(VectorIndex&&) noexcept;

  // Adds vectors (row-major, dimension floats each). Switches to HNSW when the count crosses the threshold.
  void add(const std::vector<int64_t>& rowids, const std::vector<float>& vectors);

  // Top-r by cosine. `allowed` (sorted or not) restricts the candidates; nullopt means all. `excluded` are never
  // returned (the query itself, its duplicates).
  std::vector<SearchHit> search(const float* query, size_t r, const std::optional<std::vector<int64_t>>& allowed,
                                const std::unordered_set<int64_t>& excluded) const;

  // Exact top-r over every vector (for measuring HNSW's recall).
  std::vector<SearchHit> search_exact(const float* query, size_t r) const;
  // The stored vector of a case (reconstructed from the index).
  std::vector<float> vector(int64_t rowid) const;

  // HNSW's search breadth (efSearch); larger finds closer neighbours, slower. No effect on a flat index.
  void set_ef_search(int ef) { options_.ef_search = ef; }

  size_t size() const { return ids_.size(); }
  size_t dimension() const { return dimension_; }
  bool is_hnsw() const;
  bool contains(int64_t rowid) const;

  // Saves into `dir`; `extra_files` (names inside `dir`, written before) are covered by the manifest's checksums too.
  Status save(const std::filesystem::path& dir, const std::string& embedder, int64_t generation,
              const std::vector<std::string>& extra_files = {}) const;
  // Loads and verifies against the manifest; errors name the file ("…/vectors.faiss: checksum mismatch").
  static Result<std::pair<VectorIndex, IndexManifest>> load(const std::filesystem::path& dir,
                                                           VectorIndexOptions options);
  static Result<IndexManifest> read_manifest(const std::filesystem::path& dir);

 private:
  void rebuild_as_hnsw();
  size_t dimension_;
  VectorIndexOptions options_;
  std::unique_ptr<faiss::Index> index_;
  std::vector<int64_t> ids_;  // position -> rowid
  std::unordered_map<int64_t, int64_t> position_;
};

// A fast 64-bit checksum of a file's bytes (streamed), as 16 hex digits.
Result<std::string> file_checksum(const std::filesystem::path& path);

}  // namespace spark
