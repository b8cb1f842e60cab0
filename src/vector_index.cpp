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
#include <faiss/utils/distances.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
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

const faiss::IndexFlat& flat_of(const faiss::Index& index) {
  if (const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(&index)) return *dynamic_cast<const faiss::IndexFlat*>(hnsw->storage);
  return dynamic_cast<const faiss::IndexFlat&>(index);
}

}  // namespace

VectorIndex::VectorIndex(size_t dimension, VectorIndexOptions options)
    : dimension_(dimension), options_(options), index_(std::make_unique<faiss::IndexFlatIP>(static_cast<idx_t>(dimension))) {}
VectorIndex::~VectorIndex() = default;
VectorIndex::VectorIndex(VectorIndex&&) noexcept = default;
VectorIndex& VectorIndex::operator=(VectorIndex&&) noexcept = default;

VectorIndex VectorIndex::for_count(size_t dimension, size_t, VectorIndexOptions options) {
  return VectorIndex(dimension, options);
}

std::string IndexManifest::file_of(const std::string& name) const {
  for (const auto& e : extra_files)
    if (e.name == name) return e.file;
  return {};
}

const float* VectorIndex::stored(int64_t position) const {
  return flat_of(*index_).get_xb() + static_cast<size_t>(position) * dimension_;
}

bool VectorIndex::is_hnsw() const { return dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get()) != nullptr; }
bool VectorIndex::contains(int64_t rowid) const { return position_.contains(rowid); }

std::vector<float> VectorIndex::vector(int64_t rowid) const {
  const float* v = stored(position_.at(rowid));
  return std::vector<float>(v, v + dimension_);
}

void VectorIndex::rebuild_as_hnsw() {
  auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<idx_t>(dimension_), options_.hnsw_m,
                                                     faiss::METRIC_INNER_PRODUCT);
  hnsw->hnsw.efConstruction = options_.ef_construction;
  hnsw->hnsw.efSearch = options_.ef_search;
  const idx_t n = index_->ntotal;
  if (n > 0) hnsw->add(n, flat_of(*index_).get_xb());
  index_ = std::move(hnsw);
}

void VectorIndex::ensure_hashes() {
  if (hashed_) return;
  by_hash_.clear();
  by_hash_.reserve(members_.size());
  for (size_t p = 0; p < members_.size(); ++p) by_hash_.emplace(vector_hash(stored(static_cast<int64_t>(p)), dimension_), p);
  hashed_ = true;
}

void VectorIndex::add(const std::vector<int64_t>& rowids, const std::vector<float>& vectors, const std::vector<int64_t>& groups) {
  if (rowids.empty()) return;
  ensure_hashes();
  const auto stored_count = static_cast<int64_t>(index_->ntotal);
  std::vector<float> fresh;  // the new distinct vectors, positions stored_count + i
  const auto row = [&](int64_t position) {
    return position < stored_count ? stored(position) : fresh.data() + static_cast<size_t>(position - stored_count) * dimension_;
  };
  for (size_t i = 0; i < rowids.size(); ++i) {
    const int64_t rowid = rowids[i];
    if (position_.contains(rowid)) continue;  // already indexed
    const float* v = vectors.data() + i * dimension_;
    const uint64_t h = vector_hash(v, dimension_);
    int64_t position = -1;
    for (auto [it, end] = by_hash_.equal_range(h); it != end; ++it)
      if (std::memcmp(row(it->second), v, dimension_ * sizeof(float)) == 0) {
        position = it->second;
        break;
      }
    if (position < 0) {
      position = static_cast<int64_t>(members_.size());
      members_.emplace_back();
      fresh.insert(fresh.end(), v, v + dimension_);
      by_hash_.emplace(h, position);
    }
    members_[static_cast<size_t>(position)].push_back(rowid);
    position_[rowid] = position;
    const int64_t group = groups.empty() ? rowid : groups[i];
    group_of_[rowid] = group;
    auto& gp = group_positions_[group];
    if (std::find(gp.begin(), gp.end(), position) == gp.end()) gp.push_back(position);
  }
  const auto added = static_cast<idx_t>(fresh.size() / dimension_);
  if (added == 0) return;
  if (!is_hnsw() && members_.size() >= options_.hnsw_threshold) {
    index_->add(added, fresh.data());
    rebuild_as_hnsw();
    return;
  }
  index_->add(added, fresh.data());
}

