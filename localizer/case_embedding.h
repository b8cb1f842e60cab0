// A case as the embedder sees it, and the passes that embed a whole knowledge base.
//
// embed_text() makes a case's three blocks (error message, all files, the failing test's own function);
// TestFunctionCache keeps the last of these per (test-file version, test id) so cases that share a version need no
// parse. embed_stored_cases() embeds stored cases with the built-in embedder, each test-file version and each failing
// test's own function once however many cases share them, on worker threads (base/work_pool.h).
//
// Ownership: nothing here owns the knowledge base or the embedder it is given. Thread safety: TestFunctionCache and the
// StructureCache passed in are for one thread. Failures (the store, a damaged case) are returned as errors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "code/structure_cache.h"
#include "formats/case.h"
#include "retrieval/embedder.h"
#include "store/knowledge_base.h"

namespace spark {

struct EmbedderConfig {
  std::string kind;  // builtin | openai; "" = as the index was built (open), builtin (build)
  HashedTfidfOptions builtin;
  OpenAiEmbedderOptions openai;
};

// An error unless `config.kind` names a known embedder with what it needs (the openai one: a base URL).
Status check_embedder_kind(const EmbedderConfig& config);
std::unique_ptr<Embedder> make_embedder(const EmbedderConfig& config);

// The failing test's own lines per (file content, test id): small strings, so many can be kept, and cases that
// share a test-file version need no parse.
class TestFunctionCache {
 public:
  explicit TestFunctionCache(size_t max_bytes = 256u << 20) : max_bytes_(max_bytes) {}
  const std::string* find(uint64_t key) const;
  void put(uint64_t key, std::string text);

 private:
  size_t max_bytes_, bytes_ = 0;
  std::unordered_map<uint64_t, std::string> map_;
};

// The embedding text of a case: error message, all files, the failing test's own function.
EmbedText embed_text(const Case& c, StructureCache& cache, TestFunctionCache* functions = nullptr);

// The worker threads `spark index` uses: `asked`, else SPARK_THREADS, else the machine's cores (at most 16).
unsigned index_threads(unsigned asked);

// Batches of (rowids, row-major vectors), in rowid order.
using VectorSink = std::function<Status(const std::vector<int64_t>&, const std::vector<float>&)>;

struct StoredEmbedding {
  size_t cases = 0;           // cases embedded
  size_t versions = 0;        // distinct test-code versions among them
  size_t test_functions = 0;  // distinct (failing test, version) pairs
};

struct StoredEmbeddingOptions {
  const std::vector<int64_t>* only = nullptr;  // embed these rowids; null: every case of the store
  size_t expected = 0;                         // cases the store must yield (a case with no files is damage)
  bool fit = false;                            // first fit the embedder's statistics over the cases embedded
  unsigned threads = 1;
  // Called on a worker thread once per test-code version that labelled cases share, with their rowids and stored
  // records (KnowledgeBase::records) and the version's files (paths, contents): what `spark index` keeps of a case
  // beside the vectors (index_files::kLabels) needs no second read of the contents.
  std::function<void(unsigned worker, const std::vector<int64_t>& rowids, const std::vector<std::string>& records,
                     const std::vector<std::string>& paths, const std::vector<std::string>& contents)>
      each_labelled;
};

// Embeds stored cases with the built-in embedder; `sink` gets their vectors in rowid order, bit-identical to
// embedding each case alone with embed_text().
Result<StoredEmbedding> embed_stored_cases(KnowledgeBase& kb, HashedTfidfEmbedder& embedder,
                                           const StoredEmbeddingOptions& options, const VectorSink& sink);

}  // namespace spark
