// The built-in ranker: a logistic model over the line features of features.h.
//
// Its weights are learnt from the knowledge base itself at `spark index` (leave-one-out: every labelled case is
// localized against the others, its faulty lines are the positives), so it learns how far this team's retrieved
// cases can be trusted, how often the failing line is the faulty one, which statement kinds tend to be faulty.
// Below `min_training_cases` labelled cases it uses the documented prior weights (docs/RANKER.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "result.h"
#include "line_features.h"

namespace spark {

struct RankerModel {
  FeatureVector weights{};
  KindPrior kind_prior;
  std::string origin = "prior";  // "prior" or "trained on N cases"
  size_t training_cases = 0;
  size_t training_rows = 0;

  static RankerModel prior();
  double score(const FeatureVector& x) const;

  Status save(const std::filesystem::path& path) const;
  static Result<RankerModel> load(const std::filesystem::path& path);
};

// One labelled case's training material: its lines' features and which are faulty.
struct TrainingCase {
  std::vector<FeatureVector> rows;
  std::vector<char> faulty;
};

struct TrainingOptions {
  size_t min_training_cases = 20;
  size_t negatives_per_case = 300;  // deterministic subsample of the non-faulty lines
  double l2 = 1.0;                  // ridge penalty on the non-bias weights
};

// Fits the weights (balanced per case: each case's positives and negatives carry equal total weight), by Newton's
// method. Returns the prior when there are too few cases with positives.
RankerModel train_ranker(const std::vector<TrainingCase>& cases, const KindPrior& prior, const TrainingOptions& options);

// Kind prior from labelled cases: counts of faulty kinds and of kinds of lines in the failing tests' reach.
struct KindCounts {
  std::unordered_map<std::string, double> faulty, reach;
  void add(const QueryView& view, const std::vector<LineRef>& faulty_lines);
  void add_line(const std::string& kind, bool in_reach, bool is_faulty);
  KindPrior prior() const;
};

}  // namespace spark
