// The vector index beside the knowledge base (DIR/index/): FAISS, inner product over L2-normalised vectors (= cosine).
//
// Identical vectors (a test failing the same way on the same test-file version) share one entry that lists the cases
// behind it. Small sets use an exact IndexFlatIP; from `hnsw_threshold` distinct vectors on, IndexHNSWFlat, and then
// each search is refined exactly: every vector of the *groups* (the caller's key per case, e.g. its test id) of the
// best few HNSW hits is scored against the query, so near-duplicates of one test (many failures of it) cannot hide
// the closest of them from a graph walk. A search restricted to a subset (a filtering policy) that is small runs
// exactly over the stored vectors with an id selector, because HNSW with a narrow filter returns too few results
// (faiss 1.7.3). Ids are knowledge-base rowids, mapped by spark itself.
//
// On disk (docs/FORMATS.md): manifest.json names the data files of one saved state (the raw vectors
// vectors.<token>.f32, mapped on load; the HNSW graph graph.<token>.faiss; ids.<token>.bin; segments; the caller's
// extra files), with the format version, the embedder identity, the knowledge-base generation the index was built
// from, and checksums (index_checksums.h). A save writes new files under new names and then replaces the manifest
// atomically, so a crash at any point leaves either the old or the new state; the files of the replaced state are
// removed after. An index whose files do not match their manifest is never used. The index is a cache of the
// knowledge base that `spark index` builds: one format is written and read (IndexManifest::kFormat), and load()
// refuses an index of an earlier spark's format with an error naming its manifest, which the commands that open an
// index answer by building it again.
//
// The code: vector_index.cpp adds and searches; vector_index_io.cpp saves, loads and reads the manifest;
// faiss_adapter.* is what it needs of FAISS; index_checksums.* the files' checksums and the verified list.
// Thread safety: searches of one index may run concurrently; add and save need exclusive access.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/result.h"

namespace faiss {
struct Index;
struct IndexFlat;
}  // namespace faiss

namespace spark {

class MappedFile;

struct VectorIndexOptions {
  size_t hnsw_threshold = 8192;  // distinct vectors from which HNSW is built (below: exact search, ≤ ~6 ms a query)
  int hnsw_m = 16;
  int ef_construction = 64;
  int ef_search = 128;
  size_t exact_subset_limit = 20000;  // a policy subset this small is searched exactly
  size_t refine_hits = 4;             // HNSW hits whose groups are scored exactly
  size_t refine_limit = 16384;        // at most this many vectors scored exactly per search
  // An HNSW search whose best hit is less similar than this is run again exactly, over every vector. A graph built
  // over clusters of near-duplicate failures (as CI makes them) walks well to a query near one of its clusters, and
  // badly to a failure unlike any stored: on 100k cases, queries from a project left out of the knowledge base found
  // the exact top-1 for 20–30 % of queries at any efSearch. The default, below any cosine, never does;
  // SearchEngine sets it from the embedder.
  float exact_below = -2.0f;
  // save() appends the cases added since load as a segment file instead of rewriting the index when the base holds
  // at least this many distinct vectors, the segments' cases stay within 1/segment_share_divisor of the base's, and
  // there are at most max_segments; otherwise it writes a whole new base (compaction). Segment vectors are searched
  // exactly beside the graph (at 1/32 of 100k cases, about 3,000 vectors: a few ms a query at most).
  size_t segment_min_base = 8192;
  size_t segment_share_divisor = 32;
  size_t max_segments = 16;
  // load() reads the vectors file's every byte to verify its checksum; false checks only its size and header
  // and maps it (a query reads the pages its search touches; similarities from damaged bytes rank last, never crash).
  bool verify_vectors = true;
  // true: a file an earlier load verified, unchanged since, is not hashed again. The index folder's `verified` list
  // (written by any load that hashed a file) names each verified file with its checksum and identity (device, inode,
  // size, mtime, ctime: MappedFile::Identity); a file whose manifest checksum and identity both match its line is
  // taken as verified. Any write through the file system changes a file's ctime, which no user can set back, so a
  // damaged or replaced file is hashed again and refused. What a list cannot see is damage beneath the file system (a
  // failing disk): every load that does not trust the list (`spark index`, `spark eval`, updates) hashes every file.
  // A query's load (SearchEngine::open with verify_vectors false) trusts it; a folder spark may not write keeps no
  // list, and then every load hashes.
  bool trust_verified_files = false;
  // A file changed less than this long before a load verified it is not listed (a change in the same tick of the file
  // system's clock could leave its times as they were): tests set 0.
  int verified_min_age_ms = 2000;
};

struct IndexManifest {
  // The format a save writes and load() reads: a raw vectors file (a 4,096-byte header, then the rows; mapped on
  // load), an HNSW graph file of its own when kind is "hnsw", an ids file, segments or none, four-lane checksums.
  // read_manifest() reads of an earlier format's manifest only `format`, `embedder`, `generation`, `count`,
  // `dimension` and `kind` (what every format's manifest says), and load() refuses it.
  static constexpr int kFormat = 6;
  int format = kFormat;
  std::string embedder;
  int64_t generation = 0;
  size_t count = 0;    // cases, segments included
  size_t vectors = 0;  // distinct vectors when saved, segments included
  size_t dimension = 0;
  std::string kind;  // "flat" or "hnsw"
  std::string vectors_file, ids_file;
  std::string vectors_checksum, ids_checksum;
  std::string graph_file, graph_checksum;   // HNSW only
  size_t base_count = 0, base_vectors = 0;  // what the vectors and ids files hold (= count, vectors without segments)
  // Cases added after the base was written, appended as they came (an incremental update writes one segment, not
  // the whole index): rowid, group and vector each, in the order they were added.
  struct Segment {
    std::string file, checksum;
    size_t count = 0;    // cases
    size_t vectors = 0;  // new distinct vectors
  };
  std::vector<Segment> segments;
  struct Extra {
    std::string name, file, checksum;  // logical name, file in the index folder, checksum
  };
  std::vector<Extra> extra_files;
  // The file holding the extra `name` ("" when the manifest names none).
  std::string file_of(const std::string& name) const;
  // The files of the saved state: the vectors, ids, graph and segment files; files() adds the extra files.
  std::set<std::string> data_files() const;
  std::set<std::string> files() const;
};

struct SearchHit {
  int64_t rowid = 0;
  float similarity = 0;
};

class VectorIndex {
 public:
  VectorIndex(size_t dimension, VectorIndexOptions options);
  // Kept for callers that know the final size; the index starts flat and becomes HNSW at the threshold.
  static VectorIndex for_count(size_t dimension, size_t expected_count, VectorIndexOptions options);
  ~VectorIndex();
  VectorIndex(VectorIndex&&) noexcept;
  VectorIndex& operator=(VectorIndex&&) noexcept;

