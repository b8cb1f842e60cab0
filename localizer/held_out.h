// Held-out localization: each labelled case localized against the rest of the knowledge base, itself and its exact
// duplicates excluded, its labels unseen by retrieval. The material both for learning the built-in ranker
// (index_build.h) and for leave-one-out evaluation (eval/evaluation.h).
//
// Ownership: a HeldOutSource keeps references to the knowledge base, its entries, the index and `vector_of`, which
// must outlive it, and a bounded cache of retrieved cases of its own. Thread safety: one thread per source (it reads
// the store through one connection). Failures of the store or of `vector_of` are returned as errors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "code/structure_cache.h"
#include "formats/case.h"
#include "formats/defaults.h"
#include "localizer/line_features.h"
#include "retrieval/vector_index.h"
#include "store/knowledge_base.h"

namespace spark {

// One labelled case localized against the rest: `view` holds its lines; `faulty` the retrieved faulty lines (X) and
// `similarity` the retrieved cases' similarities.
struct HeldOut {
  const Case& held_out;
  QueryView& view;
  const std::vector<RetrievedFaultyLine>& faulty;
  const std::vector<double>& similarity;
  const std::vector<std::string>& retrieved_ids;
};

struct HeldOutOptions {
  size_t r = 1;
  double similarity_floor = defaults::kSimilarityFloor;
  // The held-out case as it is queried, when that differs from how it is stored (an evaluation across failure
  // forms replaces its error message with the same failure's in another form); applied before it is embedded.
  std::function<void(Case&)> as_queried;
};

// A stored case's vector (from the index, or embedded afresh).
using VectorOf = std::function<Result<std::vector<float>>(int64_t rowid, const Case& c)>;

// What localizing one held-out case needs before its view: the case, and the faulty lines of the cases retrieved for
// it (itself and its exact duplicates excluded).
struct HeldOutMaterial {
  Case c;
  std::vector<RetrievedFaultyLine> faulty;
  std::vector<double> sims;
  std::vector<std::string> ids;
};

class HeldOutSource {
 public:
  HeldOutSource(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const VectorIndex& index,
                const VectorOf& vector_of, const HeldOutOptions& options);
  Result<HeldOutMaterial> material(int64_t rowid);

 private:
  KnowledgeBase& kb_;
  const VectorIndex& index_;
  const VectorOf& vector_of_;
  HeldOutOptions options_;
  std::unordered_map<std::string, std::vector<int64_t>> by_content_;
  std::unordered_map<int64_t, const CaseEntry*> entry_of_;
  std::unordered_map<int64_t, Case> loaded_;  // retrieved cases, bounded
};

// Calls `fn` for each case of `cases` (rowids of labelled cases), retrieving with `index` and the vectors
// `vector_of` gives for a stored case.
Status for_each_held_out(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const std::vector<int64_t>& cases,
                         const VectorIndex& index, const VectorOf& vector_of, const HeldOutOptions& options,
                         StructureCache& cache, const std::function<Status(const HeldOut&)>& fn);

}  // namespace spark
