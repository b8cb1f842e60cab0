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
#include <vector>

namespace spark {

// Edit distance with unit costs. Bit-parallel (Myers 1999, Hyyrö's block form): O(ceil(m/64)·n) word operations.
size_t levenshtein(std::u32string_view a, std::u32string_view b);

// The name in `known` that `given` most likely meant (an unknown command-line option): the longest one of at least
// 5 characters that `given` starts with ("--junitxml" → "--junit"), else the nearest within max(2, (|given| - 2) / 3)
// edits; "" when none is.
std::string closest_name(const std::string& given, const std::vector<std::string>& known);

// The edit distance when it is at most `k`, else k + 1. The common prefix and suffix are cut off first (they change
// no distance), a length difference above k answers at once, and the rest runs Hyyrö's bit-parallel kernel over the
// diagonal band a distance <= k can pass through: O(ceil((k+1)/64)·n) word operations for the n code points left of
// the longer string, whatever the length of the shorter.
size_t levenshtein_bounded(std::u32string_view a, std::u32string_view b, size_t k);

// The same by the textbook dynamic programme, O(m·n); the reference the fast kernel is tested and benchmarked against.
size_t levenshtein_dp(std::u32string_view a, std::u32string_view b);

// normalized distance of two lines as defined above, in [0, 1]; exact for any length (no cap: for tests and tools,
// not for comparing a stranger's lines).
double normalized_levenshtein(std::string_view a, std::string_view b);

// A line prepared once for many comparisons: trimmed and decoded.
struct PreparedLine {
  std::u32string text;
  explicit PreparedLine(std::string_view line);
};

// The cap on what two lines cost to compare. Where they differ (what is left after their common prefix and suffix) is
// compared within any bound up to kMaxComparedSpan code points of the longer one; over a longer stretch, only up to
// kLongLineEdits edits are sought (at most three 64-bit words of band per code point), and lines further apart count as beyond
// the bound whatever their normalized distance. Real test lines are far shorter (the development corpora's longest is
// 151 code points), so no real pair is affected; an inline blob or golden string of megabytes costs O(its length) to
// compare, not O(length²).
inline constexpr size_t kMaxComparedSpan = 4096;
inline constexpr size_t kLongLineEdits = 100;

// normalized distance when it is at most max_distance, else a value above max_distance: the length difference alone
// when that proves the bound cannot be met (|m-n| / max(m,n) > max_distance), else (k+1) / max(m,n), k being the most
// edits within the bound. Exact whenever the result is <= max_distance, with one exception, the cap above: lines
// that differ over more than kMaxComparedSpan code points and by more than kLongLineEdits edits are answered
// (k+1) / max(m,n) too.
double normalized_levenshtein_bounded(const PreparedLine& a, const PreparedLine& b, double max_distance);

}  // namespace spark
