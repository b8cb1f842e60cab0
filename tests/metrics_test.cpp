// The paper's metrics and the significance tests, against values computed by hand.
#include "localizer/eval/metrics.h"

#include <gtest/gtest.h>

namespace spark::SPARK_TEST_FILE_ID {
namespace {

TEST(metrics, precision_recall_hit_ap_and_rr_by_hand) {
  // Ranked a b c d e; faulty b, d, x. Hits at ranks 2 and 4: P(2) = 1/2, P(4) = 2/4.
  const std::vector<std::string> predicted = {"a", "b", "c", "d", "e"}, faulty = {"b", "d", "x"};
  const CaseMetrics m5 = case_metrics(predicted, faulty, 5);
  EXPECT_DOUBLE_EQ(m5.precision, 2.0 / 5);
  EXPECT_DOUBLE_EQ(m5.recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m5.hit, 1);
  EXPECT_DOUBLE_EQ(m5.ap_paper, (0.5 + 0.5) / 2);  // m = 2 found in the top 5
  EXPECT_DOUBLE_EQ(m5.ap_standard, 1.0 / 3);       // over min(|F|, k) = 3
  EXPECT_DOUBLE_EQ(m5.rr, 0.5);
  const CaseMetrics m3 = case_metrics(predicted, faulty, 3);
  EXPECT_DOUBLE_EQ(m3.precision, 1.0 / 3);
  EXPECT_DOUBLE_EQ(m3.recall, 1.0 / 3);
  EXPECT_DOUBLE_EQ(m3.ap_paper, 0.5);
  EXPECT_DOUBLE_EQ(m3.ap_standard, 0.5 / 3);
  const CaseMetrics m1 = case_metrics(predicted, faulty, 1);
  EXPECT_DOUBLE_EQ(m1.precision, 0);
  EXPECT_DOUBLE_EQ(m1.hit, 0);
  EXPECT_DOUBLE_EQ(m1.ap_paper, 0);  // m = 0: AP is 0, not a division by zero
  EXPECT_DOUBLE_EQ(m1.rr, 0);
}

TEST(metrics, repeats_take_no_rank_and_short_lists_still_divide_by_k) {
  // "b b d": b at rank 1, d at rank 2 (the repeat is skipped, as unit-level mapping produces).
  const CaseMetrics m = case_metrics({"b", "b", "d"}, {"b", "d"}, 2);
  EXPECT_DOUBLE_EQ(m.precision, 1);
  EXPECT_DOUBLE_EQ(m.ap_paper, 1);
  EXPECT_DOUBLE_EQ(m.rr, 1);
  // Two predictions, k = 5: precision counts the empty places as misses.
  const CaseMetrics s = case_metrics({"x", "b"}, {"b"}, 5);
  EXPECT_DOUBLE_EQ(s.precision, 1.0 / 5);
  EXPECT_DOUBLE_EQ(s.rr, 0.5);
  EXPECT_DOUBLE_EQ(s.ap_paper, 0.5);
  EXPECT_DOUBLE_EQ(s.ap_standard, 0.5);
}

TEST(metrics, more_faulty_elements_than_k) {
  const CaseMetrics m = case_metrics({"x", "q", "y"}, {"x", "y", "z", "w"}, 2);
  EXPECT_DOUBLE_EQ(m.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.recall, 0.25);
  EXPECT_DOUBLE_EQ(m.ap_paper, 1.0);        // one found, at rank 1
  EXPECT_DOUBLE_EQ(m.ap_standard, 0.5);     // 1 / min(4, 2)
  const CaseMetrics all = case_metrics({"x", "y"}, {"x", "y", "z", "w"}, 2);
  EXPECT_DOUBLE_EQ(all.ap_standard, 1.0);
}

TEST(metrics, ties_in_the_mean_and_empty_truth) {
  const CaseMetrics mean = mean_metrics({case_metrics({"a"}, {"a"}, 1), case_metrics({"b"}, {"a"}, 1)});
  EXPECT_DOUBLE_EQ(mean.hit, 0.5);
  EXPECT_DOUBLE_EQ(mean.rr, 0.5);
  const CaseMetrics none = case_metrics({"a"}, {}, 1);
  EXPECT_DOUBLE_EQ(none.hit, 0);
  EXPECT_DOUBLE_EQ(none.recall, 0);
}

TEST(significance, mcnemar_exact_binomial_by_hand) {
  EXPECT_DOUBLE_EQ(mcnemar_p(5, 0), 2.0 / 32);               // 2 · P(X ≤ 0), X ~ B(5, 1/2)
  EXPECT_NEAR(mcnemar_p(1, 6), 2.0 * (1 + 7) / 128, 1e-12);  // 2 · P(X ≤ 1), n = 7
  EXPECT_DOUBLE_EQ(mcnemar_p(3, 3), 1.0);
  EXPECT_DOUBLE_EQ(mcnemar_p(0, 0), 1.0);
}

TEST(significance, wilcoxon_exact_with_and_without_ties) {
  // d = 1 -2 3 4 5: W- = 2; sign patterns with a rank sum ≤ 2: {}, {1}, {2} → p = 2 · 3/32.
  EXPECT_NEAR(wilcoxon_p({1, -2, 3, 4, 5}), 6.0 / 32, 1e-12);
  // Ties: |d| = 1 1 1 2 → ranks 2 2 2 4; W- = 2; sums ≤ 2 of {2,2,2,4}: {}, and each single 2 → 4 of 16 → p = 0.5.
  EXPECT_NEAR(wilcoxon_p({1, 1, -1, 2}), 0.5, 1e-12);
  // Zeros are dropped: the same as without them.
  EXPECT_NEAR(wilcoxon_p({0, 1, -2, 0, 3, 4, 5}), 6.0 / 32, 1e-12);
  EXPECT_DOUBLE_EQ(wilcoxon_p({0, 0}), 1.0);
  // Large n: the normal approximation, all positive → tiny p.
  std::vector<double> many(100, 0.1);
  EXPECT_LT(wilcoxon_p(many), 1e-10);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