  // Adds vectors (row-major, dimension floats each); `groups` (one per rowid, or empty: each case its own group)
  // are the keys the HNSW refinement scores together. A vector identical to a stored one joins its entry.
  // Switches to HNSW when the distinct count crosses the threshold.
  void add(const std::vector<int64_t>& rowids, const std::vector<float>& vectors,
           const std::vector<int64_t>& groups = {});

  // Top-r by cosine; equal similarities by rowid. `allowed` (sorted or not) restricts the candidates; nullopt means
  // all. `excluded` are never returned (the query itself, its duplicates).
  std::vector<SearchHit> search(const float* query, size_t r, const std::optional<std::vector<int64_t>>& allowed,
                                const std::unordered_set<int64_t>& excluded) const;

  // Exact top-r over every vector (for measuring HNSW's recall).
  std::vector<SearchHit> search_exact(const float* query, size_t r) const;
  // The stored vector of a case (reconstructed from the index).
  std::vector<float> vector(int64_t rowid) const;

  // HNSW's search breadth (efSearch); larger finds closer neighbours, slower. No effect on a flat index.
  void set_ef_search(int ef) { options_.ef_search = ef; }
  // FAISS's HNSW search starts an OpenMP team at every call, even for one query: search() and search_exact() run on
  // the calling thread alone. This makes every later OpenMP region of the calling thread one thread too (what a
  // process that only searches wants).
  static void search_on_this_thread();
  // Turns the exact refinement of HNSW hits off (0) or on (the default 4): for measuring what it adds.
  void set_refine_hits(size_t n) { options_.refine_hits = n; }
  // The similarity below which an HNSW search is repeated exactly (VectorIndexOptions::exact_below).
  void set_exact_below(float similarity) { options_.exact_below = similarity; }
  float exact_below() const { return options_.exact_below; }

  size_t size() const { return table_.cases(); }          // cases
  size_t distinct() const { return table_.positions(); }  // distinct vectors (index entries)
  size_t dimension() const { return dimension_; }
  bool is_hnsw() const;
  bool contains(int64_t rowid) const;

