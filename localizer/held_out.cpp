#include "localizer/held_out.h"

#include <unordered_set>

namespace spark {

HeldOutSource::HeldOutSource(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const VectorIndex& index,
                             const VectorOf& vector_of, const HeldOutOptions& options)
    : kb_(kb), index_(index), vector_of_(vector_of), options_(options) {
  for (const auto& e : entries) {
    by_content_[e.content_key].push_back(e.rowid);
    entry_of_[e.rowid] = &e;
  }
}

Result<HeldOutMaterial> HeldOutSource::material(int64_t rowid) {
  HeldOutMaterial m;
  auto c = kb_.load(rowid);
  TRY(c);
  m.c = std::move(*c);
  if (options_.as_queried) options_.as_queried(m.c);
  const CaseEntry* e = entry_of_.at(rowid);
  std::unordered_set<int64_t> excluded(by_content_[e->content_key].begin(), by_content_[e->content_key].end());
  excluded.insert(rowid);
  auto v = vector_of_(rowid, m.c);
  TRY(v);
  auto hits = index_.search(v->data(), options_.r, std::nullopt, excluded);
  std::erase_if(hits, [&](const SearchHit& h) { return h.similarity < options_.similarity_floor; });
  for (const auto& h : hits) {
    auto it = loaded_.find(h.rowid);
    if (it == loaded_.end()) {
      if (loaded_.size() > 512) loaded_.clear();
      auto rc = kb_.load(h.rowid);
      TRY(rc);
      it = loaded_.emplace(h.rowid, std::move(*rc)).first;
    }
    append_faulty_lines(it->second, m.sims.size(), m.faulty);
    m.sims.push_back(h.similarity);
    m.ids.push_back(it->second.id);
  }
  return m;
}

Status for_each_held_out(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const std::vector<int64_t>& cases,
                         const VectorIndex& index, const VectorOf& vector_of, const HeldOutOptions& options,
                         StructureCache& cache, const std::function<Status(const HeldOut&)>& fn) {
  HeldOutSource source(kb, entries, index, vector_of, options);
  for (int64_t rowid : cases) {
    auto m = source.material(rowid);
    TRY(m);
    QueryView view = make_query_view(m->c, cache);
    if (auto s = fn(HeldOut{m->c, view, m->faulty, m->sims, m->ids}); !s) return s;
  }
  return {};
}

}  // namespace spark
