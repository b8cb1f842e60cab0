#include "code/levenshtein.h"

#include <gtest/gtest.h>

#include <random>

#include "base/text.h"

namespace spark {

TEST(levenshtein, known_distances) {
  EXPECT_EQ(levenshtein(U"kitten", U"sitting"), 3u);
  EXPECT_EQ(levenshtein(U"", U"abc"), 3u);
  EXPECT_EQ(levenshtein(U"abc", U""), 3u);
  EXPECT_EQ(levenshtein(U"flaw", U"lawn"), 2u);
  EXPECT_EQ(levenshtein(U"same", U"same"), 0u);
}

TEST(levenshtein, matches_the_dynamic_programme_on_random_strings_of_every_block_count) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t la = rng() % 200, lb = rng() % 200;
    std::u32string a, b;
    const char32_t alphabet[] = {U'a', U'b', U'c', U' ', U'=', U'\u00e9', U'\u4e2d'};
    for (size_t i = 0; i < la; ++i) a.push_back(alphabet[rng() % 7]);
    for (size_t i = 0; i < lb; ++i) b.push_back(alphabet[rng() % 7]);
    ASSERT_EQ(levenshtein(a, b), levenshtein_dp(a, b)) << "lengths " << la << ", " << lb;
  }
}

TEST(normalized_levenshtein, is_over_code_points_of_trimmed_lines_divided_by_the_longer) {
  EXPECT_DOUBLE_EQ(normalized_levenshtein("", ""), 0.0);
  EXPECT_DOUBLE_EQ(normalized_levenshtein("   ", "\t"), 0.0);
  EXPECT_DOUBLE_EQ(normalized_levenshtein("  assert x == 5", "assert x == 5  "), 0.0);
  EXPECT_DOUBLE_EQ(normalized_levenshtein("assert result == 5", "assert result == 8"), 1.0 / 18.0);
  // "é" is one code point (two bytes): one substitution over four code points.
  EXPECT_DOUBLE_EQ(normalized_levenshtein("caf\xc3\xa9", "cafe"), 0.25);
  EXPECT_DOUBLE_EQ(normalized_levenshtein("abc", ""), 1.0);
}

TEST(normalized_levenshtein_bounded, prunes_by_length_and_is_exact_within_the_bound) {
  const PreparedLine a("x = 1"), b("x = 1 + 2 + 3 + 4 + 5");
  EXPECT_GT(normalized_levenshtein_bounded(a, b, 0.05), 0.05);
  const PreparedLine c("assert result == 5"), d("assert result == 8");
  EXPECT_DOUBLE_EQ(normalized_levenshtein_bounded(c, d, 0.1), 1.0 / 18.0);
}

}  // namespace spark
