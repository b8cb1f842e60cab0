#include "retrieval/vector_index.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/mapped_file.h"
#include "base/text.h"
#include "retrieval/faiss_adapter.h"
#include "retrieval/index_checksums.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// The format a save writes and a load reads (IndexManifest::kFormat).
constexpr int kFormat = IndexManifest::kFormat;
constexpr const char* kManifest = "manifest.json";

// The raw vectors file: "SPKVEC01", dimension and count (u64 each), zeros to the end of a 4,096-byte header, then the
// rows (float32, row-major). The header is one page so that a row of 1,024 floats (the built-in embedder's) is one
// page of the mapping, not the end of one and the start of the next: a query's graph walk touches half the pages
// (each page a new process touches costs it a fault).
constexpr char kVectorsMagic[8] = {'S', 'P', 'K', 'V', 'E', 'C', '0', '1'};
constexpr size_t kVectorsHeader = 4096;

// A segment file: "SPKSEG01"; dimension, cases, new distinct vectors (u64 each); (rowid, position, group) per case,
// in the order added; then the new vectors (positions from the base's count on), float32.
constexpr char kSegmentMagic[8] = {'S', 'P', 'K', 'S', 'E', 'G', '0', '1'};
constexpr size_t kSegmentHeader = sizeof kSegmentMagic + 3 * sizeof(uint64_t);

bool safe_name(const std::string& f) { return !f.empty() && f.find('/') == std::string::npos && f != ".." && f != "."; }

// The error of an index file whose bytes do not match the checksum its manifest gives.
std::unexpected<Error> checksum_mismatch(const fs::path& path) {
  return fail(path.string() +
              ": checksum mismatch with manifest.json (truncated or damaged); run `spark index --rebuild`");
}

}  // namespace

std::shared_ptr<const MappedFile> VectorIndex::take_verified_extra(const std::string& name) {
  for (auto& [n, map] : verified_extras_)
    if (n == name) return std::exchange(map, nullptr);
  return nullptr;
}

std::string IndexManifest::file_of(const std::string& name) const {
  for (const auto& e : extra_files)
    if (e.name == name) return e.file;
  return {};
}

std::set<std::string> IndexManifest::data_files() const {
  std::set<std::string> out;
  for (const std::string* f : {&vectors_file, &ids_file, &graph_file})
    if (!f->empty()) out.insert(*f);
  for (const auto& sg : segments) out.insert(sg.file);
  return out;
}

std::set<std::string> IndexManifest::files() const {
  std::set<std::string> out = data_files();
  for (const auto& e : extra_files) out.insert(e.file);
  return out;
}

std::string VectorIndex::fresh_name(const std::string& stem, const std::string& ext) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return stem + "." +
         hex64(fnv1a64(std::to_string(::getpid()) + "/" + std::to_string(t) + "/" + std::to_string(counter++)))
             .substr(0, 12) +
         ext;
}

