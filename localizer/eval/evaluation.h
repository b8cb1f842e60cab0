// `spark eval`: the paper's experiments (§5.2-5.3, §6) on any labelled corpus. Leave-one-out: each labelled case in
// turn is the query, its labels hidden, itself and its exact duplicates excluded from its knowledge base, everything
// else per the chosen policy. Predictions are made at line level and mapped to statements, CFG blocks or functions
// afterwards, as the paper does. Deterministic given the seed (and, for LLM modes, the cached answers).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "code/structure_cache.h"
#include "formats/defaults.h"
#include "localizer/eval/metrics.h"
#include "localizer/held_out.h"
#include "localizer/llm_stage.h"
#include "localizer/localizer.h"
#include "localizer/prompt.h"
#include "store/knowledge_base.h"

namespace spark {

// What one run of the evaluation ranks with: one of the localizer's modes (`builtin`, or an LLM mode), or a reference
// ranking the localizer does not offer: `traceback` = the lines the traceback names in the test code, deepest first;
// `annotation` = the annotated lines, closest first. Parsed once from its name (`spark eval --mode`).
class EvalMode {
 public:
  enum class Reference { traceback, annotation };
  EvalMode(Mode mode) : value_(mode) {}                 // NOLINT(google-explicit-constructor): a mode is one
  EvalMode(Reference reference) : value_(reference) {}  // NOLINT(google-explicit-constructor)
  // Every name `--mode` takes; an unknown one is an error that lists them.
  static Result<EvalMode> parse(std::string_view name);
  std::string_view name() const;
  // The localizer's mode; nullopt for a reference.
  std::optional<Mode> mode() const;
  bool is(Reference reference) const;
  bool needs_llm() const;
  // Whether its localizations mark annotated lines: builtin, the references, and the LLM modes that annotate.
  bool annotates() const;
  bool operator==(const EvalMode&) const = default;

 private:
  std::variant<Mode, Reference> value_;
};

// The settings one experiment runs with.
struct EvalSetting {
  EvalMode mode = Mode::builtin;
  std::string policy = "all";
  double epsilon = defaults::kEpsilon;
  size_t r = 1;
  std::string label() const;  // "default eps=0.05 all r=1"
};

struct EvalOptions {
  std::vector<EvalMode> modes = {Mode::builtin};
  std::vector<size_t> ks = {1, 3, 5, 10};
  std::vector<Level> levels = {Level::line};
  std::vector<std::string> policies = {"all"};
  std::vector<double> epsilons = {defaults::kEpsilon};
  std::vector<size_t> rs = {1};
  double window_fraction = defaults::kWindowFraction;
  double similarity_floor = defaults::kSimilarityFloor;
  uint64_t seed = 0;
  // The built-in ranker's weights and statement-kind prior are learnt from the knowledge base, which holds the query's
  // own labels. So each query is ranked by a model learnt without its fold: cases are split into this many folds by
  // a hash of their id, and each fold's model is trained on the others (leave-one-fold-out). 0 or 1 = the index's.
  size_t ranker_folds = 5;
  LlmStageOptions stage;        // templates, redaction, context bounds for the LLM modes
  LlmClient* client = nullptr;  // required for LLM modes
  // Progress: the setting being run, cases done, cases in all.
  std::function<void(const std::string&, size_t, size_t)> progress;
};

struct EvalCase {
  std::string id, dataset, test_id;
  std::vector<LineRef> faulty;
  size_t lines = 0;  // non-blank lines of its files
};

// What one case gave under one setting (and, for LLM modes, one requested k). Not a test outcome (the miner's
// passed/failed/error): the localization's result, scored by the metrics.
struct CaseResult {
  std::vector<LineRef> predicted;  // line level, best first
  std::vector<LineRef> annotated_lines;
  size_t annotated = 0, kb_size = 0;
  std::optional<double> similarity;  // the most similar retrieved case's cosine (none retrieved: nullopt)
  size_t tokens_in = 0, tokens_out = 0, filled = 0;
  bool tokens_estimated = false, llm_used = false, cached = false;
  double seconds = 0;
  std::string error;        // why the LLM's answer was not used
  std::string answer_form;  // structured | json | text | none (no answer came)
};

struct SettingRun {
  EvalSetting setting;
  size_t k_requested = 0;           // LLM modes ask for exactly k; 0 = one ranking serves every k
  std::vector<CaseResult> results;  // parallel to Evaluation::cases
  double wall_seconds = 0;
};

struct Evaluation {
  std::vector<std::string> ranker_origins;  // how each fold's ranker was learnt
  std::vector<EvalCase> cases;
  std::vector<SettingRun> runs;
  EvalOptions options;
  double seconds = 0;
};

// Runs every setting over the labelled `cases` against the knowledge base (which holds them, indexed).
Result<Evaluation> run_evaluation(KnowledgeBase& kb, SearchEngine& engine, const std::vector<Case>& cases,
                                  const EvalOptions& options);

// Element keys of the cases' lines at each level ("path:line", or "path#unit"). Each distinct file version is parsed
// once, for all levels, the first time a level above line is asked for.
class ElementKeys {
 public:
  ElementKeys(const Evaluation& e, const std::vector<Case>& cases);
  std::string key(size_t case_index, const LineRef& ref, Level level);

 private:
  struct Units {
    std::vector<int> statement, block, function;  // by line - 1
  };
  const Units* units(size_t case_index, const std::string& path);
  std::vector<const Case*> cases_;  // parallel to Evaluation::cases
  std::unordered_map<uint64_t, Units> by_content_;
  StructureCache structures_{4};
};

// Per-case metrics of a run at a level and k (the run's requested k, or any k for a one-ranking run).
std::vector<CaseMetrics> run_case_metrics(const Evaluation& e, const SettingRun& run, Level level, size_t k,
                                          ElementKeys& keys);

}  // namespace spark