  struct Extra {
    std::string name, file;  // logical name, file written in the index folder before save()
  };
  // Saves into `dir` under new file names, then the manifest; `extra_files` are covered by the manifest's checksums
  // and named by it. Returns after removing the files of the state it replaced. An index loaded from `dir` whose
  // base is still the one on disk saves only the cases added since as a new segment (a few MB, not the whole
  // index) while the segments stay small (VectorIndexOptions); else, and for a new index, it writes a whole base.
  Status save(const std::filesystem::path& dir, const std::string& embedder, int64_t generation,
              const std::vector<Extra>& extra_files = {});
  // The mapping of the extra file `name` that load() verified, handed over once (null when it named none, or after
  // the first call): its user reads the bytes the checksum read, through the pages that read touched, instead of
  // mapping the file again (each page a new process touches is a page fault). A save() drops them: they are of the
  // state it replaces.
  std::shared_ptr<const MappedFile> take_verified_extra(const std::string& name);
  // How many files the load that made this index hashed to verify them (the others: its `verified` list vouched for
  // them, or they are not checked on a query's load); 0 for an index not loaded.
  size_t files_hashed_at_load() const { return files_hashed_at_load_; }
  // Segments the last load or save left (0 after a whole save).
  size_t segments() const { return saved_ ? saved_->manifest.segments.size() : 0; }
  // Loads and verifies against the manifest; errors name the file ("…/ids.….bin: checksum mismatch"). An index of an
  // earlier format is refused: "…/manifest.json: index format 5 was written by an earlier spark (this one reads
  // format 6): run `spark index --rebuild`".
  static Result<std::pair<VectorIndex, IndexManifest>> load(const std::filesystem::path& dir,
                                                            VectorIndexOptions options);
  // The manifest in `dir`, checked for files outside the folder and counts that do not add up (not the files); of an
  // earlier format, its common fields only (IndexManifest::kFormat). Errors name manifest.json.
  static Result<IndexManifest> read_manifest(const std::filesystem::path& dir);
  // A fresh name for a file of the next saved state: "<stem>.<unique token><ext>".
  static std::string fresh_name(const std::string& stem, const std::string& ext);

 private:
  void rebuild_as_hnsw();
  const float* stored(int64_t position) const;  // the flat storage's row
  void ensure_hashes();
  // A restricted search's candidates: its cases (rowids, ascending) and their positions (one bit each). A policy
  // that keeps most of 10^5 cases (every labelled one, when a few failures are not fixed yet) made a hash set of
  // their rowids and FAISS's IDSelectorBatch another of their positions: ~10 ms a query at 100k cases, more than
  // the rest of the search. A sorted vector and bitmaps cost a copy and a pass.
  struct Subset {
    std::vector<int64_t> rowids;
    std::vector<uint8_t> rowid_bits;  // rowids - rowids.front(), one bit each, when they are dense enough
    std::vector<uint8_t> position_bits;
    size_t positions = 0, tail_positions = 0;  // distinct positions set; of them, those in the exact tail
    bool has_rowid(int64_t rowid) const;
    bool has_position(int64_t position) const;
  };
  std::vector<SearchHit> expand(const std::vector<std::pair<int64_t, float>>& positions, size_t r,
                                const Subset* allowed, const std::unordered_set<int64_t>& excluded) const;
  void refine(const float* query, std::vector<std::pair<int64_t, float>>& hits, const Subset* allowed) const;
  // Whether the best of an HNSW search's hits reaches options_.exact_below (else the search is repeated exactly).
  bool similar_enough(const std::vector<std::pair<int64_t, float>>& hits) const;
  size_t dimension_;
  VectorIndexOptions options_;
  std::unique_ptr<faiss::Index> index_;
  // Vectors added to a saved HNSW index since its base was written (positions index_->ntotal + i), searched
  // exactly beside the graph; a whole save inserts them into the graph.
  std::unique_ptr<faiss::IndexFlat> tail_;
  void search_tail(const float* query, size_t k, const Subset* allowed,
                   std::vector<std::pair<int64_t, float>>& hits) const;
  void merge_tail();
  // Which cases sit at which distinct vector (position), and each case's group. As loaded, arrays built in one pass
  // over the saved entries (no allocation per case: a new `spark localize` process at 100k cases pays a
  // few ms, not a hash map of every case); the first add turns them into hash maps. Both answer alike: a position's
  // members in the order they were added, a group's positions ascending.
  class CaseTable {
   public:
    struct Entry {
      int64_t rowid = 0, position = 0, group = 0;
    };
    // Replaces the table with the entries `mapped` then `more` (in the order they were added) over `positions`
    // distinct vectors; an error names what is wrong (a position out of range, a case twice). `mapped` lies in `file`
    // (the ids file's (rowid, position, group) int64 triples, used where they lie: a new process writes no copy of
    // them into fresh memory); `more` are the segments' cases.
    Status load(std::span<const Entry> mapped, std::shared_ptr<const MappedFile> file, std::vector<Entry> more,
                size_t positions);
    size_t cases() const { return frozen_ ? entries_.size() : where_.size(); }
    size_t positions() const { return frozen_ ? member_start_.size() - 1 : members_.size(); }
    std::optional<Entry> find(int64_t rowid) const;
    std::span<const int64_t> members(int64_t position) const;
    std::span<const int64_t> group_positions(int64_t group) const;
    // Adds a case (at a new position when `position` == positions()).
    void add(const Entry& e);
    // Calls fn(rowid, position) for every case, in no particular order.
    template <class Fn>
    void for_each_case(Fn&& fn) const {
      if (frozen_)
        entries_.for_each([&fn](const Entry& e) { fn(e.rowid, e.position); });
      else
        for (const auto& [rowid, where] : where_) fn(rowid, where.first);
    }

