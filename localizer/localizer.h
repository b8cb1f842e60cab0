// The localizer: the paper's Algorithm 1 over the knowledge base.
//
//   D' = filter(τ_f, D, p)      policy.h
//   S  = search(τ_f, D', r)     SearchEngine (embedder + vector index)
//   X  = retrieve(S)            the retrieved cases' faulty lines
//   τ' = annotate(τ_f, X, ε)    lines within normalized Levenshtein ε get the marker
//   L  = rank(τ', k)            the built-in ranker here; the LLM (a later issue) takes τ' as its prompt
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "code/python_structure.h"
#include "code/structure_cache.h"
#include "formats/case.h"
#include "formats/defaults.h"
#include "line_features.h"
#include "policy.h"
#include "ranker.h"
#include "retrieval/embedder.h"
#include "retrieval/vector_index.h"
#include "store/knowledge_base.h"

namespace spark {

// The paper's annotation, written as a comment of the annotated file's language: "# !!! …" in Python,
// "// !!! …" in Java, JavaScript and TypeScript.
inline constexpr std::string_view kAnnotationText = "!!! high likelihood of being faulty !!!";
inline constexpr std::string_view kAnnotationMarker = "# !!! high likelihood of being faulty !!!";  // Python's
std::string annotation_marker(Language language);
// Cuts an annotation marker (in any language's comment syntax) and what follows it off `line`; false when it has
// none. A model's answer may quote annotated lines back.
bool strip_annotation_marker(std::string& line);

struct EmbedderConfig {
  std::string kind;  // builtin | openai; "" = as the index was built (open), builtin (build)
  HashedTfidfOptions builtin;
  OpenAiEmbedderOptions openai;
};

// The failing test's own lines per (file content, test id): small strings, so many can be kept, and cases that
// share a test-file version need no parse.
class ScopeCache {
 public:
  explicit ScopeCache(size_t max_bytes = 256u << 20) : max_bytes_(max_bytes) {}
  const std::string* find(uint64_t key) const;
  void put(uint64_t key, std::string scope);

 private:
  size_t max_bytes_, bytes_ = 0;
  std::unordered_map<uint64_t, std::string> map_;
};

// The embedding text of a case: error message, all files, the failing test's own function.
EmbedText embed_text(const Case& c, StructureCache& cache, ScopeCache* scopes = nullptr);

// Embedder + vector index, loaded from DIR/index and checked against the knowledge base.
class SearchEngine {
 public:
  // Loads the index. When the knowledge base has cases the index lacks (added since), they are embedded and added in
  // memory and `notes` says so; when the index cannot be trusted (damaged, other embedder, cases replaced), the error
  // says to run `spark index --rebuild`. A knowledge base with no index yet is an error naming that command.
  // `verify_vectors` false maps the vectors file after checking its size and header only (VectorIndexOptions): what
  // a query needs; an update or a build verifies every byte.
  static Result<std::unique_ptr<SearchEngine>> open(KnowledgeBase& kb, EmbedderConfig config,
                                                    std::vector<std::string>& notes, bool verify_vectors = true);
  Result<std::vector<float>> embed(const Case& c);
  std::vector<SearchHit> search(const std::vector<float>& query, size_t r,
                                const std::optional<std::vector<int64_t>>& allowed,
                                const std::unordered_set<int64_t>& excluded) const {
    return index_.search(query.data(), r, allowed, excluded);
  }
  const VectorIndex& index() const { return index_; }
  VectorIndex& index() { return index_; }
  // Saves the index with the cases embedded since it was loaded (after `spark import`), under the knowledge base's
  // current generation. The statistics and the ranker stay as `spark index` made them.
  Status persist(KnowledgeBase& kb);
  size_t added_since_load() const { return added_ids_.size(); }
  const RankerModel& ranker() const { return ranker_; }
  StructureCache& structures() { return structures_; }
  // Every case of the knowledge base as the index holds it (rowid order): from the index's cases file when the store
  // has not changed since it was saved, else from the store.
  const std::vector<CaseFacts>& facts() const { return facts_; }

