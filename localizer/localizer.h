// The localizer: the paper's Algorithm 1 over the knowledge base.
//
//   D' = filter(τ_f, D, p)      policy.h
//   S  = search(τ_f, D', r)     search_engine.h (embedder + vector index)
//   X  = retrieve(S)            the retrieved cases' faulty lines
//   τ' = annotate(τ_f, X, ε)    lines within normalized Levenshtein ε get the marker
//   L  = rank(τ', k)            the built-in ranker (ranker.h); the LLM stage (llm_stage.h) takes τ' as its prompt
//
// Each step is a function of localizer.cpp over plain data (filter_step … rank_step); Localizer::localize runs them in
// order. The index a search needs is made by index_build.h; held-out runs (ranker learning, evaluation) by held_out.h.
//
// Ownership: a Localizer does not own the knowledge base or the search engine it is given; both must outlive it.
// Thread safety: one thread per Localizer (its structure cache and the engine's embedder are not shared-safe).
// Failures of the store or the embedder are returned as errors; a knowledge base with no usable similar case is not
// an error (the answer is degraded to the baseline and says so).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "code/structure_cache.h"
#include "formats/case.h"
#include "formats/defaults.h"
#include "formats/triage.h"
#include "localizer/line_features.h"
#include "localizer/policy.h"
#include "localizer/ranker.h"
#include "localizer/search_engine.h"
#include "localizer/suggest.h"
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

// How S = search(τ_f, D', r) picks cases: by similarity (Algorithm 1), at random from D' (the paper's Random mode,
// seeded per query), or not at all (the baseline).
enum class Retrieval { similar, random, none };

struct LocalizeOptions {
  Policy policy;
  size_t r = defaults::kRetrieved;
  double epsilon = defaults::kEpsilon;
  size_t k = defaults::kTopK;
  Level level = Level::line;
  double similarity_floor = defaults::kSimilarityFloor;  // retrieved cases below this cosine similarity are not used
  Retrieval retrieval = Retrieval::similar;
  uint64_t seed = 0;  // Retrieval::random: the draw is a function of (seed, query id)
  // Seconds from the start of localize() after which no more lines are compared with the retrieved faulty lines
  // (the rest are ranked without them and a note says so); 0 stops before the first.
  double deadline = defaults::kAnnotationDeadline;
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
  std::map<LineRef, std::vector<std::string>> fixes;  // how its fix replaced each faulty line (when it kept it)
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
  // The window the prompt was cut to fit, where that number came from ("llm.context_tokens", the server's GET /props,
  // its refusal of a longer prompt), and the model's tokens per estimated token it was built with.
  size_t context_tokens = 0;
  std::string context_source;
  double token_scale = 1;
  bool counted = false;  // the server counted the prompt's tokens (llama.cpp's /tokenize) before it was sent
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

// What changed since the failing test last passed, on the lines it runs (Case::change read against the test's scope):
// the ranker's change features line by line, and the verdict's evidence. Absent when no last pass is known.
struct ChangeEvidence {
  std::string last_pass, break_commit;  // break_commit: "" when not known
  struct Changed {
    LineRef line;
    std::string commit;  // "" : the work tree's
  };
  std::vector<Changed> changed;  // lines the test runs that differ from their version at the last pass
  struct Uses {
    LineRef line;
    std::string token;  // the product name, or the old literal
    bool literal = false;
    std::string path, commit;  // where and in which commit the product changed it
  };
  std::vector<Uses> uses;        // lines the test runs that use a name or hold a value a product change changed
  size_t changed_elsewhere = 0;  // changed lines of its files the test does not run (other tests' code)
  size_t product_changes = 0;    // product names and literals changed in all
};

struct Localization {
  std::string test_id;
  std::string language;  // the test file's (the file holding the test, else the first): language_name's spelling
  std::optional<GateReport> gate;
  std::optional<LineExplanation> explanation;
  size_t knowledge_base_size = 0;  // labelled cases
  size_t filtered_size = 0;        // after the policy
  std::vector<RetrievedCase> retrieved;
  std::vector<Annotation> annotations;
  std::vector<RankedElement> ranked;
  std::vector<Suggestion> suggestions;  // edits a similar case's fix suggests (suggest.h); never applied
  std::optional<ChangeEvidence> change;  // what changed since its last pass, on the lines it runs (when known)
  std::optional<TestHistory> history;   // the test's recorded runs (filled by the command line from the store)
  std::optional<Verdict> verdict;       // whose fault (verdict.h; filled with the history)
  std::string ranker;                   // "builtin (trained on N labelled cases)" …
  bool degraded = false;                // no usable similar case: baseline behaviour, no annotations
  std::vector<std::string> notes;       // said on stderr by the command line
  std::optional<LlmReport> llm;
};

// The engine's cases by the hashes of their ids and of their content keys (CaseFacts), for finding a query's own
// case and its exact duplicates without a pass over every case.
struct FactsByHash {
  std::vector<std::pair<uint64_t, int64_t>> id, key;  // (hash, rowid), sorted
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
  // Made at the second localization (FactsByHash); null before.
  const FactsByHash* facts_by_hash();
  std::optional<FactsByHash> facts_by_hash_;
  size_t localized_ = 0;
};

}  // namespace spark
