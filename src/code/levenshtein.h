// Normalized Levenshtein distance, the annotation module's dist(·,·) (paper Definition 4).
//
// Definition used by spark everywhere (see docs/LOCALIZER.md): the Levenshtein distance with unit costs over the
// Unicode code points of the two lines, each with leading and trailing white space removed, divided by the length
// of the longer one; two empty lines are at distance 0.
// Contract: pure functions of their arguments, thread-safe; any input (empty, invalid UTF-8 decoded as U+FFFD) has a
// distance, so nothing fails.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace spark {

// Edit distance with unit costs. Bit-parallel (Myers 1999, Hyyrö's block form): O(ceil(m/64)·n) word operations.
size_t levenshtein(std::u32string_view a, std::u32string_view b);

// The same by the textbook dynamic programme, O(m·n); the reference the fast kernel is tested and benchmarked against.
size_t levenshtein_dp(std::u32string_view a, std::u32string_view b);

// normalized distance of two lines as defined above, in [0, 1].
double normalized_levenshtein(std::string_view a, std::string_view b);

// A line prepared once for many comparisons: trimmed and decoded.
struct PreparedLine {
  std::u32string text;
  explicit PreparedLine(std::string_view line);
};

// normalized distance, or a value > max_distance as soon as the lengths alone prove the bound cannot be met
// (|m-n| / max(m,n) > max_distance). Exact whenever the result is <= max_distance.
double normalized_levenshtein_bounded(const PreparedLine& a, const PreparedLine& b, double max_distance);

}  // namespace spark