 private:
  SearchEngine(std::unique_ptr<Embedder> e, VectorIndex i, RankerModel r)
      : embedder_(std::move(e)), index_(std::move(i)), ranker_(std::move(r)) {}
  std::unique_ptr<Embedder> embedder_;
  VectorIndex index_;
  RankerModel ranker_;
  StructureCache structures_;
  std::string embedder_identity_;
  std::vector<int64_t> added_ids_;          // embedded since load
  std::vector<VectorIndex::Extra> extras_;  // the loaded state's extra files (kept by persist)
  std::vector<CaseFacts> facts_;
  bool facts_from_store_ = false;  // read from the store: persist writes them as a new cases file
};

struct IndexReport {
  size_t cases = 0;
  size_t labelled = 0;
  std::string kind;      // flat | hnsw
  std::string embedder;  // identity
  std::string ranker;    // origin of the ranker weights
  double embed_seconds = 0, index_seconds = 0, train_seconds = 0;
  unsigned threads = 1;
  size_t versions = 0;  // distinct test-code versions embedded (built-in embedder)
  size_t scopes = 0;    // distinct (failing test, version) pairs
  size_t vectors = 0;   // distinct vectors in the index (identical ones share an entry)
};

struct IndexBuildOptions {
  VectorIndexOptions index;
  TrainingOptions training;
  size_t r = 1;  // neighbours used when learning the ranker (the localizer's defaults)
  double epsilon = defaults::kEpsilon;
  double similarity_floor = defaults::kSimilarityFloor;
  size_t max_training_cases = 500;  // a 12-weight logistic model needs no more; bounds `spark index` time
  unsigned threads = 0;             // worker threads for embedding; 0: SPARK_THREADS, else the machine's cores
};

// The worker threads `spark index` uses: `asked`, else SPARK_THREADS, else the machine's cores (at most 16).
unsigned index_threads(unsigned asked);

// One labelled case localized against the rest of the knowledge base: itself and its exact duplicates excluded,
// its labels unseen by retrieval. `view` holds its lines; `faulty` the retrieved faulty lines (X) and `similarity`
// the retrieved cases' similarities. The material both for learning the ranker and for leave-one-out evaluation.
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
};

// Calls `fn` for each case of `cases` (rowids of labelled cases), retrieving with `index` and the vectors
// `vector_of` gives for a stored case.
Status for_each_held_out(KnowledgeBase& kb, const std::vector<CaseEntry>& entries, const std::vector<int64_t>& cases,
                         const VectorIndex& index,
                         const std::function<Result<std::vector<float>>(int64_t, const Case&)>& vector_of,
                         const HeldOutOptions& options, StructureCache& cache,
                         const std::function<Status(const HeldOut&)>& fn);

// Embeds every case, fits the built-in embedder's statistics, builds and saves the vector index, learns the ranker.
Result<IndexReport> build_index(KnowledgeBase& kb, EmbedderConfig config, const IndexBuildOptions& options);

// How S = search(τ_f, D', r) picks cases: by similarity (Algorithm 1), at random from D' (the paper's Random mode,
// seeded per query), or not at all (the baseline).
enum class Retrieval { similar, random, none };

struct LocalizeOptions {
  Policy policy;
  size_t r = 1;
  double epsilon = defaults::kEpsilon;
  size_t k = 5;
  Level level = Level::line;
  double similarity_floor = defaults::kSimilarityFloor;  // retrieved cases below this cosine similarity are not used
  Retrieval retrieval = Retrieval::similar;
  uint64_t seed = 0;  // Retrieval::random: the draw is a function of (seed, query id)
  // The built-in ranker to use instead of the index's (evaluation: a model that never saw the query's labels).
  const RankerModel* ranker = nullptr;
  // Explain one line (`spark localize --explain`): every feature's value and contribution. An empty path means the
  // test's own file.
  std::optional<LineRef> explain;
};

struct RetrievedCase {
  int64_t rowid = 0;
  std::string id, test_id, project;
  std::optional<std::string> faulty_commit, fixed_commit;
  double similarity = 0;
  std::vector<LineRef> faulty_lines;
  std::vector<std::string> faulty_text;
};

struct Annotation {
  LineRef line;           // in the query
  double distance = 0;    // w(l): min normalized Levenshtein distance to a retrieved faulty line
  size_t case_index = 0;  // which retrieved case
  LineRef matched;        // which of its faulty lines
};