Status VectorIndex::save(const fs::path& dir, const std::string& embedder, int64_t generation,
                         const std::vector<Extra>& extra_files) {
  // The mappings load() verified are of the state this save replaces: never handed out after it.
  verified_extras_.clear();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  // Two processes saving at once (CI jobs recording into one store) take turns: their manifests must not interleave.
  struct SaveLock {
    int fd = -1;
    ~SaveLock() {
      if (fd >= 0) ::close(fd);  // releases the flock
    }
  } lock;
  lock.fd = ::open((dir / "save.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd >= 0) ::flock(lock.fd, LOCK_EX);
  // A segment only on top of the base and segments that are on disk now: another process may have replaced them
  // (and removed their files) since this index was loaded.
  bool segment = false;
  if (saved_ && saved_->manifest.base_vectors >= options_.segment_min_base) {
    const IndexManifest& was = saved_->manifest;
    size_t segment_cases = appended_.size();
    for (const auto& sg : was.segments) segment_cases += sg.count;
    auto current = read_manifest(dir);
    segment = current && current->vectors_file == was.vectors_file &&
              segment_cases <= was.base_count / std::max<size_t>(1, options_.segment_share_divisor) &&
              was.segments.size() + (appended_.empty() ? 0 : 1) <= options_.max_segments;
    if (segment)
      for (const auto& sg : was.segments)
        segment = segment && std::any_of(current->segments.begin(), current->segments.end(),
                                         [&](const IndexManifest::Segment& c) { return c.file == sg.file; });
  }
  return segment ? save_segment(dir, embedder, generation, extra_files)
                 : save_whole(dir, embedder, generation, extra_files);
}

Status VectorIndex::save_whole(const fs::path& dir, const std::string& embedder, int64_t generation,
                               const std::vector<Extra>& extra_files) {
  std::error_code ec;
  merge_tail();  // the tail's vectors join the graph now, once, not on every incremental update
  // New files under new names; the manifest, replaced atomically, switches from the old state to the new one.
  // The vectors go to a raw file a later load maps instead of reading (a cold `spark localize` reads only the pages
  // its search touches); an HNSW graph goes to its own faiss file, written with an empty storage.
  const bool hnsw = is_hnsw();
  const std::string vec_name = fresh_name("vectors", ".f32"), ids_name = fresh_name("ids", ".bin");
  const std::string graph_name = hnsw ? fresh_name("graph", ".faiss") : "";
  const fs::path vec = dir / vec_name, ids = dir / ids_name;
  const FastFlatIP& flat = flat_of(*index_);
  auto vsum = write_checksummed(vec, [&](faiss::IOWriter& w) {
    std::string header(kVectorsHeader, '\0');
    std::memcpy(header.data(), kVectorsMagic, sizeof kVectorsMagic);
    const uint64_t dc[2] = {dimension_, static_cast<uint64_t>(flat.ntotal)};
    std::memcpy(header.data() + sizeof kVectorsMagic, dc, sizeof dc);
    w(header.data(), 1, header.size());
    w(flat.rows(), sizeof(float) * dimension_, static_cast<size_t>(flat.ntotal));
  });
  TRY(vsum);
  std::string gsum;
  if (hnsw) {
    // The graph alone: its storage is swapped for an empty one while faiss writes (the vectors are in the raw file).
    auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index_.get());
    faiss::IndexFlatIP empty(static_cast<idx_t>(dimension_));
    faiss::Index* storage = h->storage;
    h->storage = &empty;
    auto sum = write_checksummed(dir / graph_name, [&](faiss::IOWriter& w) { faiss::write_index(index_.get(), &w); });
    h->storage = storage;
    TRY(sum);
    gsum = *sum;
  }
  // ids: (rowid, position, group) per case, ordered by group, position, rowid: a load finds the groups' positions
  // in order and sorts nothing.
  std::vector<CaseTable::Entry> entries;
  entries.reserve(table_.cases());
  for (size_t p = 0; p < table_.positions(); ++p)
    for (int64_t rowid : table_.members(static_cast<int64_t>(p)))
      entries.push_back({rowid, static_cast<int64_t>(p), table_.find(rowid)->group});
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.group, a.position, a.rowid) < std::tie(b.group, b.position, b.rowid);
  });
  std::vector<int64_t> triples;
  triples.reserve(entries.size() * 3);
  for (const auto& e : entries) triples.insert(triples.end(), {e.rowid, e.position, e.group});
  std::string id_bytes(reinterpret_cast<const char*>(triples.data()), triples.size() * sizeof(int64_t));
  if (auto s = write_file_atomic(ids, id_bytes); !s) return s;
  auto isum = file_checksum(ids);
  TRY(isum);
  IndexManifest m;
  m.embedder = embedder;
  m.generation = generation;
  m.count = m.base_count = table_.cases();
  m.vectors = m.base_vectors = table_.positions();
  m.dimension = dimension_;
  m.kind = is_hnsw() ? "hnsw" : "flat";
  m.vectors_file = vec_name;
  m.ids_file = ids_name;
  m.graph_file = graph_name;
  m.vectors_checksum = *vsum;
  m.ids_checksum = *isum;
  m.graph_checksum = gsum;
  if (auto s = write_manifest(dir, m, extra_files); !s) return s;
  saved_ = SavedState{std::move(m)};
  appended_.clear();
  return {};
}

