#include "retrieval/vector_index.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/utils/distances.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/mapped_file.h"
#include "base/text.h"
#include "formats/case.h"

namespace spark {

namespace fs = std::filesystem;
using idx_t = faiss::Index::idx_t;

namespace {

// What a whole save writes: format 6 (format 5's four-lane checksums, the vectors' rows from a page boundary on).
constexpr int kSaveFormat = 6;
constexpr Checksum kSaveChecksum = Checksum::lanes;

// The checksums of the index's files, over a stream of bytes fed in pieces of any size.
//  - serial (formats 1–4): one chain over 64-bit words within blocks of 1 MiB (as file_checksum read them), each
//    block's tail bytewise, the length folded in at the end. Each word waits for the previous one's multiply.
//  - lanes (format 5 on): four chains over the 32-byte strides of the whole stream (word i of a stride into chain i),
//    the last < 32 bytes bytewise into chain 0, then the chains folded together and the length folded in. The four
//    chains run side by side: about four times the speed, which a new `spark localize` process pays on the ~30 MB
//    it verifies at 100k cases.
class StreamChecksum {
 public:
  explicit StreamChecksum(Checksum kind) : kind_(kind) {}
  void update(const char* p, size_t n) {
    if (kind_ == Checksum::lanes) {
      update_lanes(p, n);
      return;
    }
    // Whole blocks straight from the caller's bytes; a partial one through block_.
    while (block_.empty() && n >= kBlock) {
      hash_block(p, kBlock);
      p += kBlock;
      n -= kBlock;
    }
    while (n > 0) {
      const size_t take = std::min(n, kBlock - block_.size());
      block_.append(p, take);
      p += take;
      n -= take;
      if (block_.size() == kBlock) flush();
    }
  }
  std::string finish() {
    if (kind_ == Checksum::lanes) {
      uint64_t h = lane_[0];
      for (char c : block_) h = (h ^ static_cast<unsigned char>(c)) * kPrime;
      for (int i = 1; i < 4; ++i) {
        h = (h ^ lane_[i]) * kPrime;
        h ^= h >> 29;
      }
      return hex64(h ^ total_);
    }
    flush();
    return hex64(h_ ^ total_);
  }

 private:
  static constexpr size_t kBlock = 1 << 20;
  static constexpr size_t kStride = 32;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  void flush() {
    hash_block(block_.data(), block_.size());
    block_.clear();
  }
  void hash_block(const char* p, size_t n) {
    total_ += n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h_ = (h_ ^ w) * kPrime;
      h_ ^= h_ >> 29;
    }
    for (; i < n; ++i) h_ = (h_ ^ static_cast<unsigned char>(p[i])) * kPrime;
  }
  void update_lanes(const char* p, size_t n) {
    total_ += n;
    if (!block_.empty()) {  // a partial stride from the last call
      const size_t take = std::min(n, kStride - block_.size());
      block_.append(p, take);
      p += take;
      n -= take;
      if (block_.size() < kStride) return;
      strides(block_.data(), 1);
      block_.clear();
    }
    strides(p, n / kStride);
    block_.append(p + n / kStride * kStride, n % kStride);
  }
  void strides(const char* p, size_t count) {
    uint64_t a = lane_[0], b = lane_[1], c = lane_[2], d = lane_[3];
    for (size_t i = 0; i < count; ++i, p += kStride) {
      uint64_t w[4];
      std::memcpy(w, p, sizeof w);
      a = (a ^ w[0]) * kPrime;
      b = (b ^ w[1]) * kPrime;
      c = (c ^ w[2]) * kPrime;
      d = (d ^ w[3]) * kPrime;
      a ^= a >> 29;
      b ^= b >> 29;
      c ^= c >> 29;
      d ^= d >> 29;
    }
    lane_[0] = a;
    lane_[1] = b;
    lane_[2] = c;
    lane_[3] = d;
  }
  Checksum kind_;
  std::string block_;
  uint64_t h_ = 0xcbf29ce484222325ULL;
  uint64_t lane_[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL};
  uint64_t total_ = 0;
};

// A FAISS writer that checksums the bytes as they pass: the vectors file is written once.
struct ChecksumWriter final : faiss::IOWriter {
  explicit ChecksumWriter(Checksum kind) : sum(kind) {}
  FILE* f = nullptr;
  StreamChecksum sum;
  size_t operator()(const void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return nitems;  // an empty vector (the graph's storage): its data() may be null
    const size_t put = std::fwrite(ptr, size, nitems, f);
    sum.update(static_cast<const char*>(ptr), put * size);
    return put;
  }
};

// Writes a new file at `path` through `write` (into a ChecksumWriter), flushed to disk under a temporary name and then
// renamed into place; its checksum. A failed write leaves no file.
Result<std::string> write_checksummed(const fs::path& path, Checksum kind,
                                      const std::function<void(ChecksumWriter&)>& write) {
  const fs::path tmp = path.string() + ".tmp";
  ChecksumWriter writer(kind);
  writer.name = tmp.string();
  writer.f = std::fopen(tmp.c_str(), "wb");
  if (!writer.f) return fail(tmp.string() + ": cannot create: " + std::strerror(errno));
  bool written = true;
  std::string why;
  try {
    write(writer);
  } catch (const faiss::FaissException& e) {
    written = false;
    why = e.what();
  }
  written = std::fflush(writer.f) == 0 && ::fsync(::fileno(writer.f)) == 0 && !std::ferror(writer.f) && written;
  if (std::fclose(writer.f) != 0) written = false;
  std::error_code ec;
  if (!written) {
    fs::remove(tmp, ec);
    return fail(tmp.string() + ": cannot write" + (why.empty() ? " (disk full?)" : ": " + why));
  }
  fs::rename(tmp, path, ec);
  if (ec) return fail(path.string() + ": " + ec.message());
  return writer.sum.finish();
}

// A FAISS reader over bytes in memory (a mapped file): reads are copies out of the page cache, with no read() calls.
struct BytesReader final : faiss::IOReader {
  std::string_view bytes;
  size_t at = 0;
  size_t operator()(void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return 0;
    const size_t items = std::min(nitems, (bytes.size() - at) / size);
    if (items > 0) std::memcpy(ptr, bytes.data() + at, items * size);
    at += items * size;
    return items;
  }
};

// The error of an index file whose bytes do not match the checksum its manifest gives.
std::unexpected<Error> checksum_mismatch(const fs::path& path) {
  return fail(path.string() +
              ": checksum mismatch with manifest.json (truncated or damaged); run `spark index --rebuild`");
}

// The index folder's list of the files a load verified (VectorIndexOptions::trust_verified_files): a first line
// "spark verified files 1", then a line per file: its name, its checksum, and its identity when it was verified
// (device, inode, size, mtime and ctime in ns). A cache, not a record: a missing or damaged list vouches for nothing.
constexpr const char* kVerifiedList = "verified";
constexpr std::string_view kVerifiedHeader = "spark verified files 1";
struct VerifiedFile {
  std::string checksum;
  MappedFile::Identity identity;
};
using VerifiedFiles = std::map<std::string, VerifiedFile>;

VerifiedFiles read_verified_list(const fs::path& dir) {
  auto text = read_file(dir / kVerifiedList);
  if (!text) return {};
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != kVerifiedHeader) return {};
  VerifiedFiles out;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string name, rest;
    VerifiedFile v;
    MappedFile::Identity& id = v.identity;
    if (!(f >> name >> v.checksum >> id.device >> id.inode >> id.size >> id.mtime_ns >> id.ctime_ns) || f >> rest)
      return {};
    out[name] = v;
  }
  return out;
}

