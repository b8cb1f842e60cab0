#include "localizer/policy.h"

#include <gtest/gtest.h>

namespace spark::SPARK_TEST_FILE_ID {

namespace {
std::vector<CaseEntry> corpus() {
  std::vector<CaseEntry> c;
  for (int i = 1; i <= 10; ++i) c.push_back({i, "c" + std::to_string(i), "t", i * 100, "k" + std::to_string(i), true});
  c.push_back({11, "unlabelled", "t", 550, "k11", false});
  return c;
}
}  // namespace

TEST(filter_by_policy, applies_each_policy_of_the_paper) {
  const auto c = corpus();
  EXPECT_EQ(filter_by_policy(c, 550, *parse_policy("all")).size(), 10u);  // unlabelled cases never count
  EXPECT_EQ(filter_by_policy(c, 550, *parse_policy("all-preceding")), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  Policy closest = *parse_policy("closest-by-time");
  closest.window = 3;
  EXPECT_EQ(filter_by_policy(c, 550, closest), (std::vector<int64_t>{4, 5, 6}));  // 500 and 600 tie; 400 before 700
  Policy preceding = *parse_policy("closest-time-preceding");
  preceding.window = 2;
  EXPECT_EQ(filter_by_policy(c, 550, preceding), (std::vector<int64_t>{4, 5}));
  // Default window: 10 % of the labelled cases, at least one.
  EXPECT_EQ(filter_by_policy(c, 550, *parse_policy("closest-by-time")).size(), 1u);
  EXPECT_TRUE(filter_by_policy(c, 50, *parse_policy("all-preceding")).empty());
}

TEST(parse_policy, lists_the_known_policies_on_a_typo) {
  auto p = parse_policy("closest");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message,
            "unknown policy \"closest\" (known: all, all-preceding, closest-by-time, closest-time-preceding)");
}

}  // namespace spark::SPARK_TEST_FILE_ID