Status VectorIndex::save_segment(const fs::path& dir, const std::string& embedder, int64_t generation,
                                 const std::vector<Extra>& extra_files) {
  IndexManifest m = saved_->manifest;
  m.embedder = embedder;
  m.generation = generation;
  if (!appended_.empty()) {
    // The segment file (kSegmentMagic): the cases added since the last save, then their new vectors.
    const size_t first_new = m.vectors;
    const uint64_t header[3] = {dimension_, appended_.size(), table_.positions() - first_new};
    std::string bytes(kSegmentMagic, sizeof kSegmentMagic);
    bytes.append(reinterpret_cast<const char*>(header), sizeof header);
    for (int64_t rowid : appended_) {
      const auto e = table_.find(rowid);
      const int64_t triple[3] = {rowid, e->position, e->group};
      bytes.append(reinterpret_cast<const char*>(triple), sizeof triple);
    }
    for (size_t p = first_new; p < table_.positions(); ++p)
      bytes.append(reinterpret_cast<const char*>(stored(static_cast<int64_t>(p))), dimension_ * sizeof(float));
    const std::string name = fresh_name("segment", ".bin");
    if (auto s = write_file_atomic(dir / name, bytes); !s) return s;
    auto sum = file_checksum(dir / name);
    TRY(sum);
    m.segments.push_back({name, *sum, appended_.size(), table_.positions() - first_new});
  }
  m.count = table_.cases();
  m.vectors = table_.positions();
  m.kind = is_hnsw() ? "hnsw" : "flat";
  if (auto s = write_manifest(dir, m, extra_files); !s) return s;
  saved_ = SavedState{std::move(m)};
  appended_.clear();
  return {};
}

Status VectorIndex::write_manifest(const fs::path& dir, const IndexManifest& man,
                                   const std::vector<Extra>& extra_files) {
  nlohmann::json m = {{"format", man.format},
                      {"embedder", man.embedder},
                      {"generation", man.generation},
                      {"count", man.count},
                      {"vectors", man.vectors},
                      {"dimension", man.dimension},
                      {"kind", man.kind},
                      {"vectors_file", man.vectors_file},
                      {"ids_file", man.ids_file},
                      {"vectors_checksum", man.vectors_checksum},
                      {"ids_checksum", man.ids_checksum},
                      {"files", nlohmann::json::object()}};
  if (!man.graph_file.empty()) {
    m["graph_file"] = man.graph_file;
    m["graph_checksum"] = man.graph_checksum;
  }
  if (!man.segments.empty()) {
    m["base_count"] = man.base_count;
    m["base_vectors"] = man.base_vectors;
    m["segments"] = nlohmann::json::array();
    for (const auto& sg : man.segments)
      m["segments"].push_back(
          {{"file", sg.file}, {"checksum", sg.checksum}, {"count", sg.count}, {"vectors", sg.vectors}});
  }
  for (const auto& e : extra_files) {
    auto sum = file_checksum(dir / e.file);
    TRY(sum);
    m["files"][e.name] = {{"file", e.file}, {"checksum", *sum}};
  }
  auto old = read_manifest(dir);
  if (auto s = write_file_atomic(dir / kManifest, json_text(m, 2) + "\n"); !s) return s;
  // The replaced state's files go, and files of states that crashed before their manifest (an hour old or more; an
  // index of an earlier format, whose files its manifest's reading does not name, among them).
  std::set<std::string> keep = man.data_files();
  keep.insert({kManifest, "save.lock", kVerifiedList});
  for (const auto& e : extra_files) keep.insert(e.file);
  std::set<std::string> previous;
  if (old) previous = old->files();
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (keep.contains(name) || !entry.is_regular_file(ec)) continue;
    const auto age = now - entry.last_write_time(ec);
    if (previous.contains(name) || (!ec && age > std::chrono::hours(1))) fs::remove(entry.path(), ec);
  }
  return {};
}

