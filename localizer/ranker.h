// The built-in ranker: a logistic model over the line features of features.h.
//
// Its weights are learnt from the knowledge base itself at `spark index` (leave-one-out: every labelled case is
// localized against the others, its faulty lines are the positives), so it learns how far this team's retrieved
// cases can be trusted, how often the failing line is the faulty one, which statement kinds tend to be faulty.
// Below `min_training_cases` labelled cases it uses the documented prior weights (docs/RANKER.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "localizer/line_features.h"

namespace spark {

// The gate: a logistic model of P(the failing statement itself is the fault | the failure's form), learnt from the
// knowledge base's labelled cases that have a failing statement; below the minimum, documented prior weights.
struct GateModel {
  GateVector weights{};
  std::string origin = "prior";
  static GateModel prior();
  double log_odds(const GateVector& g) const;
  double probability(const GateVector& g) const;
};

// Sets x[kGate] on the failing statement's rows (x[kTracebackLine] > 0): the gate's log-odds, clamped to ±6.
void apply_gate(const GateModel& gate, const GateVector& g, std::vector<FeatureVector>& rows);
void apply_gate(const GateModel& gate, QueryView& view);

struct RankerModel {
  FeatureVector weights{};
  GateModel gate;
  KindPrior kind_prior;
  std::string origin = "prior";  // "prior" or "trained on N cases"
  size_t training_cases = 0;
  size_t training_rows = 0;
  // When it learnt (or last tried to, and kept the prior): the knowledge base's labelled cases then (the count the
  // retraining margin grows from, index_build.h), the time (Unix seconds; 0 when unknown: a model saved before these
  // were kept) and how long learning took.
  size_t labelled_cases = 0;
  int64_t trained_at = 0;
  double train_seconds = 0;

  static RankerModel prior();
  double score(const FeatureVector& x) const;
  // Each row's probability of being a faulty line: sigmoid(w·x) (the gate reaches it through x[kGate]).
  std::vector<double> probabilities(const std::vector<FeatureVector>& rows) const;

  Status save(const std::filesystem::path& path) const;
  static Result<RankerModel> load(const std::filesystem::path& path);
};

// One labelled case's training material: its lines' features and which are faulty.
struct TrainingCase {
  std::vector<FeatureVector> rows;
  std::vector<char> faulty;
  bool has_stop = false;  // the gate's material: its inputs, and whether the failing statement holds a faulty line
  GateVector gate{};
  bool gate_label = false;
};

// The case's training material from a featured view and its labels.
TrainingCase training_case(const QueryView& view, const std::vector<LineRef>& faulty_lines);

// Deterministic subsample of `negatives` (row indices) to at most n, by a hash of (case index, row index): the sample
// train_ranker takes of the case at `case_index`.
void sample_negatives(size_t case_index, std::vector<size_t>& negatives, size_t n);
// Drops the rows train_ranker would not sample (keeps every faulty row), so a training
// set of large test files stays small. `case_index` is the case's position in the vector given to train_ranker.
void thin_training_case(TrainingCase& tc, size_t case_index, size_t negatives_per_case);

struct TrainingOptions {
  size_t min_training_cases = 20;
  size_t negatives_per_case = 300;  // deterministic subsample of the non-faulty lines
  double l2 = 1.0;                  // ridge penalty on the non-bias weights
  size_t gate_folds = 5;            // the ranker learns from gate values cross-fitted over this many folds
};

// Fits the weights pairwise (RankNet with a linear scorer: logistic regression on the differences of a case's faulty
// and sampled non-faulty lines, each case's pairs weighing one in all), by Newton's method, then the bias and scale
// on the lines (Platt scaling) so that scores stay probabilities. Returns the prior when there are too few cases with
// positives.
// Takes the cases by value: it writes the cross-fitted gate values into their rows (move them in; they are large).
RankerModel train_ranker(std::vector<TrainingCase> cases, const KindPrior& prior, const TrainingOptions& options);

// Kind prior from labelled cases: counts of faulty kinds and of kinds of lines in the failing tests' reach.
struct KindCounts {
  std::unordered_map<std::string, double> faulty, reach;
  void add(const QueryView& view, const std::vector<LineRef>& faulty_lines);
  void add_line(const std::string& kind, bool in_reach, bool is_faulty);
  KindPrior prior() const;
};

}  // namespace spark
