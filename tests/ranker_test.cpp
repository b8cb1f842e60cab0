#include "localizer/ranker.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

TEST(train_ranker, learns_which_features_separate_faulty_lines) {
  // Synthetic cases: the faulty line is the traceback line 70 % of the time; `support` is noise.
  std::mt19937 rng(3);
  std::vector<TrainingCase> cases;
  for (int c = 0; c < 60; ++c) {
    TrainingCase tc;
    const int faulty = static_cast<int>(rng() % 20), tb = (rng() % 10 < 7) ? faulty : static_cast<int>(rng() % 20);
    for (int l = 0; l < 20; ++l) {
      FeatureVector x{};
      x[kBias] = 1;
      x[kTracebackLine] = l == tb ? 1 : 0;
      x[kSupport] = rng() % 2;
      tc.rows.push_back(x);
      tc.faulty.push_back(l == faulty ? 1 : 0);
    }
    cases.push_back(std::move(tc));
  }
  const RankerModel m = train_ranker(cases, {}, {});
  EXPECT_EQ(m.training_cases, 60u);
  EXPECT_GT(m.weights[kTracebackLine], 2.0);
  EXPECT_LT(std::abs(m.weights[kSupport]), 0.5);
}

TEST(train_ranker, keeps_the_prior_with_too_few_cases) {
  std::vector<TrainingCase> few(3);
  for (auto& tc : few) {
    tc.rows.assign(2, FeatureVector{});
    tc.faulty = {1, 0};
  }
  const RankerModel m = train_ranker(few, {}, {});
  EXPECT_EQ(m.origin, "prior");
  EXPECT_EQ(m.weights, RankerModel::prior().weights);
}

TEST(RankerModel, saves_and_loads) {
  testing::TempDir dir;
  RankerModel m = RankerModel::prior();
  m.kind_prior.llr["assert"] = 1.25;
  ASSERT_TRUE(m.save(dir / "ranker.json"));
  auto back = RankerModel::load(dir / "ranker.json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->weights, m.weights);
  EXPECT_DOUBLE_EQ(back->kind_prior.get("assert"), 1.25);
}

TEST(RankerModel, a_model_saved_before_a_feature_existed_weighs_it_zero) {
  testing::TempDir dir;
  RankerModel m = RankerModel::prior();
  ASSERT_TRUE(m.save(dir / "ranker.json"));
  auto j = nlohmann::json::parse(testing::slurp(dir / "ranker.json"));
  j["weights"].erase("slice");  // what a spark before the data-flow feature wrote
  testing::write_file(dir / "old.json", j.dump());
  auto old = RankerModel::load(dir / "old.json");
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_EQ(old->weights[kSlice], 0.0);
  EXPECT_EQ(old->weights[kTracebackLine], m.weights[kTracebackLine]);
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {

TEST(train_ranker, learns_the_separating_feature) {
  std::mt19937 rng(5);
  std::vector<TrainingCase> cases;
  for (int c = 0; c < 60; ++c) {
    TrainingCase tc;
    const int faulty = static_cast<int>(rng() % 20);
    for (int l = 0; l < 20; ++l) {
      FeatureVector x{};
      x[kBias] = 1;
      x[kSlice] = l == faulty || rng() % 5 == 0 ? 1 : 0;  // on the faulty line, and on a fifth of the others
      x[kModuleLevel] = rng() % 2;                         // noise
      tc.rows.push_back(x);
      tc.faulty.push_back(l == faulty ? 1 : 0);
    }
    cases.push_back(std::move(tc));
  }
  {
    const RankerModel m = train_ranker(cases, {}, {});
    EXPECT_GT(m.weights[kSlice], 1.0);
    EXPECT_LT(std::abs(m.weights[kModuleLevel]), 0.5);
    // Scores stay probabilities: the faulty line's is well above a line without the feature.
    FeatureVector on{}, off{};
    on[kBias] = off[kBias] = 1;
    on[kSlice] = 1;
    const auto p = m.probabilities({on, off});
    EXPECT_GT(p[0], p[1]);
    EXPECT_GT(p[0], 0.0);
    EXPECT_LT(p[0], 1.0);
  }
}

TEST(train_ranker, the_gate_learns_when_the_failing_statement_is_the_fault) {
  // The failing statement (row 0) is the fault when the exception is a TypeError, else another line is.
  std::mt19937 rng(7);
  std::vector<TrainingCase> cases;
  for (int c = 0; c < 80; ++c) {
    TrainingCase tc;
    const bool type_error = rng() % 2;
    tc.has_stop = true;
    tc.gate.fill(0.0);
    tc.gate[kGateBias] = 1;
    tc.gate[type_error ? kGateType : kGateAssertion] = 1;
    tc.gate_label = type_error;
    for (int l = 0; l < 10; ++l) {
      FeatureVector x{};
      x[kBias] = 1;
      x[kTracebackLine] = l == 0 ? 1 : 0;
      x[kSlice] = l == 3 ? 1 : 0;
      tc.rows.push_back(x);
      tc.faulty.push_back(type_error ? l == 0 : l == 3);
    }
    cases.push_back(std::move(tc));
  }
  const RankerModel m = train_ranker(cases, {}, {});
  EXPECT_NE(m.gate.origin, "prior");
  GateVector te{}, ae{};
  te[kGateBias] = ae[kGateBias] = 1;
  te[kGateType] = 1;
  ae[kGateAssertion] = 1;
  EXPECT_GT(m.gate.probability(te), 0.8);
  EXPECT_LT(m.gate.probability(ae), 0.2);
  // Ranking follows the gate: the failing statement first on a TypeError, the slice line first on an assertion.
  for (const bool type_error : {true, false}) {
    std::vector<FeatureVector> rows = cases[0].rows;
    apply_gate(m.gate, type_error ? te : ae, rows);
    const auto p = m.probabilities(rows);
    EXPECT_EQ(std::max_element(p.begin(), p.end()) - p.begin(), type_error ? 0 : 3);
  }
  testing::TempDir dir;
  ASSERT_TRUE(m.save(dir / "ranker.json"));
  auto back = RankerModel::load(dir / "ranker.json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->gate.weights, m.gate.weights);
  EXPECT_EQ(back->gate.origin, m.gate.origin);
}

}  // namespace spark::SPARK_TEST_FILE_ID