Result<IndexManifest> VectorIndex::read_manifest(const fs::path& dir) {
  const fs::path man = dir / kManifest;
  auto text = read_file(man);
  TRY(text);
  try {
    const auto m = nlohmann::json::parse(*text);
    IndexManifest out;
    out.format = m.at("format").get<int>();
    if (out.format < 1 || out.format > kFormat)
      return fail(man.string() + ": index format " + std::to_string(out.format) + " is not understood by this spark");
    // What the manifests of every format say: an index an earlier spark wrote is known by them (the embedder that
    // made it decides the one that makes it again), and no more of it is read: load() refuses it.
    out.embedder = m.at("embedder").get<std::string>();
    out.generation = m.at("generation").get<int64_t>();
    out.count = m.at("count").get<size_t>();
    out.dimension = m.at("dimension").get<size_t>();
    out.kind = m.at("kind").get<std::string>();
    if (out.format < kFormat) return out;
    const auto outside = [&man] { return fail(man.string() + ": names a file outside the index folder"); };
    out.vectors = m.at("vectors").get<size_t>();
    out.vectors_file = m.at("vectors_file").get<std::string>();
    out.ids_file = m.at("ids_file").get<std::string>();
    if (out.kind == "hnsw") {
      out.graph_file = m.at("graph_file").get<std::string>();
      out.graph_checksum = m.at("graph_checksum").get<std::string>();
      if (!safe_name(out.graph_file)) return outside();
    }
    for (const auto* f : {&out.vectors_file, &out.ids_file})
      if (!safe_name(*f)) return outside();
    out.base_count = m.value("base_count", out.count);
    out.base_vectors = m.value("base_vectors", out.vectors);
    if (m.contains("segments"))
      for (const auto& sg : m.at("segments")) {
        IndexManifest::Segment seg{sg.at("file").get<std::string>(), sg.at("checksum").get<std::string>(),
                                   sg.at("count").get<size_t>(), sg.at("vectors").get<size_t>()};
        if (!safe_name(seg.file)) return outside();
        out.segments.push_back(std::move(seg));
      }
    size_t total = out.base_count, distinct = out.base_vectors;
    for (const auto& sg : out.segments) {
      total += sg.count;
      distinct += sg.vectors;
    }
    if (total != out.count || distinct != out.vectors)
      return fail(man.string() + ": damaged manifest (its base and segments hold " + std::to_string(total) +
                  " cases and " + std::to_string(distinct) + " vectors, it says " + std::to_string(out.count) +
                  " and " + std::to_string(out.vectors) + ")");
    out.vectors_checksum = m.at("vectors_checksum").get<std::string>();
    out.ids_checksum = m.at("ids_checksum").get<std::string>();
    if (m.contains("files"))
      for (const auto& [name, value] : m.at("files").items()) {
        IndexManifest::Extra e{name, value.at("file").get<std::string>(), value.at("checksum").get<std::string>()};
        if (!safe_name(e.file)) return outside();
        out.extra_files.push_back(std::move(e));
      }
    return out;
  } catch (const nlohmann::json::exception& e) {
    return fail(man.string() + ": damaged manifest (" + e.what() + ")");
  }
}

// load()'s steps over one saved state, in the order its checks run: each file mapped, verified against the manifest
// (FileVerifier) and its header and size checked before anything of it is used.
class VectorIndex::Loader {
 public:
  Loader(const fs::path& dir, const IndexManifest& manifest, const VectorIndexOptions& options)
      : dir_(dir),
        m_(manifest),
        options_(options),
        verifier_(dir, options.trust_verified_files, options.verified_min_age_ms) {}

