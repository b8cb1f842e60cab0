#include "vector_index.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "case.h"
#include "text.h"

namespace spark {

namespace fs = std::filesystem;
using idx_t = faiss::Index::idx_t;

Result<std::string> file_checksum(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path.string() + ": cannot open");
  std::vector<char> buf(1 << 20);
  uint64_t h = 0xcbf29ce484222325ULL;
  uint64_t total = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    total += n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, buf.data() + i, 8);
      h = (h ^ w) * 0x100000001b3ULL;
      h ^= h >> 29;
    }
    for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ULL;
  }
  h ^= total;
  return hex64(h);
}

VectorIndex::VectorIndex(size_t dimension, VectorIndexOptions options)
    : dimension_(dimension), options_(options), index_(std::make_unique<faiss::IndexFlatIP>(static_cast<idx_t>(dimension))) {}
VectorIndex::~VectorIndex() = default;
VectorIndex::VectorIndex(VectorIndex&&) noexcept = default;
VectorIndex& VectorIndex::operator=(VectorIndex&&) noexcept = default;

namespace {
std::vector<SearchHit> collect(const std::vector<float>& d, const std::vector<idx_t>& l, const std::vector<int64_t>& ids,
                               const std::unordered_set<int64_t>& excluded, size_t r);
}

VectorIndex VectorIndex::for_count(size_t dimension, size_t expected_count, VectorIndexOptions options) {
  VectorIndex index(dimension, options);
  if (expected_count >= options.hnsw_threshold) index.rebuild_as_hnsw();
  return index;
}

std::vector<SearchHit> VectorIndex::search_exact(const float* query, size_t r) const {
  if (ids_.empty()) return {};
  const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get());
  const faiss::Index* flat = hnsw ? hnsw->storage : index_.get();
  const size_t k = std::min(r, ids_.size());
  std::vector<float> d(k);
  std::vector<idx_t> l(k);
  flat->search(1, query, static_cast<idx_t>(k), d.data(), l.data());
  return collect(d, l, ids_, {}, r);
}

std::vector<float> VectorIndex::vector(int64_t rowid) const {
  std::vector<float> v(dimension_);
  index_->reconstruct(position_.at(rowid), v.data());
  return v;
}

bool VectorIndex::is_hnsw() const { return dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get()) != nullptr; }
bool VectorIndex::contains(int64_t rowid) const { return position_.contains(rowid); }

void VectorIndex::rebuild_as_hnsw() {
  auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<idx_t>(dimension_), options_.hnsw_m,
                                                     faiss::METRIC_INNER_PRODUCT);
  hnsw->hnsw.efConstruction = options_.ef_construction;
  hnsw->hnsw.efSearch = options_.ef_search;
  std::vector<float> all(ids_.size() * dimension_);
  if (!ids_.empty()) index_->reconstruct_n(0, static_cast<idx_t>(ids_.size()), all.data());
  if (!ids_.empty()) hnsw->add(static_cast<idx_t>(ids_.size()), all.data());
  index_ = std::move(hnsw);
}

void VectorIndex::add(const std::vector<int64_t>& rowids, const std::vector<float>& vectors) {
  if (rowids.empty()) return;
  for (int64_t id : rowids) {
    position_[id] = static_cast<int64_t>(ids_.size());
    ids_.push_back(id);
  }
  if (!is_hnsw() && ids_.size() >= options_.hnsw_threshold) {
    // Move the existing vectors plus the new ones into HNSW in one go.
    index_->add(static_cast<idx_t>(rowids.size()), vectors.data());
    rebuild_as_hnsw();
    return;
  }
  index_->add(static_cast<idx_t>(rowids.size()), vectors.data());
}