struct RankedElement {
  std::string path;
  int line = 0;      // first line of the element
  int end_line = 0;  // last line (= line at line level)
  double score = 0;
  std::string code;  // the element's first line
  bool annotated = false;
  std::vector<std::string> reasons;
  std::string source = "builtin";  // builtin | llm | filled (the LLM gave fewer than k usable ids)
};

// What the LLM stage did for one failure (absent when no LLM was asked).
struct LlmReport {
  std::string mode, model, endpoint;
  bool used = false;  // the answer ranked the elements (false: the built-in ranker's, see error)
  std::string error;  // why the LLM's answer was not used
  size_t prompt_tokens = 0, completion_tokens = 0;
  bool usage_reported = false;  // false: estimated (src/code/tokens.h)
  double seconds = 0;
  int attempts = 0;
  bool structured = false;
  bool cached = false;        // the answer came from the answer cache (spark eval)
  std::string raw_answer;     // for audit (--format json)
  std::string answer_format;  // json | text | none
  size_t from_llm = 0, filled = 0, out_of_range = 0, duplicates = 0, not_code = 0;
  size_t shown_lines = 0, total_lines = 0;
  bool truncated = false;
  std::map<std::string, size_t> redactions;
  std::string prompt;  // kept when asked (--show-prompt)
};

// One line's score taken apart: the ranker's features, each weight × value (log-odds). `score` is the line's
// probability of being faulty (the gate's on the failing statement when the model is gated).
struct LineExplanation {
  LineRef line;
  std::string code;
  struct Term {
    std::string feature;
    double value = 0, weight = 0, contribution = 0;
  };
  std::vector<Term> terms;  // every feature, in the model's order
  double score = 0;         // the line's own score (an element's is its best line's)
  size_t rank = 0;          // its element's rank among all elements (1 = first); 0 when it is not ranked
  std::string note;         // why it could not be explained, when it could not
};

// The gate's verdict on the failing statement (absent when no traceback frame lies in the test files).
struct GateReport {
  LineRef line;                 // the failing statement's line (the deepest frame in the test files)
  double probability = 0;       // that the failing statement itself is the fault
  std::string exception;        // the failure's exception class ("" if none was read)
  std::string form;             // its group: assertion | type | name | lookup | value | other | none
  bool raised_in_test = false;  // raised in the test's own code, not beneath it in the code under test
  bool generic_check = false;   // the assertion checks truth or a None/True/False/0/1/empty value
};

struct Localization {
  std::string test_id;
  std::optional<GateReport> gate;
  std::optional<LineExplanation> explanation;
  size_t knowledge_base_size = 0;  // labelled cases
  size_t filtered_size = 0;        // after the policy
  std::vector<RetrievedCase> retrieved;
  std::vector<Annotation> annotations;
  std::vector<RankedElement> ranked;
  std::string ranker;              // "builtin (trained on N labelled cases)" …
  bool degraded = false;           // no usable similar case: baseline behaviour, no annotations
  std::vector<std::string> notes;  // said on stderr by the command line
  std::optional<LlmReport> llm;
};

class Localizer {
 public:
  // `engine` may be null: an empty or missing knowledge base degrades to the baseline (no retrieval).
  Localizer(KnowledgeBase* kb, SearchEngine* engine) : kb_(kb), engine_(engine) {}

  // Localizes one failing test. The query never retrieves itself: cases with its id or its exact content are
  // excluded. `extra_excluded` excludes more (leave-one-out evaluation).
  Result<Localization> localize(const Case& query, const LocalizeOptions& options,
                                const std::unordered_set<int64_t>& extra_excluded = {});

  // The annotated test code τ' as the model sees it: "<line>: <code>  # !!! … !!!", blank lines hidden,
  // the file's own line numbers.
  static std::string render_annotated(const Case& query, const std::vector<Annotation>& annotations);

  KnowledgeBase* knowledge_base() const { return kb_; }

 private:
  KnowledgeBase* kb_;
  SearchEngine* engine_;
  StructureCache fallback_structures_;
  // The labelled rowids (ascending) of the engine's cases, made by the first query.
  // The labelled cases' rowids, ascending (made on first use).
  const std::vector<int64_t>& labelled_rowids();
  std::optional<std::vector<int64_t>> labelled_rowids_;
};

}  // namespace spark