// Written whole and renamed into place; a folder spark may not write keeps no list (every load then hashes).
void write_verified_list(const fs::path& dir, const VerifiedFiles& files) {
  std::string text(kVerifiedHeader);
  text += '\n';
  for (const auto& [name, v] : files) {
    const MappedFile::Identity& id = v.identity;
    text += name + ' ' + v.checksum + ' ' + std::to_string(id.device) + ' ' + std::to_string(id.inode) + ' ' +
            std::to_string(id.size) + ' ' + std::to_string(id.mtime_ns) + ' ' + std::to_string(id.ctime_ns) + '\n';
  }
  (void)write_file_atomic(dir / kVerifiedList, text);
}

// One load's verification of its files against the manifest: each file's checksum is computed, unless the folder's
// verified list vouches for it (when trusted); what was verified is listed for the next load.
class FileVerifier {
 public:
  FileVerifier(const fs::path& dir, const VectorIndexOptions& options, Checksum kind)
      : dir_(dir), kind_(kind), trust_(options.trust_verified_files), known_(read_verified_list(dir)) {
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    listable_before_ns_ = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec -
                          static_cast<int64_t>(options.verified_min_age_ms) * 1'000'000;
  }
  // True when the list vouches for `file` as it is mapped (and trust was asked for).
  bool vouched(const std::string& file, const std::string& checksum, const MappedFile& map) {
    if (!trust_) return false;
    const auto it = known_.find(file);
    if (it == known_.end() || it->second.checksum != checksum || !(it->second.identity == map.identity())) return false;
    seen_[file] = it->second;
    return true;
  }
  // The checksum `sum` computed over the mapping against the manifest's `checksum`.
  bool hashed(const std::string& file, const std::string& checksum, const MappedFile& map, const std::string& sum) {
    ++hashed_;
    if (sum != checksum) return false;
    const MappedFile::Identity& id = map.identity();
    if (std::max(id.mtime_ns, id.ctime_ns) <= listable_before_ns_) {
      seen_[file] = {checksum, id};
      listed_new_ = true;
    }
    return true;
  }
  bool verify(const std::string& file, const std::string& checksum, const MappedFile& map) {
    return vouched(file, checksum, map) || hashed(file, checksum, map, checksum_of(map.view(), kind_));
  }
  size_t files_hashed() const { return hashed_; }
  // After a load that verified everything: the list written again when this load verified a file it did not hold,
  // keeping what it held of the manifest's other files (a query does not verify the vectors file).
  void update_list(const IndexManifest& m) {
    if (!listed_new_) return;
    std::set<std::string> current = {m.vectors_file, m.ids_file};
    if (!m.graph_file.empty()) current.insert(m.graph_file);
    for (const auto& sg : m.segments) current.insert(sg.file);
    for (const auto& e : m.extra_files) current.insert(e.file);
    VerifiedFiles out = seen_;
    for (const auto& [name, v] : known_)
      if (current.contains(name)) out.emplace(name, v);
    write_verified_list(dir_, out);
  }

 private:
  fs::path dir_;
  Checksum kind_;
  bool trust_;
  VerifiedFiles known_, seen_;
  int64_t listable_before_ns_ = 0;
  size_t hashed_ = 0;
  bool listed_new_ = false;
};

// Reads a faiss index file from its mapping, whose checksum the caller has verified (faiss 1.7.3's reader leaks what
// it was reading when it throws on damaged bytes): the bytes the checksum read are the bytes FAISS reads.
Result<std::unique_ptr<faiss::Index>> read_verified_faiss(const fs::path& path, const MappedFile& map) {
  BytesReader reader;
  reader.name = path.string();
  reader.bytes = map.view();
  try {
    return std::unique_ptr<faiss::Index>(faiss::read_index(&reader));
  } catch (const faiss::FaissException& e) {
    return fail(path.string() + ": cannot read the index: " + e.what());
  }
}

// Maps a faiss index file, verifies its checksum and reads it.
Result<std::unique_ptr<faiss::Index>> read_faiss(const fs::path& path, const std::string& checksum, Checksum kind) {
  auto map = MappedFile::open(path);
  if (!map) return std::unexpected(map.error());
  if (checksum_of((*map)->view(), kind) != checksum) return checksum_mismatch(path);
  return read_verified_faiss(path, **map);
}

}  // namespace

Checksum checksum_for_format(int format) { return format >= 5 ? Checksum::lanes : Checksum::serial; }

Result<std::string> file_checksum(const fs::path& path, Checksum kind) {
  // Through a mapping: the page cache's pages are hashed where they are, with no copy into a buffer.
  auto map = MappedFile::open(path);
  if (!map) return std::unexpected(map.error());
  return checksum_of((*map)->view(), kind);
}

std::string checksum_of(std::string_view bytes, Checksum kind) {
  StreamChecksum sum(kind);
  sum.update(bytes.data(), bytes.size());
  return sum.finish();
}

namespace {

uint64_t vector_hash(const float* v, size_t dim) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const auto* p = reinterpret_cast<const unsigned char*>(v);
  for (size_t i = 0; i + 8 <= dim * sizeof(float); i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  return h;
}

float dot(const float* x, const float* y, size_t d) { return inner_product(x, y, d); }

// A similarity that sorts: NaN or infinity (a damaged vectors file, whose whole checksum a query does not read) ranks
// last instead of breaking the ordering of a sort.
float finite_or_lowest(float v) { return std::isfinite(v) ? v : -std::numeric_limits<float>::max(); }

}  // namespace

float inner_product(const float* x, const float* y, size_t d) {
  using v4 = float __attribute__((vector_size(16)));
  v4 a0 = {0, 0, 0, 0}, a1 = a0;
  size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    v4 x0, x1, y0, y1;
    std::memcpy(&x0, x + i, 16);
    std::memcpy(&x1, x + i + 4, 16);
    std::memcpy(&y0, y + i, 16);
    std::memcpy(&y1, y + i + 4, 16);
    a0 += x0 * y0;
    a1 += x1 * y1;
  }
  const v4 a = a0 + a1;
  float sum = (a[0] + a[1]) + (a[2] + a[3]);
  for (; i < d; ++i) sum += x[i] * y[i];
  return sum;
}

namespace {

// The raw vectors file of index formats 4 on: "SPKVEC01", dimension and count (u64 each), zeros to the header's end,
// then the rows (float32, row-major). The header is 64 bytes in formats 4 and 5 and one page (4,096 bytes) from
// format 6 on, so that a row of 1,024 floats (the built-in embedder's) is one page of the mapping, not the end of one
// and the start of the next: a query's graph walk touches half the pages (each page a new process touches costs it a
// fault; docs/PERFORMANCE.md).
constexpr char kVectorsMagic[8] = {'S', 'P', 'K', 'V', 'E', 'C', '0', '1'};
constexpr size_t vectors_header(int format) { return format >= 6 ? 4096 : 64; }

// Flat inner-product storage whose distances (the HNSW graph's, as it is built and searched) and exact searches use
// dot() above. Its rows are its own (faiss's `codes`) or, loaded from a format-4 index, a read-only map of the vectors
// file; the first add copies mapped rows into `codes`. Every faiss path spark calls reads rows through rows().
struct FastFlatIP final : faiss::IndexFlatIP {
  explicit FastFlatIP(idx_t dimension) : faiss::IndexFlatIP(dimension) {}