namespace {

// Keeps the best `r` hits not excluded, in descending similarity, ties by rowid (deterministic).
std::vector<SearchHit> collect(const std::vector<float>& d, const std::vector<idx_t>& l, const std::vector<int64_t>& ids,
                               const std::unordered_set<int64_t>& excluded, size_t r) {
  std::vector<SearchHit> hits;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] < 0 || static_cast<size_t>(l[i]) >= ids.size()) continue;
    const int64_t rowid = ids[static_cast<size_t>(l[i])];
    if (excluded.contains(rowid)) continue;
    hits.push_back({rowid, d[i]});
  }
  std::stable_sort(hits.begin(), hits.end(), [](const SearchHit& a, const SearchHit& b) {
    return a.similarity != b.similarity ? a.similarity > b.similarity : a.rowid < b.rowid;
  });
  if (hits.size() > r) hits.resize(r);
  return hits;
}

}  // namespace

std::vector<SearchHit> VectorIndex::search(const float* query, size_t r, const std::optional<std::vector<int64_t>>& allowed,
                                           const std::unordered_set<int64_t>& excluded) const {
  if (ids_.empty() || r == 0) return {};
  const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get());
  if (!allowed) {
    const size_t k = std::min(ids_.size(), r + excluded.size());
    std::vector<float> d(k);
    std::vector<idx_t> l(k);
    if (hnsw) {
      const_cast<faiss::IndexHNSWFlat*>(hnsw)->hnsw.efSearch = std::max<int>(options_.ef_search, static_cast<int>(k));
    }
    index_->search(1, query, static_cast<idx_t>(k), d.data(), l.data());
    return collect(d, l, ids_, excluded, r);
  }
  std::vector<idx_t> positions;
  positions.reserve(allowed->size());
  for (int64_t id : *allowed) {
    if (excluded.contains(id)) continue;
    if (auto it = position_.find(id); it != position_.end()) positions.push_back(it->second);
  }
  if (positions.empty()) return {};
  const size_t k = std::min(positions.size(), r);
  std::vector<float> d(k);
  std::vector<idx_t> l(k);
  faiss::IDSelectorBatch selector(positions.size(), positions.data());
  if (hnsw && positions.size() > options_.exact_subset_limit) {
    faiss::SearchParametersHNSW params;
    params.sel = &selector;
    const_cast<faiss::IndexHNSWFlat*>(hnsw)->hnsw.efSearch = std::max<int>(options_.ef_search, static_cast<int>(k));
    hnsw->search(1, query, static_cast<idx_t>(k), d.data(), l.data(), &params);
    auto hits = collect(d, l, ids_, excluded, r);
    if (hits.size() >= k) return hits;  // else fall through to the exact search
  }
  const faiss::Index* flat = hnsw ? hnsw->storage : index_.get();
  faiss::SearchParameters params;
  params.sel = &selector;
  std::fill(l.begin(), l.end(), -1);
  flat->search(1, query, static_cast<idx_t>(k), d.data(), l.data(), &params);
  return collect(d, l, ids_, excluded, r);
}