  Result<VectorIndex> run() {
    TRY(start_graph_check());
    TRY(verify_extras());
    TRY(map_ids());
    VectorIndex index(m_.dimension, options_);
    auto read = read_base();
    TRY(read);
    index.index_ = std::move(*read);
    if (static_cast<size_t>(index.index_->ntotal) != m_.base_vectors ||
        static_cast<size_t>(index.index_->d) != m_.dimension)
      return fail((dir_ / m_.vectors_file).string() + ": does not match manifest.json (count or dimension)");
    auto segments = check_segments();
    TRY(segments);
    auto base_entries = ids_entries();
    TRY(base_entries);
    index.hashed_ = false;  // the duplicate lookup is built by the first add
    if (auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index.index_.get())) h->hnsw.efSearch = options_.ef_search;
    auto cases = segment_cases(index, *segments);
    TRY(cases);
    const size_t held = base_entries->size() + cases->size();
    if (held != m_.count || positions_ != m_.vectors)
      return fail((dir_ / kManifest).string() + ": its files hold " + std::to_string(held) + " cases, it says " +
                  std::to_string(m_.count) + "; run `spark index --rebuild`");
    if (auto s =
            index.table_.load(*base_entries, base_entries->empty() ? nullptr : id_map_, std::move(*cases), positions_);
        !s)
      return fail((dir_ / m_.ids_file).string() + (m_.segments.empty() ? "" : " and its segments") + ": damaged (" +
                  s.error().message + ")");
    index.appended_.clear();
    index.saved_ = SavedState{m_};
    index.verified_extras_ = std::move(extras_);
    index.files_hashed_at_load_ = verifier_.files_hashed();
    verifier_.update_list(m_.files());
    return index;
  }

 private:
  // A segment file mapped, verified and its header checked.
  struct CheckedSegment {
    std::shared_ptr<const MappedFile> map;
    size_t cases = 0, fresh = 0;
  };

  // The HNSW graph (~20 MB at 10^5 cases) is checksummed on a second thread while this one checks the other files
  // (~10 MB there); FAISS reads it once both are done (its allocations then come from the main heap, which may be on
  // huge pages: src/base/huge_pages.h). The future's destructor waits on every early return.
  Status start_graph_check() {
    if (m_.kind != "hnsw") return {};
    auto map = MappedFile::open(dir_ / m_.graph_file);
    TRY(map);
    graph_map_ = std::move(*map);
    if (verifier_.vouched(m_.graph_file, m_.graph_checksum, *graph_map_)) return {};
    const auto sum = [this] { return checksum_of(graph_map_->view()); };
    try {
      graph_sum_ = std::async(std::launch::async, sum);
    } catch (const std::system_error&) {  // no thread to be had: the checksum runs when it is asked for
      graph_sum_ = std::async(std::launch::deferred, sum);
    }
    return {};
  }

  // The extra files: verified through mappings that are kept for their users (take_verified_extra).
  Status verify_extras() {
    for (const auto& e : m_.extra_files) {
      auto map = MappedFile::open(dir_ / e.file);
      TRY(map);
      if (!verifier_.verify(e.file, e.checksum, **map)) return checksum_mismatch(dir_ / e.file);
      extras_.emplace_back(e.name, std::move(*map));
    }
    return {};
  }

  // The ids file, mapped once: checked, then used.
  Status map_ids() {
    const fs::path ids = dir_ / m_.ids_file;
    auto map = MappedFile::open(ids);
    TRY(map);
    id_map_ = std::move(*map);
    if (!verifier_.verify(m_.ids_file, m_.ids_checksum, *id_map_)) return checksum_mismatch(ids);
    if (id_map_->size() != m_.base_count * sizeof(CaseTable::Entry))
      return fail(ids.string() + ": holds " + std::to_string(id_map_->size() / sizeof(CaseTable::Entry)) +
                  " ids, manifest says " + std::to_string(m_.base_count));
    return {};
  }

  // The vectors are mapped, not read: their size and header are checked here, their whole checksum only when the
  // options ask (`spark index` and every index update do; a query does not pay a read of every page). An HNSW
  // graph's storage is the mapped vectors.
  Result<std::unique_ptr<faiss::Index>> read_base() {
    const fs::path vec = dir_ / m_.vectors_file;
    auto map = MappedFile::open(vec);
    TRY(map);
    const size_t body = m_.base_vectors * m_.dimension * sizeof(float);
    uint64_t dc[2] = {0, 0};
    if ((*map)->size() >= kVectorsHeader) std::memcpy(dc, (*map)->data() + sizeof kVectorsMagic, sizeof dc);
    if ((*map)->size() != kVectorsHeader + body ||
        std::memcmp((*map)->data(), kVectorsMagic, sizeof kVectorsMagic) != 0 || dc[0] != m_.dimension ||
        dc[1] != m_.base_vectors)
      return fail(vec.string() +
                  ": size or header does not match manifest.json (truncated or damaged); run `spark index --rebuild`");
    if (options_.verify_vectors && !verifier_.verify(m_.vectors_file, m_.vectors_checksum, **map))
      return fail(vec.string() + ": checksum mismatch with manifest.json (damaged); run `spark index --rebuild`");
    auto flat = std::make_unique<FastFlatIP>(static_cast<idx_t>(m_.dimension));
    flat->use_mapped(std::move(*map), kVectorsHeader, static_cast<idx_t>(m_.base_vectors));
    if (m_.kind != "hnsw") return std::unique_ptr<faiss::Index>(std::move(flat));
    const fs::path graph = dir_ / m_.graph_file;
    // A damaged graph never reaches FAISS (its reader leaks what it was reading when it throws, faiss 1.7.3).
    if (graph_sum_.valid() && !verifier_.hashed(m_.graph_file, m_.graph_checksum, *graph_map_, graph_sum_.get()))
      return checksum_mismatch(graph);
    auto read = read_verified_faiss(graph, *graph_map_);
    TRY(read);
    auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(read->get());
    if (!h || h->metric_type != faiss::METRIC_INNER_PRODUCT || h->storage == nullptr || h->storage->ntotal != 0)
      return fail(graph.string() + ": not an HNSW graph of this index");
    if (h->own_fields) delete h->storage;
    h->storage = flat.release();
    h->own_fields = true;
    return read;
  }

  // The segments: each mapped, verified and its header checked before any case is taken, so the table's entries
  // are sized once, for the counts the files were found to hold. (A reallocation as the segments' cases came would
  // fill twice the entries' memory, and fresh memory, a page fault for each page, is what a new process pays most
  // for.)
  Result<std::vector<CheckedSegment>> check_segments() {
    std::vector<CheckedSegment> segments;
    for (const auto& sg : m_.segments) {
      const fs::path path = dir_ / sg.file;
      auto map = MappedFile::open(path);
      TRY(map);
      const std::string_view segment = (*map)->view();
      if (!verifier_.verify(sg.file, sg.checksum, **map)) return checksum_mismatch(path);
      uint64_t header[3] = {0, 0, 0};
      if (segment.size() >= kSegmentHeader) std::memcpy(header, segment.data() + sizeof kSegmentMagic, sizeof header);
      const size_t n = static_cast<size_t>(header[1]), fresh = static_cast<size_t>(header[2]);
      if (segment.size() < kSegmentHeader || std::memcmp(segment.data(), kSegmentMagic, sizeof kSegmentMagic) != 0 ||
          header[0] != m_.dimension || n != sg.count || fresh != sg.vectors ||
          segment.size() != kSegmentHeader + n * sizeof(CaseTable::Entry) + fresh * m_.dimension * sizeof(float))
        return fail(path.string() +
                    ": not a segment of this index (header, dimension or size); run `spark index --rebuild`");
      segments.push_back({std::move(*map), n, fresh});
      segment_cases_ += n;
    }
    return segments;
  }

  // The ids file's cases where they lie in its mapping (its (rowid, position, group) int64 triples are the table's
  // entries as they are: a new process copies none of them into fresh memory).
  Result<std::span<const CaseTable::Entry>> ids_entries() const {
    static_assert(sizeof(CaseTable::Entry) == 3 * sizeof(int64_t));
    // Any bytes are valid values of the aggregate of three int64 (a mapping is page-aligned).
    const std::span<const CaseTable::Entry> entries = {reinterpret_cast<const CaseTable::Entry*>(id_map_->data()),
                                                       m_.base_count};
    for (const auto& e : entries)
      if (e.position < 0 || static_cast<size_t>(e.position) >= m_.base_vectors)
        return fail((dir_ / m_.ids_file).string() + ": damaged (a case at an invalid position)");
    return entries;
  }

  // The segments' cases at the positions they had, their new vectors into the index's exact tail. No hashing, no
  // graph insertion: a cold start with segments costs their bytes.
  Result<std::vector<CaseTable::Entry>> segment_cases(VectorIndex& index, const std::vector<CheckedSegment>& segments) {
    std::vector<CaseTable::Entry> entries;
    entries.reserve(segment_cases_);
    positions_ = m_.base_vectors;
    for (size_t s = 0; s < segments.size(); ++s) {
      const CheckedSegment& sg = segments[s];
      const char* p = sg.map->data() + kSegmentHeader;
      const char* vectors = p + sg.cases * sizeof(CaseTable::Entry);
      if (sg.fresh > 0) {
        if (!index.tail_) {
          // The first segment's new vectors are searched where they lie in its mapping (their rows start at a
          // multiple of 8 bytes; inner_product() loads them unaligned), not copied into fresh memory; a later
          // segment's are added to them, which copies both (FastFlatIP::add).
          auto tail = std::make_unique<FastFlatIP>(static_cast<idx_t>(m_.dimension));
          tail->use_mapped(sg.map, static_cast<size_t>(vectors - sg.map->data()), static_cast<idx_t>(sg.fresh));
          index.tail_ = std::move(tail);
        } else {
          index.tail_->add(static_cast<idx_t>(sg.fresh), reinterpret_cast<const float*>(vectors));
        }
        positions_ += sg.fresh;
      }
      for (size_t i = 0; i < sg.cases; ++i, p += sizeof(CaseTable::Entry)) {
        int64_t t[3];
        std::memcpy(t, p, sizeof t);
        if (t[1] < 0 || static_cast<size_t>(t[1]) >= positions_)
          return fail((dir_ / m_.segments[s].file).string() + ": damaged (a case at an invalid position)");
        entries.push_back({t[0], t[1], t[2]});
      }
    }
    return entries;
  }

  const fs::path& dir_;
  const IndexManifest& m_;
  const VectorIndexOptions& options_;
  FileVerifier verifier_;
  std::shared_ptr<const MappedFile> graph_map_;
  std::future<std::string> graph_sum_;  // after graph_map_: destroyed (waited for) first
  std::vector<std::pair<std::string, std::shared_ptr<const MappedFile>>> extras_;
  std::shared_ptr<const MappedFile> id_map_;
  size_t segment_cases_ = 0;  // the cases the checked segments hold
  size_t positions_ = 0;      // distinct vectors: the base's, then each segment's new ones
};

Result<std::pair<VectorIndex, IndexManifest>> VectorIndex::load(const fs::path& dir, VectorIndexOptions options) {
  auto manifest = read_manifest(dir);
  TRY(manifest);
  // The index is a cache of the knowledge base: one format is read, and one of an earlier spark is built again (the
  // commands that open an index do so by themselves when this error comes back; IndexManifest::kFormat).
  if (manifest->format != kFormat)
    return fail((dir / kManifest).string() + ": index format " + std::to_string(manifest->format) +
                " was written by an earlier spark (this one reads format " + std::to_string(kFormat) +
                "): run `spark index --rebuild`");
  Loader loader(dir, *manifest, options);
  auto index = loader.run();
  TRY(index);
  return std::pair<VectorIndex, IndexManifest>{std::move(*index), std::move(*manifest)};
}

}  // namespace spark