  std::shared_ptr<const MappedFile> map;
  const uint8_t* mapped = nullptr;  // the first row inside `map`
  const uint8_t* rows() const { return mapped ? mapped : codes.data(); }
  const float* xb() const { return reinterpret_cast<const float*>(rows()); }
  void use_mapped(std::shared_ptr<const MappedFile> file, size_t offset, idx_t count) {
    codes.clear();
    codes.shrink_to_fit();
    map = std::move(file);
    mapped = reinterpret_cast<const uint8_t*>(map->data()) + offset;
    ntotal = count;
  }
  void materialize() {
    if (!mapped) return;
    codes.assign(mapped, mapped + static_cast<size_t>(ntotal) * code_size);
    mapped = nullptr;
    map.reset();
  }
  void add(idx_t n, const float* x) override {
    materialize();
    faiss::IndexFlatIP::add(n, x);
  }
  void reset() override {
    mapped = nullptr;
    map.reset();
    faiss::IndexFlatIP::reset();
  }
  void reconstruct(idx_t key, float* recons) const override {
    std::memcpy(recons, rows() + static_cast<size_t>(key) * code_size, code_size);
  }

  struct Distance final : faiss::FlatCodesDistanceComputer {
    const float* query = nullptr;
    size_t dim;
    Distance(const uint8_t* stored, size_t bytes, size_t dimension)
        : faiss::FlatCodesDistanceComputer(stored, bytes), dim(dimension) {}
    void set_query(const float* x) override { query = x; }
    float distance_to_code(const uint8_t* code) override {
      return dot(query, reinterpret_cast<const float*>(code), dim);
    }
    float symmetric_dis(idx_t i, idx_t j) override {
      return dot(reinterpret_cast<const float*>(codes + i * code_size),
                 reinterpret_cast<const float*>(codes + j * code_size), dim);
    }
  };
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override {
    return new Distance(rows(), code_size, static_cast<size_t>(d));
  }

  // Exact top-k by inner product, one query at a time, honouring the selector; equal similarities by position.
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override {
    const faiss::IDSelector* sel = params ? params->sel : nullptr;
    const float* base = xb();
    const size_t dim = static_cast<size_t>(d);
    std::vector<std::pair<float, idx_t>> best;
    const auto worse = [](const std::pair<float, idx_t>& a, const std::pair<float, idx_t>& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    };
    for (idx_t q = 0; q < n; ++q) {
      best.clear();
      const float* query = x + static_cast<size_t>(q) * dim;
      for (idx_t i = 0; i < ntotal; ++i) {
        if (sel && !sel->is_member(i)) continue;
        const std::pair<float, idx_t> cand{finite_or_lowest(dot(query, base + static_cast<size_t>(i) * dim, dim)), i};
        if (static_cast<idx_t>(best.size()) < k) {
          best.push_back(cand);
          std::push_heap(best.begin(), best.end(), worse);
        } else if (k > 0 && worse(cand, best.front())) {
          std::pop_heap(best.begin(), best.end(), worse);
          best.back() = cand;
          std::push_heap(best.begin(), best.end(), worse);
        }
      }
      std::sort_heap(best.begin(), best.end(), worse);
      for (idx_t j = 0; j < k; ++j) {
        const bool has = j < static_cast<idx_t>(best.size());
        distances[q * k + j] = has ? best[static_cast<size_t>(j)].first : -std::numeric_limits<float>::max();
        labels[q * k + j] = has ? best[static_cast<size_t>(j)].second : -1;
      }
    }
  }
};

// The same vectors, in the fast storage (the codes move; no copy).
std::unique_ptr<FastFlatIP> fast_copy_of(faiss::IndexFlat& flat) {
  auto fast = std::make_unique<FastFlatIP>(flat.d);
  fast->codes.swap(flat.codes);
  fast->ntotal = flat.ntotal;
  flat.ntotal = 0;
  return fast;
}

std::unique_ptr<faiss::IndexHNSWFlat> new_hnsw(size_t dimension, int m) {
  auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<idx_t>(dimension), m, faiss::METRIC_INNER_PRODUCT);
  delete hnsw->storage;
  hnsw->storage = new FastFlatIP(static_cast<idx_t>(dimension));
  return hnsw;
}

// The index's flat storage, the HNSW graph's or the flat index itself; null when it is not spark's FastFlatIP.
const FastFlatIP* fast_storage_of(const faiss::Index& index) {
  if (const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(&index))
    return dynamic_cast<const FastFlatIP*>(hnsw->storage);
  return dynamic_cast<const FastFlatIP*>(&index);
}
// The same, for an index made or loaded by VectorIndex (always a FastFlatIP: load refuses any other).
const FastFlatIP& flat_of(const faiss::Index& index) { return *fast_storage_of(index); }

}  // namespace

VectorIndex::VectorIndex(size_t dimension, VectorIndexOptions options)
    : dimension_(dimension), options_(options), index_(std::make_unique<FastFlatIP>(static_cast<idx_t>(dimension))) {}
VectorIndex::~VectorIndex() = default;
VectorIndex::VectorIndex(VectorIndex&&) noexcept = default;
VectorIndex& VectorIndex::operator=(VectorIndex&&) noexcept = default;

// ---------------------------------------------------------------------------------------------------------------
// CaseTable

Status VectorIndex::CaseTable::load(std::span<const Entry> mapped, std::shared_ptr<const MappedFile> file,
                                    std::vector<Entry> more, size_t positions) {
  const size_t n = mapped.size() + more.size();
  if (n >= std::numeric_limits<uint32_t>::max()) return fail("more cases than an index holds");
  *this = CaseTable();
  frozen_ = true;
  entries_.mapped = mapped;
  entries_.file = std::move(file);
  entries_.more = std::move(more);
  // Members by position: a counting sort that keeps the order the cases were added.
  member_start_.assign(positions + 1, 0);
  Status bad;
  entries_.for_each([&](const Entry& e) {
    if (e.position < 0 || static_cast<size_t>(e.position) >= positions) {
      if (bad) bad = fail("a case at an invalid position (" + std::to_string(e.position) + ")");
      return;
    }
    ++member_start_[static_cast<size_t>(e.position) + 1];
  });
  if (!bad) return bad;
  for (size_t p = 0; p < positions; ++p) member_start_[p + 1] += member_start_[p];
  member_rowids_.resize(n);
  {
    std::vector<uint32_t> next(member_start_.begin(), member_start_.end() - 1);
    entries_.for_each([&](const Entry& e) { member_rowids_[next[static_cast<size_t>(e.position)]++] = e.rowid; });
  }
  {
    // (group, position) pairs, sorted, each once. The ids file is written in this order: the pairs of its sorted
    // prefix are read where they lie, the rest (the segments' cases added since) copied, sorted and merged in.
    const auto pair_at = [&](size_t i) { return std::pair{entries_[i].group, entries_[i].position}; };
    size_t in_order = std::min<size_t>(1, n);
    while (in_order < n && !(pair_at(in_order) < pair_at(in_order - 1))) ++in_order;
    std::vector<std::pair<int64_t, int64_t>> rest;
    rest.reserve(n - in_order);
    for (size_t i = in_order; i < n; ++i) rest.push_back(pair_at(i));
    std::sort(rest.begin(), rest.end());
    group_keys_.reserve(n);  // room for every case; the part no pair fills is never written, so never faulted in
    group_positions_of_.reserve(n);
    const auto put = [&](const std::pair<int64_t, int64_t>& gp) {
      if (!group_keys_.empty() && group_keys_.back() == gp.first && group_positions_of_.back() == gp.second) return;
      group_keys_.push_back(gp.first);
      group_positions_of_.push_back(gp.second);
    };
    size_t i = 0, j = 0;
    while (i < in_order || j < rest.size()) {
      if (j == rest.size() || (i < in_order && !(rest[j] < pair_at(i))))
        put(pair_at(i++));
      else
        put(rest[j++]);
    }
  }
  // The rowid lookup: a direct table when the rowids are dense (a store's are 1..N with few gaps), else the entries
  // sorted by rowid (copied: the mapped ones are in the order they were added).
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  entries_.for_each([&](const Entry& e) {
    lo = std::min(lo, e.rowid);
    hi = std::max(hi, e.rowid);
  });
  if (n > 0 && static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) < 4 * static_cast<uint64_t>(n) + 1024) {
    dense_ = true;
    min_rowid_ = lo;
    slot_.assign(static_cast<size_t>(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo)) + 1, kAbsent);
    for (size_t i = 0; i < n; ++i) {
      const int64_t rowid = entries_[i].rowid;
      uint32_t& slot = slot_[static_cast<size_t>(static_cast<uint64_t>(rowid) - static_cast<uint64_t>(lo))];
      if (slot != kAbsent) return fail("case " + std::to_string(rowid) + " is there twice");
      slot = static_cast<uint32_t>(i);
    }
    return {};
  }
  std::vector<Entry> all;
  all.reserve(n);
  entries_.for_each([&](const Entry& e) { all.push_back(e); });
  entries_ = Entries{{}, nullptr, std::move(all)};
  std::vector<Entry>& sorted = entries_.more;
  const auto by_id = [](const Entry& a, const Entry& b) { return a.rowid < b.rowid; };
  if (!std::is_sorted(sorted.begin(), sorted.end(), by_id)) std::sort(sorted.begin(), sorted.end(), by_id);
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].rowid == sorted[i].rowid)
      return fail("case " + std::to_string(sorted[i].rowid) + " is there twice");
  return {};
}

