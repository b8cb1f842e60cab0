// `spark index`: embeds every case of a knowledge base, fits the built-in embedder's statistics, builds and saves the
// vector index, and learns the built-in ranker from held-out localizations of a sample of the labelled cases.
//
// Ownership: nothing is kept after build_index returns; the index folder's files are its output. Thread safety: one
// build per knowledge base at a time (the manifest switch is atomic, so a reader sees the old or the new state).
// Failures (the store, the embedder, the disk) are returned as errors; the old index stays usable after one.
#pragma once

#include <string>

#include "case_embedding.h"
#include "formats/defaults.h"
#include "ranker.h"
#include "retrieval/vector_index.h"
#include "store/knowledge_base.h"

namespace spark {

struct IndexReport {
  size_t cases = 0;
  size_t labelled = 0;
  std::string kind;      // flat | hnsw
  std::string embedder;  // identity
  std::string ranker;    // origin of the ranker weights
  double embed_seconds = 0, index_seconds = 0, train_seconds = 0;
  unsigned threads = 1;
  size_t versions = 0;        // distinct test-code versions embedded (built-in embedder)
  size_t test_functions = 0;  // distinct (failing test, version) pairs
  size_t vectors = 0;         // distinct vectors in the index (identical ones share an entry)
  // An HNSW index is checked against an exact search: up to kRecallSample stored vectors spread over the index, each
  // searched with itself excluded; `recall_matched` of them found a neighbour as similar as the exact best.
  size_t recall_checked = 0, recall_matched = 0;
  double recall_seconds = 0;
};

inline constexpr size_t kRecallSample = 32;

struct IndexBuildOptions {
  VectorIndexOptions index;
  TrainingOptions training;
  size_t r = 1;  // neighbours used when learning the ranker (the localizer's defaults)
  double epsilon = defaults::kEpsilon;
  double similarity_floor = defaults::kSimilarityFloor;
  size_t max_training_cases = 500;  // a 12-weight logistic model needs no more; bounds `spark index` time
  unsigned threads = 0;             // worker threads for embedding; 0: SPARK_THREADS, else the machine's cores
};

Result<IndexReport> build_index(KnowledgeBase& kb, EmbedderConfig config, const IndexBuildOptions& options);

}  // namespace spark