Status VectorIndex::save(const fs::path& dir, const std::string& embedder, int64_t generation,
                         const std::vector<std::string>& extra_files) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  const fs::path vec = dir / "vectors.faiss", ids = dir / "ids.bin", man = dir / "manifest.json";
  // Two processes saving at once (CI jobs recording into one store) take turns: their files must not interleave.
  struct SaveLock {
    int fd = -1;
    ~SaveLock() {
      if (fd >= 0) ::close(fd);  // releases the flock
    }
  } lock;
  lock.fd = ::open((dir / "save.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd >= 0) ::flock(lock.fd, LOCK_EX);
  // The manifest goes first (removed), then the data, then the new manifest: a crash leaves no valid-looking mix.
  fs::remove(man, ec);
  const fs::path vec_tmp = vec.string() + ".tmp." + std::to_string(::getpid());
  try {
    faiss::write_index(index_.get(), vec_tmp.c_str());
  } catch (const faiss::FaissException& e) {
    return fail(vec_tmp.string() + ": cannot write the index: " + e.what());
  }
  fs::rename(vec_tmp, vec, ec);
  if (ec) return fail(vec.string() + ": " + ec.message());
  std::string id_bytes(reinterpret_cast<const char*>(ids_.data()), ids_.size() * sizeof(int64_t));
  if (auto s = write_file_atomic(ids, id_bytes); !s) return s;
  auto vsum = file_checksum(vec);
  if (!vsum) return std::unexpected(vsum.error());
  auto isum = file_checksum(ids);
  if (!isum) return std::unexpected(isum.error());
  nlohmann::json m = {{"format", 1},
                      {"embedder", embedder},
                      {"generation", generation},
                      {"count", ids_.size()},
                      {"dimension", dimension_},
                      {"kind", is_hnsw() ? "hnsw" : "flat"},
                      {"vectors_checksum", *vsum},
                      {"ids_checksum", *isum},
                      {"files", nlohmann::json::object()}};
  for (const auto& name : extra_files) {
    auto sum = file_checksum(dir / name);
    if (!sum) return std::unexpected(sum.error());
    m["files"][name] = *sum;
  }
  return write_file_atomic(man, m.dump(2) + "\n");
}

Result<IndexManifest> VectorIndex::read_manifest(const fs::path& dir) {
  const fs::path man = dir / "manifest.json";
  auto text = read_file(man);
  if (!text) return std::unexpected(text.error());
  try {
    const auto m = nlohmann::json::parse(*text);
    IndexManifest out;
    out.format = m.at("format").get<int>();
    if (out.format != 1)
      return fail(man.string() + ": index format " + std::to_string(out.format) + " is not understood by this spark");
    out.embedder = m.at("embedder").get<std::string>();
    out.generation = m.at("generation").get<int64_t>();
    out.count = m.at("count").get<size_t>();
    out.dimension = m.at("dimension").get<size_t>();
    out.kind = m.at("kind").get<std::string>();
    out.vectors_checksum = m.at("vectors_checksum").get<std::string>();
    out.ids_checksum = m.at("ids_checksum").get<std::string>();
    if (m.contains("files"))
      for (const auto& [name, sum] : m.at("files").items()) out.extra_files.emplace_back(name, sum.get<std::string>());
    return out;
  } catch (const nlohmann::json::exception& e) {
    return fail(man.string() + ": damaged manifest (" + e.what() + ")");
  }
}

Result<std::pair<VectorIndex, IndexManifest>> VectorIndex::load(const fs::path& dir, VectorIndexOptions options) {
  auto manifest = read_manifest(dir);
  if (!manifest) return std::unexpected(manifest.error());
  const fs::path vec = dir / "vectors.faiss", ids = dir / "ids.bin";
  std::vector<std::pair<fs::path, std::string>> check = {{vec, manifest->vectors_checksum}, {ids, manifest->ids_checksum}};
  for (const auto& [name, sum] : manifest->extra_files) check.emplace_back(dir / name, sum);
  for (const auto& [path, want] : check) {
    auto got = file_checksum(path);
    if (!got) return std::unexpected(got.error());
    if (*got != want)
      return fail(path.string() + ": checksum mismatch with manifest.json (truncated or damaged); run `spark index --rebuild`");
  }
  auto id_bytes = read_file(ids);
  if (!id_bytes) return std::unexpected(id_bytes.error());
  if (id_bytes->size() != manifest->count * sizeof(int64_t))
    return fail(ids.string() + ": holds " + std::to_string(id_bytes->size() / 8) + " ids, manifest says " +
                std::to_string(manifest->count));
  VectorIndex index(manifest->dimension, options);
  try {
    index.index_.reset(faiss::read_index(vec.c_str()));
  } catch (const faiss::FaissException& e) {
    return fail(vec.string() + ": cannot read the index: " + e.what());
  }
  if (static_cast<size_t>(index.index_->ntotal) != manifest->count ||
      static_cast<size_t>(index.index_->d) != manifest->dimension)
    return fail(vec.string() + ": does not match manifest.json (count or dimension)");
  index.ids_.resize(manifest->count);
  std::memcpy(index.ids_.data(), id_bytes->data(), id_bytes->size());
  for (size_t i = 0; i < index.ids_.size(); ++i) index.position_[index.ids_[i]] = static_cast<int64_t>(i);
  if (auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index.index_.get())) h->hnsw.efSearch = options.ef_search;
  IndexManifest m = *manifest;
  return std::pair<VectorIndex, IndexManifest>{std::move(index), std::move(m)};
}

}  // namespace spark