std::optional<VectorIndex::CaseTable::Entry> VectorIndex::CaseTable::find(int64_t rowid) const {
  if (frozen_ && dense_) {
    const uint64_t offset = static_cast<uint64_t>(rowid) - static_cast<uint64_t>(min_rowid_);
    if (rowid < min_rowid_ || offset >= slot_.size() || slot_[static_cast<size_t>(offset)] == kAbsent)
      return std::nullopt;
    return entries_[slot_[static_cast<size_t>(offset)]];
  }
  if (frozen_) {  // not dense: every entry owned, sorted by rowid
    const auto& sorted = entries_.more;
    const auto it =
        std::lower_bound(sorted.begin(), sorted.end(), rowid, [](const Entry& e, int64_t id) { return e.rowid < id; });
    if (it == sorted.end() || it->rowid != rowid) return std::nullopt;
    return *it;
  }
  const auto it = where_.find(rowid);
  if (it == where_.end()) return std::nullopt;
  return Entry{rowid, it->second.first, it->second.second};
}

std::span<const int64_t> VectorIndex::CaseTable::members(int64_t position) const {
  const auto p = static_cast<size_t>(position);
  if (frozen_) return {member_rowids_.data() + member_start_[p], member_start_[p + 1] - member_start_[p]};
  return members_[p];
}

std::span<const int64_t> VectorIndex::CaseTable::group_positions(int64_t group) const {
  if (frozen_) {
    const auto [first, last] = std::equal_range(group_keys_.begin(), group_keys_.end(), group);
    return {group_positions_of_.data() + (first - group_keys_.begin()), static_cast<size_t>(last - first)};
  }
  const auto it = group_positions_.find(group);
  if (it == group_positions_.end()) return {};
  return it->second;
}

void VectorIndex::CaseTable::thaw() {
  if (!frozen_) return;
  members_.assign(member_start_.size() - 1, {});
  for (size_t p = 0; p + 1 < member_start_.size(); ++p)
    members_[p].assign(member_rowids_.begin() + member_start_[p], member_rowids_.begin() + member_start_[p + 1]);
  where_.reserve(entries_.size());
  entries_.for_each([&](const Entry& e) { where_.emplace(e.rowid, std::pair{e.position, e.group}); });
  for (size_t i = 0; i < group_keys_.size(); ++i) group_positions_[group_keys_[i]].push_back(group_positions_of_[i]);
  frozen_ = false;
  entries_ = Entries();
  std::vector<uint32_t>().swap(slot_);
  dense_ = false;
  member_start_ = {0};
  std::vector<int64_t>().swap(member_rowids_);
  std::vector<int64_t>().swap(group_keys_);
  std::vector<int64_t>().swap(group_positions_of_);
}

void VectorIndex::CaseTable::add(const Entry& e) {
  thaw();
  if (static_cast<size_t>(e.position) == members_.size()) members_.emplace_back();
  members_[static_cast<size_t>(e.position)].push_back(e.rowid);
  where_[e.rowid] = {e.position, e.group};
  auto& gp = group_positions_[e.group];
  if (auto it = std::lower_bound(gp.begin(), gp.end(), e.position); it == gp.end() || *it != e.position)
    gp.insert(it, e.position);
}

// ---------------------------------------------------------------------------------------------------------------

VectorIndex VectorIndex::for_count(size_t dimension, size_t, VectorIndexOptions options) {
  return VectorIndex(dimension, options);
}

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

const float* VectorIndex::stored(int64_t position) const {
  const idx_t base = index_->ntotal;
  if (position < base) return flat_of(*index_).xb() + static_cast<size_t>(position) * dimension_;
  return static_cast<const FastFlatIP&>(*tail_).xb() + static_cast<size_t>(position - base) * dimension_;
}

namespace {
// Bit i of a bitmap (false past its end), and setting it (true when it was clear).
bool bit(const std::vector<uint8_t>& bits, uint64_t i) { return i / 8 < bits.size() && ((bits[i / 8] >> (i % 8)) & 1); }
bool set_bit(std::vector<uint8_t>& bits, uint64_t i) {
  const auto mask = static_cast<uint8_t>(1u << (i % 8));
  if ((bits[i / 8] & mask) != 0) return false;
  bits[i / 8] = static_cast<uint8_t>(bits[i / 8] | mask);
  return true;
}

// A subset's positions as FAISS asks for them: ids of an index whose first vector is at position `offset`.
struct PositionSelector final : faiss::IDSelector {
  const std::vector<uint8_t>* bits = nullptr;  // one per position
  idx_t offset = 0;
  bool is_member(idx_t id) const override { return bit(*bits, static_cast<uint64_t>(id + offset)); }
};
}  // namespace

bool VectorIndex::Subset::has_rowid(int64_t rowid) const {
  if (rowid_bits.empty()) return std::binary_search(rowids.begin(), rowids.end(), rowid);
  return !rowids.empty() && rowid >= rowids.front() &&
         bit(rowid_bits, static_cast<uint64_t>(rowid) - static_cast<uint64_t>(rowids.front()));
}

bool VectorIndex::Subset::has_position(int64_t position) const {
  return bit(position_bits, static_cast<uint64_t>(position));
}

void VectorIndex::search_tail(const float* query, size_t k, const Subset* allowed,
                              std::vector<std::pair<int64_t, float>>& hits) const {
  if (!tail_ || tail_->ntotal == 0 || k == 0) return;
  const idx_t base = index_->ntotal;
  PositionSelector selector;
  faiss::SearchParameters params;
  if (allowed) {
    if (allowed->tail_positions == 0) return;
    selector.bits = &allowed->position_bits;
    selector.offset = base;
    params.sel = &selector;
  }
  const size_t n = std::min<size_t>(k, allowed ? allowed->tail_positions : static_cast<size_t>(tail_->ntotal));
  std::vector<float> d(n);
  std::vector<idx_t> l(n, -1);
  tail_->search(1, query, static_cast<idx_t>(n), d.data(), l.data(), allowed ? &params : nullptr);
  for (size_t i = 0; i < n; ++i)
    if (l[i] >= 0) hits.emplace_back(l[i] + base, finite_or_lowest(d[i]));
}

