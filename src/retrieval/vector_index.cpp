#include "retrieval/vector_index.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "retrieval/faiss_adapter.h"

namespace spark {

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
        hits.emplace_back(p, finite_or_lowest(inner_product(query, stored(p), dimension_)));
      }
    }
  }
}

namespace {

// One query is searched on the calling thread: FAISS starts an OpenMP team for every search call, even of one query,
// whose spare threads only spin (a third of an in-process localization's time on 2 cores, measured). The caller's
// setting is back after the search.
class OneSearchThread {
 public:
  OneSearchThread() : before_(omp_get_max_threads()) {
    if (before_ != 1) omp_set_num_threads(1);
  }
  ~OneSearchThread() {
    if (before_ != 1) omp_set_num_threads(before_);
  }
  OneSearchThread(const OneSearchThread&) = delete;
  OneSearchThread& operator=(const OneSearchThread&) = delete;

 private:
  int before_;
};

}  // namespace

std::vector<SearchHit> VectorIndex::search_exact(const float* query, size_t r) const {
  if (table_.positions() == 0 || r == 0) return {};
  const OneSearchThread one_thread;
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
  const OneSearchThread one_thread;
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
  if (!std::is_sorted(subset.rowids.begin(), subset.rowids.end()))
    std::sort(subset.rowids.begin(), subset.rowids.end());
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

}  // namespace spark