std::vector<SearchHit> VectorIndex::expand(const std::vector<std::pair<int64_t, float>>& positions, size_t r,
                                           const std::unordered_set<int64_t>* allowed,
                                           const std::unordered_set<int64_t>& excluded) const {
  std::vector<SearchHit> hits;
  std::unordered_set<int64_t> seen;
  for (const auto& [position, similarity] : positions) {
    if (position < 0 || static_cast<size_t>(position) >= members_.size() || !seen.insert(position).second) continue;
    for (int64_t rowid : members_[static_cast<size_t>(position)]) {
      if (excluded.contains(rowid) || (allowed && !allowed->contains(rowid))) continue;
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
                         const std::unordered_set<int64_t>* allowed) const {
  if (!is_hnsw() || options_.refine_hits == 0) return;
  std::unordered_set<int64_t> groups, scored;
  for (const auto& h : hits) scored.insert(h.first);
  size_t budget = options_.refine_limit;
  for (size_t i = 0; i < hits.size() && i < options_.refine_hits; ++i) {
    if (hits[i].first < 0) continue;
    for (int64_t rowid : members_[static_cast<size_t>(hits[i].first)]) {
      if (!groups.insert(group_of_.at(rowid)).second) continue;
      for (int64_t p : group_positions_.at(group_of_.at(rowid))) {
        if (budget == 0) return;
        if (!scored.insert(p).second) continue;
        if (allowed) {
          const auto& m = members_[static_cast<size_t>(p)];
          if (std::none_of(m.begin(), m.end(), [&](int64_t id) { return allowed->contains(id); })) continue;
        }
        --budget;
        hits.emplace_back(p, faiss::fvec_inner_product(query, stored(p), dimension_));
      }
    }
  }
}

std::vector<SearchHit> VectorIndex::search_exact(const float* query, size_t r) const {
  if (members_.empty() || r == 0) return {};
  const size_t k = std::min(r, members_.size());
  std::vector<float> d(k);
  std::vector<idx_t> l(k, -1);
  flat_of(*index_).search(1, query, static_cast<idx_t>(k), d.data(), l.data());
  std::vector<std::pair<int64_t, float>> hits;
  for (size_t i = 0; i < k; ++i) hits.emplace_back(l[i], d[i]);
  return expand(hits, r, nullptr, {});
}

std::vector<SearchHit> VectorIndex::search(const float* query, size_t r, const std::optional<std::vector<int64_t>>& allowed,
                                           const std::unordered_set<int64_t>& excluded) const {
  if (members_.empty() || r == 0) return {};
  const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(index_.get());
  std::vector<std::pair<int64_t, float>> hits;
  const auto run = [&](const faiss::Index& on, size_t k, const faiss::SearchParameters* params) {
    std::vector<float> d(k);
    std::vector<idx_t> l(k, -1);
    on.search(1, query, static_cast<idx_t>(k), d.data(), l.data(), params);
    for (size_t i = 0; i < k; ++i)
      if (l[i] >= 0) hits.emplace_back(l[i], d[i]);
  };
  if (!allowed) {
    const size_t k = std::min(members_.size(), r + excluded.size());
    if (hnsw) {
      faiss::SearchParametersHNSW params;
      params.efSearch = std::max<int>(options_.ef_search, static_cast<int>(k));
      run(*index_, k, &params);
      refine(query, hits, nullptr);
    } else {
      run(*index_, k, nullptr);
    }
    return expand(hits, r, nullptr, excluded);
  }
  std::unordered_set<int64_t> allowed_set;
  std::vector<idx_t> positions;
  for (int64_t id : *allowed) {
    if (excluded.contains(id)) continue;
    if (auto it = position_.find(id); it != position_.end()) {
      allowed_set.insert(id);
      positions.push_back(it->second);
    }
  }
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  if (positions.empty()) return {};
  const size_t k = std::min(positions.size(), r);
  faiss::IDSelectorBatch selector(positions.size(), positions.data());
  if (hnsw && positions.size() > options_.exact_subset_limit) {
    faiss::SearchParametersHNSW params;
    params.sel = &selector;
    params.efSearch = std::max<int>(options_.ef_search, static_cast<int>(k));
    run(*index_, k, &params);
    refine(query, hits, &allowed_set);
    auto out = expand(hits, r, &allowed_set, excluded);
    if (out.size() >= k) return out;  // else fall through to the exact search
    hits.clear();
  }
  faiss::SearchParameters params;
  params.sel = &selector;
  run(flat_of(*index_), k, &params);
  return expand(hits, r, &allowed_set, excluded);
}

std::string VectorIndex::fresh_name(const std::string& stem, const std::string& ext) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return stem + "." + hex64(fnv1a64(std::to_string(::getpid()) + "/" + std::to_string(t) + "/" + std::to_string(counter++))).substr(0, 12) + ext;
}

Status VectorIndex::save(const fs::path& dir, const std::string& embedder, int64_t generation,
                         const std::vector<Extra>& extra_files) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  const fs::path man = dir / "manifest.json";
  // Two processes saving at once (CI jobs recording into one store) take turns: their manifests must not interleave.
  struct SaveLock {
    int fd = -1;
    ~SaveLock() {
      if (fd >= 0) ::close(fd);  // releases the flock
    }
  } lock;
  lock.fd = ::open((dir / "save.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd >= 0) ::flock(lock.fd, LOCK_EX);
  // New files under new names; the manifest, replaced atomically, switches from the old state to the new one.
  const std::string vec_name = fresh_name("vectors", ".faiss"), ids_name = fresh_name("ids", ".bin");
  const fs::path vec = dir / vec_name, ids = dir / ids_name;
  const fs::path vec_tmp = vec.string() + ".tmp";
  try {
    faiss::write_index(index_.get(), vec_tmp.c_str());
  } catch (const faiss::FaissException& e) {
    fs::remove(vec_tmp, ec);
    return fail(vec_tmp.string() + ": cannot write the index: " + e.what());
  }
  fs::rename(vec_tmp, vec, ec);
  if (ec) return fail(vec.string() + ": " + ec.message());
  // ids: (rowid, position, group) per case, in position order.
  std::vector<int64_t> triples;
  triples.reserve(position_.size() * 3);
  for (size_t p = 0; p < members_.size(); ++p)
    for (int64_t rowid : members_[p]) {
      triples.push_back(rowid);
      triples.push_back(static_cast<int64_t>(p));
      triples.push_back(group_of_.at(rowid));
    }
  std::string id_bytes(reinterpret_cast<const char*>(triples.data()), triples.size() * sizeof(int64_t));
  if (auto s = write_file_atomic(ids, id_bytes); !s) return s;
  auto vsum = file_checksum(vec);
  if (!vsum) return std::unexpected(vsum.error());
  auto isum = file_checksum(ids);
  if (!isum) return std::unexpected(isum.error());
  nlohmann::json m = {{"format", 2},
                      {"embedder", embedder},
                      {"generation", generation},
                      {"count", position_.size()},
                      {"vectors", members_.size()},
                      {"dimension", dimension_},
                      {"kind", is_hnsw() ? "hnsw" : "flat"},
                      {"vectors_file", vec_name},
                      {"ids_file", ids_name},
                      {"vectors_checksum", *vsum},
                      {"ids_checksum", *isum},
                      {"files", nlohmann::json::object()}};
  for (const auto& e : extra_files) {
    auto sum = file_checksum(dir / e.file);
    if (!sum) return std::unexpected(sum.error());
    m["files"][e.name] = {{"file", e.file}, {"checksum", *sum}};
  }
  auto old = read_manifest(dir);
  if (auto s = write_file_atomic(man, m.dump(2) + "\n"); !s) return s;
  // The replaced state's files go, and files of states that crashed before their manifest (an hour old or more).
  std::set<std::string> keep = {"manifest.json", "save.lock", vec_name, ids_name};
  for (const auto& e : extra_files) keep.insert(e.file);
  std::set<std::string> previous;
  if (old) {
    previous = {old->vectors_file, old->ids_file};
    for (const auto& e : old->extra_files) previous.insert(e.file);
  }
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
    if (out.format != 1 && out.format != 2)
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
    for (const auto* f : {&out.vectors_file, &out.ids_file})
      if (f->empty() || f->find('/') != std::string::npos || *f == "..")
        return fail(man.string() + ": names a file outside the index folder");
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
        if (e.file.empty() || e.file.find('/') != std::string::npos || e.file == "..")
          return fail(man.string() + ": names a file outside the index folder");
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
  std::vector<std::pair<fs::path, std::string>> check = {{vec, manifest->vectors_checksum}, {ids, manifest->ids_checksum}};
  for (const auto& e : manifest->extra_files) check.emplace_back(dir / e.file, e.checksum);
  for (const auto& [path, want] : check) {
    auto got = file_checksum(path);
    if (!got) return std::unexpected(got.error());
    if (*got != want)
      return fail(path.string() + ": checksum mismatch with manifest.json (truncated or damaged); run `spark index --rebuild`");
  }
  auto id_bytes = read_file(ids);
  if (!id_bytes) return std::unexpected(id_bytes.error());
  const size_t per_case = manifest->format >= 2 ? 3 : 1;
  if (id_bytes->size() != manifest->count * per_case * sizeof(int64_t))
    return fail(ids.string() + ": holds " + std::to_string(id_bytes->size() / (8 * per_case)) + " ids, manifest says " +
                std::to_string(manifest->count));
  VectorIndex index(manifest->dimension, options);
  try {
    index.index_.reset(faiss::read_index(vec.c_str()));
  } catch (const faiss::FaissException& e) {
    return fail(vec.string() + ": cannot read the index: " + e.what());
  }
  if (static_cast<size_t>(index.index_->ntotal) != manifest->vectors ||
      static_cast<size_t>(index.index_->d) != manifest->dimension)
    return fail(vec.string() + ": does not match manifest.json (count or dimension)");
  std::vector<int64_t> values(id_bytes->size() / sizeof(int64_t));
  std::memcpy(values.data(), id_bytes->data(), id_bytes->size());
  index.members_.assign(manifest->vectors, {});
  index.position_.reserve(manifest->count);
  for (size_t i = 0; i < manifest->count; ++i) {
    const int64_t rowid = values[i * per_case];
    const int64_t position = per_case == 3 ? values[i * 3 + 1] : static_cast<int64_t>(i);
    const int64_t group = per_case == 3 ? values[i * 3 + 2] : rowid;
    if (position < 0 || static_cast<size_t>(position) >= manifest->vectors || index.position_.contains(rowid))
      return fail(ids.string() + ": damaged (a case at an invalid or second position)");
    index.members_[static_cast<size_t>(position)].push_back(rowid);
    index.position_[rowid] = position;
    index.group_of_[rowid] = group;
    auto& gp = index.group_positions_[group];
    if (gp.empty() || gp.back() != position) gp.push_back(position);
  }
  index.hashed_ = false;  // the duplicate lookup is built by the first add
  if (auto* h = dynamic_cast<faiss::IndexHNSWFlat*>(index.index_.get())) h->hnsw.efSearch = options.ef_search;
  IndexManifest m = *manifest;
  return std::pair<VectorIndex, IndexManifest>{std::move(index), std::move(m)};
}

}  // namespace spark