void VectorIndex::merge_tail() {
  if (!tail_ || tail_->ntotal == 0) return;
  index_->add(tail_->ntotal, static_cast<const FastFlatIP&>(*tail_).xb());
  tail_.reset();
}

void VectorIndex::search_on_this_thread() { omp_set_num_threads(1); }

bool VectorIndex::is_hnsw() const { return dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get()) != nullptr; }
bool VectorIndex::contains(int64_t rowid) const { return table_.find(rowid).has_value(); }

std::vector<float> VectorIndex::vector(int64_t rowid) const {
  const auto e = table_.find(rowid);
  if (!e) throw std::out_of_range("VectorIndex::vector: case " + std::to_string(rowid) + " is not in the index");
  const float* v = stored(e->position);
  return std::vector<float>(v, v + dimension_);
}

void VectorIndex::rebuild_as_hnsw() {
  auto hnsw = new_hnsw(dimension_, options_.hnsw_m);
  hnsw->hnsw.efConstruction = options_.ef_construction;
  hnsw->hnsw.efSearch = options_.ef_search;
  const idx_t n = index_->ntotal;
  if (n > 0) hnsw->add(n, flat_of(*index_).xb());
  index_ = std::move(hnsw);
}

void VectorIndex::ensure_hashes() {
  if (hashed_) return;
  by_hash_.clear();
  by_hash_.reserve(table_.positions());
  for (size_t p = 0; p < table_.positions(); ++p)
    by_hash_.emplace(vector_hash(stored(static_cast<int64_t>(p)), dimension_), p);
  hashed_ = true;
}

void VectorIndex::add(const std::vector<int64_t>& rowids, const std::vector<float>& vectors,
                      const std::vector<int64_t>& groups) {
  if (rowids.empty()) return;
  ensure_hashes();
  const auto stored_count = static_cast<int64_t>(table_.positions());
  std::vector<float> fresh;  // the new distinct vectors, positions stored_count + i
  const auto row = [&](int64_t position) {
    return position < stored_count ? stored(position)
                                   : fresh.data() + static_cast<size_t>(position - stored_count) * dimension_;
  };
  for (size_t i = 0; i < rowids.size(); ++i) {
    const int64_t rowid = rowids[i];
    if (table_.find(rowid)) continue;  // already indexed
    const float* v = vectors.data() + i * dimension_;
    const uint64_t h = vector_hash(v, dimension_);
    int64_t position = -1;
    for (auto [it, end] = by_hash_.equal_range(h); it != end; ++it)
      if (std::memcmp(row(it->second), v, dimension_ * sizeof(float)) == 0) {
        position = it->second;
        break;
      }
    if (position < 0) {
      position = static_cast<int64_t>(table_.positions());  // a new one: the table appends it
      fresh.insert(fresh.end(), v, v + dimension_);
      by_hash_.emplace(h, position);
    }
    table_.add({rowid, position, groups.empty() ? rowid : groups[i]});
    appended_.push_back(rowid);
  }
  const auto added = static_cast<idx_t>(fresh.size() / dimension_);
  if (added == 0) return;
  if (is_hnsw() && saved_) {
    // A saved HNSW index takes new vectors into its exact tail: no graph insertion (about 2 ms a vector at 100k) on
    // an incremental update; the next whole save merges them.
    if (!tail_) tail_ = std::make_unique<FastFlatIP>(static_cast<idx_t>(dimension_));
    tail_->add(added, fresh.data());
    return;
  }
  merge_tail();
  if (!is_hnsw() && table_.positions() >= options_.hnsw_threshold) {
    index_->add(added, fresh.data());
    rebuild_as_hnsw();
    return;
  }
  index_->add(added, fresh.data());
}

std::vector<SearchHit> VectorIndex::expand(const std::vector<std::pair<int64_t, float>>& positions, size_t r,
                                           const Subset* allowed, const std::unordered_set<int64_t>& excluded) const {
  std::vector<SearchHit> hits;
  std::unordered_set<int64_t> seen;
  for (const auto& [position, similarity] : positions) {
    if (position < 0 || static_cast<size_t>(position) >= table_.positions() || !seen.insert(position).second) continue;
    for (int64_t rowid : table_.members(position)) {
      if (excluded.contains(rowid) || (allowed && !allowed->has_rowid(rowid))) continue;
      hits.push_back({rowid, similarity});
    }
  }
  std::sort(hits.begin(), hits.end(), [](const SearchHit& a, const SearchHit& b) {
    return a.similarity != b.similarity ? a.similarity > b.similarity : a.rowid < b.rowid;
  });
  if (hits.size() > r) hits.resize(r);
  return hits;
}

void VectorIndex::refine(const float* query, std::vector<std::pair<int64_t, float>>& hits,
                         const Subset* allowed) const {
  if (!is_hnsw() || options_.refine_hits == 0) return;
  std::unordered_set<int64_t> groups, scored;
  for (const auto& h : hits) scored.insert(h.first);
  size_t budget = options_.refine_limit;
  for (size_t i = 0; i < hits.size() && i < options_.refine_hits; ++i) {
    if (hits[i].first < 0) continue;
    for (int64_t rowid : table_.members(hits[i].first)) {
      const int64_t group = table_.find(rowid)->group;
      if (!groups.insert(group).second) continue;
      for (int64_t p : table_.group_positions(group)) {
        if (budget == 0) return;
        if (!scored.insert(p).second) continue;
        if (allowed && !allowed->has_position(p)) continue;
        --budget;
        hits.emplace_back(p, finite_or_lowest(dot(query, stored(p), dimension_)));
      }
    }
  }
}

std::vector<SearchHit> VectorIndex::search_exact(const float* query, size_t r) const {
  if (table_.positions() == 0 || r == 0) return {};
  const size_t k = std::min(r, table_.positions());
  std::vector<float> d(k);
  std::vector<idx_t> l(k, -1);
  if (index_->ntotal > 0) flat_of(*index_).search(1, query, static_cast<idx_t>(k), d.data(), l.data());
  std::vector<std::pair<int64_t, float>> hits;
  for (size_t i = 0; i < k; ++i)
    if (l[i] >= 0) hits.emplace_back(l[i], finite_or_lowest(d[i]));
  search_tail(query, k, nullptr, hits);
  return expand(hits, r, nullptr, {});
}

bool VectorIndex::similar_enough(const std::vector<std::pair<int64_t, float>>& hits) const {
  float best = -std::numeric_limits<float>::max();
  for (const auto& [position, similarity] : hits) best = std::max(best, similarity);
  return best >= options_.exact_below;
}

