// The paper's effectiveness metrics (§5.3) for one ranked list against a case's faulty elements, and paired
// significance tests for comparing two settings over the same cases.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace spark {

// Metrics of one case at one k. `predicted` is the ranked list (element keys, best first; repeats after the first
// occurrence are ignored, as a ranked list names an element once); `faulty` the case's faulty elements.
struct CaseMetrics {
  double precision = 0;    // |top-k ∩ F| / k
  double recall = 0;       // |top-k ∩ F| / |F|
  double hit = 0;          // 1 when some faulty element is in the top k
  double ap_paper = 0;     // (1/m) Σ_{j≤k} P(j)·rel(j), m = faulty elements found in the top k (the paper's AP@k)
  double ap_standard = 0;  // the same sum over min(|F|, k) (the usual AP@k)
  double rr = 0;           // 1 / rank of the first faulty element in the top k, else 0
};

CaseMetrics case_metrics(const std::vector<std::string>& predicted, const std::vector<std::string>& faulty, size_t k);

// Mean of the cases' metrics (Precision@k, Recall@k, Hit@k, MAP@k both ways, MRR@k).
CaseMetrics mean_metrics(const std::vector<CaseMetrics>& cases);

// McNemar's test on paired binary outcomes (Hit@k): b = A right and B wrong, c = A wrong and B right; the exact
// two-sided binomial p-value (b + c ≤ 50,000, else the χ² approximation with continuity correction).
double mcnemar_p(size_t b, size_t c);

// Wilcoxon signed-rank test on paired differences (AP@k of A minus of B): zero differences dropped, tied |d| get
// average ranks; exact two-sided p-value for up to 60 non-zero pairs, else the normal approximation with tie and
// continuity corrections. Returns 1 when every difference is zero.
double wilcoxon_p(const std::vector<double>& differences);

}  // namespace spark
