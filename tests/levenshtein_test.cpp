#include "code/levenshtein.h"

#include <gtest/gtest.h>

#include <random>

#include "base/text.h"

namespace spark::SPARK_TEST_FILE_ID {

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

namespace {

// A random string over a small alphabet (so that distances between two are small enough to test the bound), with
// two-byte and three-byte code points among its letters.
std::u32string random_text(std::mt19937& rng, size_t length, size_t letters) {
  static constexpr char32_t kAlphabet[] = {U'a', U' ', U'=', U'b', U'\u00e9', U'\u4e2d', U'c', U'('};
  std::u32string s;
  for (size_t i = 0; i < length; ++i) s.push_back(kAlphabet[rng() % letters]);
  return s;
}

// `s` after `edits` random insertions, deletions and substitutions: a string at distance <= edits.
std::u32string mutated(std::mt19937& rng, std::u32string s, size_t edits, size_t letters) {
  for (size_t e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : rng() % s.size();
    const std::u32string letter = random_text(rng, 1, letters);
    switch (rng() % 3) {
      case 0:
        s.insert(at, letter);
        break;
      case 1:
        if (!s.empty()) s.erase(at, 1);
        break;
      default:
        if (!s.empty()) s[at] = letter[0];
    }
  }
  return s;
}

// A line of `length` code points that trimming leaves whole.
std::u32string untrimmed_line(std::mt19937& rng, size_t length) {
  std::u32string s = random_text(rng, length, 8);
  s.front() = s.back() = U'a';
  return s;
}

}  // namespace

// The bounded kernel against the plain programme: the distance when it is within k, k + 1 when beyond, for strings
// of one to six 64-bit blocks, pairs near each other (a few edits apart) and unrelated ones, bounds below, at and
// above the distance.
TEST(levenshtein_bounded, is_the_dynamic_programmes_distance_within_k_and_k_plus_one_beyond) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t letters = 2 + rng() % 7;
    const std::u32string a = random_text(rng, rng() % 360, letters);
    const std::u32string b =
        trial % 4 == 0 ? random_text(rng, rng() % 360, letters) : mutated(rng, a, rng() % (a.size() / 4 + 3), letters);
    const size_t d = levenshtein_dp(a, b);
    for (const size_t k : {size_t{0}, d / 2, d > 0 ? d - 1 : 0, d, d + 1, d + rng() % 40, size_t{1000}}) {
      const size_t want = d <= k ? d : k + 1;
      ASSERT_EQ(levenshtein_bounded(a, b, k), want) << "lengths " << a.size() << ", " << b.size() << ", k " << k;
      ASSERT_EQ(levenshtein_bounded(b, a, k), want) << "lengths " << b.size() << ", " << a.size() << ", k " << k;
    }
  }
}

// Long strings a few edits apart: the band slides down through many blocks and leaves those above it.
TEST(levenshtein_bounded, follows_a_narrow_band_through_long_strings) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 40; ++trial) {
    const std::u32string a = random_text(rng, 1500 + rng() % 1500, 3);
    const std::u32string b = mutated(rng, a, rng() % 60, 3);
    const size_t d = levenshtein_dp(a, b);
    for (const size_t k : {d > 0 ? d - 1 : 0, d, d + 7, size_t{64}, size_t{200}})
      ASSERT_EQ(levenshtein_bounded(a, b, k), d <= k ? d : k + 1) << "lengths " << a.size() << ", " << b.size();
  }
}

// The normalized distance the annotation uses, against the plain programme: exact whenever within the bound
// (0, ε, the resemblance radius, 1), above the bound otherwise.
TEST(normalized_levenshtein_bounded, is_exact_within_the_bound_and_above_it_beyond) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t letters = 3 + rng() % 6;
    const std::u32string a = random_text(rng, rng() % 130, letters);
    const std::u32string b =
        trial % 3 == 0 ? random_text(rng, rng() % 130, letters) : mutated(rng, a, rng() % (a.size() / 3 + 2), letters);
    const PreparedLine pa(encode_utf8(a)), pb(encode_utf8(b));
    const size_t longer = std::max(pa.text.size(), pb.text.size());
    const double exact =
        longer == 0 ? 0.0 : static_cast<double>(levenshtein_dp(pa.text, pb.text)) / static_cast<double>(longer);
    for (const double bound : {0.0, 0.05, 0.2, 0.5, 1.0, exact}) {
      const double d = normalized_levenshtein_bounded(pa, pb, bound);
      if (exact <= bound)
        ASSERT_EQ(d, exact) << "bound " << bound;
      else
        ASSERT_GT(d, bound) << "exact " << exact;
    }
  }
}

// Lines of megabytes: edits in a line of a million code points are found in time linear in its length (the common
// ends cut off, a narrow band between), and lines that differ over more than kMaxComparedSpan code points by more
// than kLongLineEdits edits count as beyond the bound, however close their normalized distance.
TEST(normalized_levenshtein_bounded, compares_long_lines_within_the_cap) {
  std::mt19937 rng(14);
  std::u32string blob = untrimmed_line(rng, 1'000'000);
  const PreparedLine a(encode_utf8(blob));
  blob[400'000] = U'x';
  blob.insert(600'000, U"yz");
  const PreparedLine b(encode_utf8(blob));
  EXPECT_DOUBLE_EQ(normalized_levenshtein_bounded(a, b, 0.05), 3.0 / 1'000'002.0);
  EXPECT_DOUBLE_EQ(normalized_levenshtein_bounded(a, b, 0.5), 3.0 / 1'000'002.0);

  const std::u32string base = untrimmed_line(rng, 10'000);
  const auto distance = [&](const std::u32string& other, double bound) {
    return normalized_levenshtein_bounded(PreparedLine(encode_utf8(base)), PreparedLine(encode_utf8(other)), bound);
  };
  // Within the span: 2,000 code points in a row differ, exactly.
  std::u32string near = base;
  for (size_t i = 4000; i < 6000; ++i) near[i] = U'x';
  EXPECT_DOUBLE_EQ(distance(near, 0.5), 0.2);
  // Over a longer stretch: exact up to kLongLineEdits edits, beyond the bound past them.
  std::u32string spread = base;
  for (size_t i = 0; i < kLongLineEdits; ++i) spread[1000 + 80 * i] = U'x';
  EXPECT_DOUBLE_EQ(distance(spread, 0.5), static_cast<double>(kLongLineEdits) / 10'000.0);
  spread[9500] = U'x';
  EXPECT_EQ(levenshtein(base, spread), kLongLineEdits + 1);
  EXPECT_GT(distance(spread, 0.5), 0.5);
  std::u32string far = base;
  for (size_t i = 2000; i < 7000; ++i) far[i] = U'x';
  EXPECT_EQ(levenshtein(base, far), 5000u);  // a normalized 0.5, within the radius were it not for the cap
  EXPECT_GT(distance(far, 0.5), 0.5);
}

}  // namespace spark::SPARK_TEST_FILE_ID