std::vector<SearchHit> VectorIndex::search(const float* query, size_t r,
                                           const std::optional<std::vector<int64_t>>& allowed,
                                           const std::unordered_set<int64_t>& excluded) const {
  if (table_.positions() == 0 || r == 0) return {};
  const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get());
  std::vector<std::pair<int64_t, float>> hits;
  const auto run = [&](const faiss::Index& on, size_t k, const faiss::SearchParameters* params) {
    std::vector<float> d(k);
    std::vector<idx_t> l(k, -1);
    on.search(1, query, static_cast<idx_t>(k), d.data(), l.data(), params);
    for (size_t i = 0; i < k; ++i)
      if (l[i] >= 0) hits.emplace_back(l[i], finite_or_lowest(d[i]));
  };
  if (!allowed) {
    const size_t k = std::min(table_.positions(), r + excluded.size());
    if (hnsw) {
      faiss::SearchParametersHNSW params;
      params.efSearch = std::max<int>(options_.ef_search, static_cast<int>(k));
      run(*index_, k, &params);
      search_tail(query, k, nullptr, hits);
      std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      refine(query, hits, nullptr);
      if (!similar_enough(hits)) {  // a query unlike the graph's clusters: every vector, exactly
        hits.clear();
        run(flat_of(*index_), k, nullptr);
        search_tail(query, k, nullptr, hits);
      }
    } else {
      run(*index_, k, nullptr);
    }
    return expand(hits, r, nullptr, excluded);
  }
  Subset subset;
  subset.rowids = *allowed;
  if (!std::is_sorted(subset.rowids.begin(), subset.rowids.end())) std::sort(subset.rowids.begin(), subset.rowids.end());
  subset.rowids.erase(std::unique(subset.rowids.begin(), subset.rowids.end()), subset.rowids.end());
  if (excluded.size() > 64) {
    std::erase_if(subset.rowids, [&](int64_t id) { return excluded.contains(id); });
  } else {
    for (int64_t id : excluded)  // a few (the query, its duplicates): each found by bisection, not one lookup a case
      if (auto at = std::lower_bound(subset.rowids.begin(), subset.rowids.end(), id);
          at != subset.rowids.end() && *at == id)
        subset.rowids.erase(at);
  }
  subset.position_bits.assign((table_.positions() + 7) / 8, 0);
  const auto base = static_cast<int64_t>(index_->ntotal);
  const auto set_position = [&](int64_t position) {
    if (!set_bit(subset.position_bits, static_cast<uint64_t>(position))) return;
    ++subset.positions;
    if (position >= base) ++subset.tail_positions;
  };
  if (subset.rowids.size() * 8 < table_.cases()) {
    // A small subset (under an eighth of the cases, a policy's time window say): each case looked up, cheaper than
    // a pass over every case.
    std::erase_if(subset.rowids, [&](int64_t id) {
      const auto e = table_.find(id);
      if (!e) return true;  // not in the index
      set_position(e->position);
      return false;
    });
  } else if (!subset.rowids.empty()) {
    // Most of the cases: one pass over the table, each case's rowid tested in a bitmap of the subset's (when the
    // rowids are dense, as a store's are; else by bisection). Rowids the index lacks stay in the list: never a hit.
    const auto span = static_cast<uint64_t>(subset.rowids.back()) - static_cast<uint64_t>(subset.rowids.front());
    if (span < 64 * static_cast<uint64_t>(subset.rowids.size()) + 4096) {
      subset.rowid_bits.assign(static_cast<size_t>(span / 8 + 1), 0);
      for (int64_t id : subset.rowids)
        set_bit(subset.rowid_bits, static_cast<uint64_t>(id) - static_cast<uint64_t>(subset.rowids.front()));
    }
    table_.for_each_case([&](int64_t rowid, int64_t position) {
      if (subset.has_rowid(rowid)) set_position(position);
    });
  }
  if (subset.positions == 0) return {};
  const size_t k = std::min(subset.positions, r);
  PositionSelector selector;
  selector.bits = &subset.position_bits;
  if (hnsw && subset.positions > options_.exact_subset_limit) {
    faiss::SearchParametersHNSW params;
    params.sel = &selector;
    params.efSearch = std::max<int>(options_.ef_search, static_cast<int>(k));
    run(*index_, k, &params);
    search_tail(query, k, &subset, hits);
    std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    refine(query, hits, &subset);
    auto out = expand(hits, r, &subset, excluded);
    // Else (too few found, or a query unlike the graph's clusters) fall through to the exact search.
    if (out.size() >= k && similar_enough(hits)) return out;
    hits.clear();
  }
  faiss::SearchParameters params;
  params.sel = &selector;
  if (index_->ntotal > 0) run(flat_of(*index_), k, &params);
  search_tail(query, k, &subset, hits);
  return expand(hits, r, &subset, excluded);
}

std::string VectorIndex::fresh_name(const std::string& stem, const std::string& ext) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return stem + "." +
         hex64(fnv1a64(std::to_string(::getpid()) + "/" + std::to_string(t) + "/" + std::to_string(counter++)))
             .substr(0, 12) +
         ext;
}

namespace {

constexpr char kSegmentMagic[8] = {'S', 'P', 'K', 'S', 'E', 'G', '0', '1'};

bool safe_name(const std::string& f) { return !f.empty() && f.find('/') == std::string::npos && f != ".." && f != "."; }

}  // namespace

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
  auto vsum = write_checksummed(vec, kSaveChecksum, [&](ChecksumWriter& w) {
    std::string header(vectors_header(kSaveFormat), '\0');
    std::memcpy(header.data(), kVectorsMagic, sizeof kVectorsMagic);
    const uint64_t dc[2] = {dimension_, static_cast<uint64_t>(flat.ntotal)};
    std::memcpy(header.data() + sizeof kVectorsMagic, dc, sizeof dc);
    w(header.data(), 1, header.size());
    w(flat.rows(), sizeof(float) * dimension_, static_cast<size_t>(flat.ntotal));
  });
  if (!vsum) return std::unexpected(vsum.error());
  std::string gsum;
  if (hnsw) {
    // The graph alone: its storage is swapped for an empty one while faiss writes (the vectors are in the raw file).
    auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index_.get());
    faiss::IndexFlatIP empty(static_cast<idx_t>(dimension_));
    faiss::Index* storage = h->storage;
    h->storage = &empty;
    auto sum = write_checksummed(dir / graph_name, kSaveChecksum,
                                 [&](ChecksumWriter& w) { faiss::write_index(index_.get(), &w); });
    h->storage = storage;
    if (!sum) return std::unexpected(sum.error());
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
  auto isum = file_checksum(ids, kSaveChecksum);
  if (!isum) return std::unexpected(isum.error());
  IndexManifest m;
  m.format = kSaveFormat;
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
    // "SPKSEG01"; dimension, cases, new distinct vectors (u64 each); (rowid, position, group) per case, in the order
    // added; then the new vectors (positions from the saved count on), float32.
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
    auto sum = file_checksum(dir / name, checksum_for_format(m.format));  // the base's kind
    if (!sum) return std::unexpected(sum.error());
    m.segments.push_back({name, *sum, appended_.size(), table_.positions() - first_new});
  }
  if (m.format < 4) m.format = m.segments.empty() ? 2 : 3;
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
    auto sum = file_checksum(dir / e.file, checksum_for_format(man.format));
    if (!sum) return std::unexpected(sum.error());
    m["files"][e.name] = {{"file", e.file}, {"checksum", *sum}};
  }
  auto old = read_manifest(dir);
  if (auto s = write_file_atomic(dir / "manifest.json", json_text(m, 2) + "\n"); !s) return s;
  // The replaced state's files go, and files of states that crashed before their manifest (an hour old or more).
  std::set<std::string> keep = {"manifest.json", "save.lock", kVerifiedList, man.vectors_file, man.ids_file};
  if (!man.graph_file.empty()) keep.insert(man.graph_file);
  for (const auto& sg : man.segments) keep.insert(sg.file);
  for (const auto& e : extra_files) keep.insert(e.file);
  std::set<std::string> previous;
  if (old) {
    previous = {old->vectors_file, old->ids_file};
    if (!old->graph_file.empty()) previous.insert(old->graph_file);
    for (const auto& sg : old->segments) previous.insert(sg.file);
    for (const auto& e : old->extra_files) previous.insert(e.file);
  }
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
  const fs::path man = dir / "manifest.json";
  auto text = read_file(man);
  if (!text) return std::unexpected(text.error());
  try {
    const auto m = nlohmann::json::parse(*text);
    IndexManifest out;
    out.format = m.at("format").get<int>();
    if (out.format < 1 || out.format > kSaveFormat)
      return fail(man.string() + ": index format " + std::to_string(out.format) + " is not understood by this spark");
    out.embedder = m.at("embedder").get<std::string>();
    out.generation = m.at("generation").get<int64_t>();
    out.count = m.at("count").get<size_t>();
    out.vectors = out.format >= 2 ? m.at("vectors").get<size_t>() : out.count;
    out.dimension = m.at("dimension").get<size_t>();
    out.kind = m.at("kind").get<std::string>();
    if (out.format >= 2) {
      out.vectors_file = m.at("vectors_file").get<std::string>();
      out.ids_file = m.at("ids_file").get<std::string>();
    }
    if (out.format >= 4 && out.kind == "hnsw") {
      out.graph_file = m.at("graph_file").get<std::string>();
      out.graph_checksum = m.at("graph_checksum").get<std::string>();
      if (!safe_name(out.graph_file)) return fail(man.string() + ": names a file outside the index folder");
    }
    for (const auto* f : {&out.vectors_file, &out.ids_file})
      if (!safe_name(*f)) return fail(man.string() + ": names a file outside the index folder");
    out.base_count = m.value("base_count", out.count);
    out.base_vectors = m.value("base_vectors", out.vectors);
    if (m.contains("segments"))
      for (const auto& sg : m.at("segments")) {
        IndexManifest::Segment seg{sg.at("file").get<std::string>(), sg.at("checksum").get<std::string>(),
                                   sg.at("count").get<size_t>(), sg.at("vectors").get<size_t>()};
        if (!safe_name(seg.file)) return fail(man.string() + ": names a file outside the index folder");
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
        IndexManifest::Extra e{name, name, {}};
        if (value.is_string()) {
          e.checksum = value.get<std::string>();
        } else {
          e.file = value.at("file").get<std::string>();
          e.checksum = value.at("checksum").get<std::string>();
        }
        if (!safe_name(e.file)) return fail(man.string() + ": names a file outside the index folder");
        out.extra_files.push_back(std::move(e));
      }
    return out;
  } catch (const nlohmann::json::exception& e) {
    return fail(man.string() + ": damaged manifest (" + e.what() + ")");
  }
}