   private:
    void thaw();
    bool frozen_ = false;
    // Frozen: the entries, found by rowid through slot_ (rowid - min_rowid_ -> entry) when the rowids are dense,
    // else sorted by rowid; the members of position p at member_rowids_[member_start_[p] .. member_start_[p+1]);
    // the (group, position) pairs sorted, each once, as two arrays (a group's positions are one span).
    static constexpr uint32_t kAbsent = 0xffffffffu;
    // The entries: those in the mapped ids file, then the owned ones (all of them, sorted by rowid, when the rowids
    // are not dense).
    struct Entries {
      std::span<const Entry> mapped;
      std::shared_ptr<const MappedFile> file;
      std::vector<Entry> more;
      size_t size() const { return mapped.size() + more.size(); }
      const Entry& operator[](size_t i) const { return i < mapped.size() ? mapped[i] : more[i - mapped.size()]; }
      template <class Fn>
      void for_each(Fn&& fn) const {
        for (const Entry& e : mapped) fn(e);
        for (const Entry& e : more) fn(e);
      }
    };
    Entries entries_;
    bool dense_ = false;
    int64_t min_rowid_ = 0;
    std::vector<uint32_t> slot_;
    std::vector<uint32_t> member_start_ = {0};
    std::vector<int64_t> member_rowids_;
    std::vector<int64_t> group_keys_, group_positions_of_;
    // Thawed.
    std::vector<std::vector<int64_t>> members_;
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> where_;  // rowid -> (position, group)
    std::unordered_map<int64_t, std::vector<int64_t>> group_positions_;
  };
  CaseTable table_;
  std::unordered_multimap<uint64_t, int64_t> by_hash_;  // vector bytes' hash -> position (built on first add)
  bool hashed_ = true;
  // The saved state this index was loaded from or last saved as (absent for a new index), and the cases added since
  // in the order they came: what a segment save appends.
  struct SavedState {
    IndexManifest manifest;
  };
  std::optional<SavedState> saved_;
  std::vector<std::pair<std::string, std::shared_ptr<const MappedFile>>> verified_extras_;  // load()'s, until taken
  std::vector<int64_t> appended_;
  size_t files_hashed_at_load_ = 0;
  Status save_whole(const std::filesystem::path& dir, const std::string& embedder, int64_t generation,
                    const std::vector<Extra>& extra_files);
  Status save_segment(const std::filesystem::path& dir, const std::string& embedder, int64_t generation,
                      const std::vector<Extra>& extra_files);
  Status write_manifest(const std::filesystem::path& dir, const IndexManifest& m,
                        const std::vector<Extra>& extra_files);
  class Loader;  // load()'s steps (vector_index_io.cpp)
};

// The inner product of two float vectors with eight independent accumulators (GCC vector extensions: two 4-lane
// registers on baseline x86-64, the same code elsewhere). Debian's faiss is a generic build whose inner product is a
// single-accumulator loop bound by the adder's latency; the index's HNSW graph (built and searched), its exact
// searches and the refinement use this one instead (bench/index_bench.cpp measures the two). The order of the sum
// differs from faiss's, so a similarity may differ from faiss's in its last bits.
float inner_product(const float* x, const float* y, size_t d);

}  // namespace spark
