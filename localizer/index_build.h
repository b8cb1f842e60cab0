// `spark index`: embeds every case of a knowledge base, fits the built-in embedder's statistics, builds and saves the
// vector index, and learns the built-in ranker from held-out localizations of a sample of the labelled cases. And the
// ranker's learning between builds: as labelled cases arrive (`spark record`, `import`, `localize`), it learns again
// once their count has grown by a margin since it last learnt (next_training_at, learn_ranker_if_due).
//
// Ownership: nothing is kept after build_index returns; the index folder's files are its output. Thread safety: one
// build per knowledge base at a time (the manifest switch is atomic, so a reader sees the old or the new state).
// Failures (the store, the embedder, the disk) are returned as errors; the old index stays usable after one.
#pragma once

#include <string>

#include "formats/defaults.h"
#include "localizer/case_embedding.h"
#include "localizer/ranker.h"
#include "localizer/search_engine.h"
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
  size_t r = defaults::kRetrieved;  // neighbours used when learning the ranker (the localizer's defaults)
  double epsilon = defaults::kEpsilon;
  double similarity_floor = defaults::kSimilarityFloor;
  // A 19-weight model needs no more; bounds the time of `spark index` and of every retraining (docs/RANKER.md).
  size_t max_training_cases = 500;
  // Between builds the ranker learns again once the labelled cases reach next_training_at(the count it last learnt
  // at): first at training.min_training_cases, then each time they have grown by this share (docs/RANKER.md).
  double learn_again_growth = 0.25;
  unsigned threads = 0;  // worker threads for embedding; 0: SPARK_THREADS, else the machine's cores
};

Result<IndexReport> build_index(KnowledgeBase& kb, EmbedderConfig config, const IndexBuildOptions& options);

// The count of labelled cases at which a ranker that learnt (or last tried to) at `labelled_then` learns again:
// training.min_training_cases while below it, else labelled_then grown by learn_again_growth (at least one case more).
size_t next_training_at(size_t labelled_then, const IndexBuildOptions& options);

// The ranker the index folder's manifest names; nullopt when there is no index yet.
Result<std::optional<RankerModel>> load_saved_ranker(const std::filesystem::path& index_dir);

struct RankerRelearnt {
  std::string was;  // the replaced ranker's origin ("prior", "trained on N labelled cases")
  RankerModel now;  // the new one (its origin, labelled_cases, train_seconds)
};

// Learns `engine`'s ranker again when the labelled cases of its index (the cases added since the build included)
// have reached next_training_at(the ranker's labelled_cases): as build_index learns it (the same sample bound, the
// engine's index and statistics), and sets it on the engine (SearchEngine::replace_ranker: the engine's next
// persist() saves it). nullopt when not due. On an error the engine keeps its ranker.
Result<std::optional<RankerRelearnt>> learn_ranker_if_due(KnowledgeBase& kb, SearchEngine& engine,
                                                          const IndexBuildOptions& options = {});

}  // namespace spark