Result<std::pair<VectorIndex, IndexManifest>> VectorIndex::load(const fs::path& dir, VectorIndexOptions options) {
  auto manifest = read_manifest(dir);
  if (!manifest) return std::unexpected(manifest.error());
  const fs::path vec = dir / manifest->vectors_file, ids = dir / manifest->ids_file;
  const Checksum kind = checksum_for_format(manifest->format);
  FileVerifier verifier(dir, options, kind);
  // The HNSW graph (format 4 on; ~20 MB at 10^5 cases) is checksummed on a second thread while this one checks the
  // other files (~10 MB there); FAISS reads it here once both are done (its allocations then come from the main
  // heap, which may be on huge pages: src/base/huge_pages.h). The future's destructor waits on every early return.
  std::shared_ptr<const MappedFile> graph_map;
  std::future<std::string> graph_sum;
  if (manifest->format >= 4 && manifest->kind == "hnsw") {
    auto map = MappedFile::open(dir / manifest->graph_file);
    if (!map) return std::unexpected(map.error());
    graph_map = std::move(*map);
    if (!verifier.vouched(manifest->graph_file, manifest->graph_checksum, *graph_map)) {
      const auto sum = [&graph_map, kind] { return checksum_of(graph_map->view(), kind); };
      try {
        graph_sum = std::async(std::launch::async, sum);
      } catch (const std::system_error&) {  // no thread to be had: the checksum runs when it is asked for
        graph_sum = std::async(std::launch::deferred, sum);
      }
    }
  }
  // The extra files: verified through mappings that are kept for their users (take_verified_extra).
  std::vector<std::pair<std::string, std::shared_ptr<const MappedFile>>> extras;
  for (const auto& e : manifest->extra_files) {
    auto map = MappedFile::open(dir / e.file);
    if (!map) return std::unexpected(map.error());
    if (!verifier.verify(e.file, e.checksum, **map)) return checksum_mismatch(dir / e.file);
    extras.emplace_back(e.name, std::move(*map));
  }
  auto id_map = MappedFile::open(ids);  // mapped once: checked, then used
  if (!id_map) return std::unexpected(id_map.error());
  const std::string_view id_bytes = (*id_map)->view();
  if (!verifier.verify(manifest->ids_file, manifest->ids_checksum, **id_map)) return checksum_mismatch(ids);
  const size_t per_case = manifest->format >= 2 ? 3 : 1;
  if (id_bytes.size() != manifest->base_count * per_case * sizeof(int64_t))
    return fail(ids.string() + ": holds " + std::to_string(id_bytes.size() / (8 * per_case)) + " ids, manifest says " +
                std::to_string(manifest->base_count));
  VectorIndex index(manifest->dimension, options);
  if (manifest->format >= 4) {
    // The vectors are mapped, not read: their size and header are checked here, their whole checksum only when the
    // options ask (`spark index` and every index update do; a query does not pay a read of every page).
    auto map = MappedFile::open(vec);
    if (!map) return std::unexpected(map.error());
    const size_t body = manifest->base_vectors * manifest->dimension * sizeof(float);
    const size_t head = vectors_header(manifest->format);
    uint64_t dc[2] = {0, 0};
    if ((*map)->size() >= head) std::memcpy(dc, (*map)->data() + sizeof kVectorsMagic, sizeof dc);
    if ((*map)->size() != head + body ||
        std::memcmp((*map)->data(), kVectorsMagic, sizeof kVectorsMagic) != 0 || dc[0] != manifest->dimension ||
        dc[1] != manifest->base_vectors)
      return fail(vec.string() +
                  ": size or header does not match manifest.json (truncated or damaged); run `spark index --rebuild`");
    if (options.verify_vectors) {
      if (!verifier.verify(manifest->vectors_file, manifest->vectors_checksum, **map))
        return fail(vec.string() + ": checksum mismatch with manifest.json (damaged); run `spark index --rebuild`");
    }
    auto flat = std::make_unique<FastFlatIP>(static_cast<idx_t>(manifest->dimension));
    flat->use_mapped(std::move(*map), head, static_cast<idx_t>(manifest->base_vectors));
    if (manifest->kind == "hnsw") {
      const fs::path graph = dir / manifest->graph_file;
      // A damaged graph never reaches FAISS (its reader leaks what it was reading when it throws, faiss 1.7.3).
      if (graph_sum.valid() &&
          !verifier.hashed(manifest->graph_file, manifest->graph_checksum, *graph_map, graph_sum.get()))
        return checksum_mismatch(graph);
      auto read = read_verified_faiss(graph, *graph_map);
      if (!read) return std::unexpected(read.error());
      index.index_ = std::move(*read);
      auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index.index_.get());
      if (!h || h->metric_type != faiss::METRIC_INNER_PRODUCT || h->storage == nullptr || h->storage->ntotal != 0)
        return fail(graph.string() + ": not an HNSW graph of this index");
      if (h->own_fields) delete h->storage;
      h->storage = flat.release();
      h->own_fields = true;
    } else {
      index.index_ = std::move(flat);
    }
  } else {
    // Formats 2 and 3: one faiss file holding the vectors. A damaged one never reaches FAISS: its reader leaks the
    // index it was reading when it throws (faiss 1.7.3), so the checksum is verified first.
    auto read = read_faiss(vec, manifest->vectors_checksum, kind);
    if (!read) return std::unexpected(read.error());
    index.index_ = std::move(*read);
    // Into the fast storage (FastFlatIP): the codes move, nothing is copied.
    if (auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index.index_.get())) {
      if (auto* flat = dynamic_cast<faiss::IndexFlat*>(h->storage);
          flat && flat->metric_type == faiss::METRIC_INNER_PRODUCT) {
        auto fast = fast_copy_of(*flat);
        if (h->own_fields) delete h->storage;
        h->storage = fast.release();
        h->own_fields = true;
      }
    } else if (auto* flat = dynamic_cast<faiss::IndexFlat*>(index.index_.get());
               flat && flat->metric_type == faiss::METRIC_INNER_PRODUCT) {
      index.index_ = fast_copy_of(*flat);
    }
    if (!fast_storage_of(*index.index_)) return fail(vec.string() + ": not an inner-product index of spark's");
  }
  if (static_cast<size_t>(index.index_->ntotal) != manifest->base_vectors ||
      static_cast<size_t>(index.index_->d) != manifest->dimension)
    return fail(vec.string() + ": does not match manifest.json (count or dimension)");
  // The segments: each mapped, verified and its header checked before any case is taken, so the table's entries
  // are sized once, for the counts the files were found to hold. (A reallocation as the segments' cases came would
  // fill twice the entries' memory, and fresh memory is what a new process pays most for: a page fault of ~15 µs
  // for each 4 KiB written, on the 2-core VMs measured.)
  struct CheckedSegment {
    std::shared_ptr<const MappedFile> map;
    size_t cases = 0, fresh = 0;
  };
  std::vector<CheckedSegment> segments;
  size_t all_cases = manifest->base_count;
  for (const auto& sg : manifest->segments) {
    const fs::path path = dir / sg.file;
    auto map = MappedFile::open(path);
    if (!map) return std::unexpected(map.error());
    const std::string_view segment = (*map)->view();
    if (!verifier.verify(sg.file, sg.checksum, **map)) return checksum_mismatch(path);
    uint64_t header[3] = {0, 0, 0};
    const size_t head = sizeof kSegmentMagic + sizeof header;
    if (segment.size() >= head) std::memcpy(header, segment.data() + sizeof kSegmentMagic, sizeof header);
    const size_t n = static_cast<size_t>(header[1]), fresh = static_cast<size_t>(header[2]);
    if (segment.size() < head || std::memcmp(segment.data(), kSegmentMagic, sizeof kSegmentMagic) != 0 ||
        header[0] != manifest->dimension || n != sg.count || fresh != sg.vectors ||
        segment.size() != head + n * 3 * sizeof(int64_t) + fresh * manifest->dimension * sizeof(float))
      return fail(path.string() +
                  ": not a segment of this index (header, dimension or size); run `spark index --rebuild`");
    segments.push_back({std::move(*map), n, fresh});
    all_cases += n;
  }
  // The cases: the ids file's where they lie in its mapping (its (rowid, position, group) int64 triples are the
  // table's entries as they are: a new process copies none of them into fresh memory), then each segment's in order.
  std::span<const CaseTable::Entry> base_entries;
  std::vector<CaseTable::Entry> entries;  // the segments' cases (and a format-1 file's, which holds only rowids)
  if (per_case == 3) {
    static_assert(sizeof(CaseTable::Entry) == 3 * sizeof(int64_t));
    // Any bytes are valid values of the aggregate of three int64 (a mapping is page-aligned).
    base_entries = {reinterpret_cast<const CaseTable::Entry*>(id_bytes.data()), manifest->base_count};
    for (const auto& e : base_entries)
      if (e.position < 0 || static_cast<size_t>(e.position) >= manifest->base_vectors)
        return fail(ids.string() + ": damaged (a case at an invalid position)");
    entries.reserve(all_cases - manifest->base_count);
  } else {
    entries.reserve(all_cases);
    for (size_t i = 0; i < manifest->base_count; ++i) {
      int64_t rowid = 0;
      std::memcpy(&rowid, id_bytes.data() + i * sizeof(int64_t), sizeof rowid);
      if (i >= manifest->base_vectors) return fail(ids.string() + ": damaged (a case at an invalid position)");
      entries.push_back({rowid, static_cast<int64_t>(i), rowid});
    }
  }
  index.hashed_ = false;  // the duplicate lookup is built by the first add
  if (auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index.index_.get())) h->hnsw.efSearch = options.ef_search;
  // The segments' cases at the positions they had, their new vectors into the exact tail. No hashing, no graph
  // insertion: a cold start with segments costs their bytes.
  size_t positions = manifest->base_vectors;
  for (size_t s = 0; s < segments.size(); ++s) {
    const CheckedSegment& sg = segments[s];
    const fs::path path = dir / manifest->segments[s].file;
    const char* p = sg.map->data() + sizeof kSegmentMagic + 3 * sizeof(uint64_t);
    const char* vectors = p + sg.cases * 3 * sizeof(int64_t);
    if (sg.fresh > 0) {
      if (!index.tail_) {
        // The first segment's new vectors are searched where they lie in its mapping (their rows start at a multiple
        // of 8 bytes; dot() loads them unaligned), not copied into fresh memory; a later segment's are added to
        // them, which copies both (FastFlatIP::add).
        auto tail = std::make_unique<FastFlatIP>(static_cast<idx_t>(manifest->dimension));
        tail->use_mapped(sg.map, static_cast<size_t>(vectors - sg.map->data()), static_cast<idx_t>(sg.fresh));
        index.tail_ = std::move(tail);
      } else {
        index.tail_->add(static_cast<idx_t>(sg.fresh), reinterpret_cast<const float*>(vectors));
      }
      positions += sg.fresh;
    }
    for (size_t i = 0; i < sg.cases; ++i, p += 3 * sizeof(int64_t)) {
      int64_t t[3];
      std::memcpy(t, p, sizeof t);
      if (t[1] < 0 || static_cast<size_t>(t[1]) >= positions)
        return fail(path.string() + ": damaged (a case at an invalid position)");
      entries.push_back({t[0], t[1], t[2]});
    }
  }
  const size_t held = base_entries.size() + entries.size();
  if (held != manifest->count || positions != manifest->vectors)
    return fail((dir / "manifest.json").string() + ": its files hold " + std::to_string(held) + " cases, it says " +
                std::to_string(manifest->count) + "; run `spark index --rebuild`");
  if (auto s = index.table_.load(base_entries, base_entries.empty() ? nullptr : *id_map, std::move(entries), positions);
      !s)
    return fail(ids.string() + (manifest->segments.empty() ? "" : " and its segments") + ": damaged (" +
                s.error().message + ")");
  index.appended_.clear();
  index.saved_ = SavedState{*manifest};
  index.verified_extras_ = std::move(extras);
  index.files_hashed_at_load_ = verifier.files_hashed();
  verifier.update_list(*manifest);
  IndexManifest m = *manifest;
  return std::pair<VectorIndex, IndexManifest>{std::move(index), std::move(m)};
}

}  // namespace spark
