#include "code/levenshtein.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/text.h"

namespace spark {
namespace {

using Word = uint64_t;
constexpr int kWordBits = 64;
constexpr Word kHighBit = Word{1} << (kWordBits - 1);

// Pattern-match bit vectors: for each code point of the pattern, which positions hold it (per 64-bit block).
class PeqTable {
 public:
  PeqTable(std::u32string_view pattern, size_t blocks) : blocks_(blocks), ascii_(128 * blocks, 0) {
    for (size_t i = 0; i < pattern.size(); ++i) {
      Word* row = row_for_insert(pattern[i]);
      row[i / kWordBits] |= Word{1} << (i % kWordBits);
    }
  }
  // Eq vector of block `b` for character `c` (0 when c is not in the pattern).
  Word get(char32_t c, size_t b) const {
    if (c < 128) return ascii_[c * blocks_ + b];
    auto it = other_.find(c);
    return it == other_.end() ? 0 : it->second[b];
  }

 private:
  Word* row_for_insert(char32_t c) {
    if (c < 128) return &ascii_[c * blocks_];
    auto& v = other_[c];
    if (v.empty()) v.assign(blocks_, 0);
    return v.data();
  }
  size_t blocks_;
  std::vector<Word> ascii_;
  std::unordered_map<char32_t, std::vector<Word>> other_;
};

// One block of Hyyrö's column step; hin is the horizontal delta entering the block's top (-1, 0, +1).
// Returns the delta leaving at bit `out_bit`.
inline int advance_block(Word& pv, Word& mv, Word eq, int hin, Word out_mask) {
  const Word hin_neg = hin < 0 ? 1 : 0;
  const Word xv = eq | mv;
  eq |= hin_neg;
  const Word xh = (((eq & pv) + pv) ^ pv) | eq;
  Word ph = mv | ~(xh | pv);
  Word mh = pv & xh;
  int hout = 0;
  if (ph & out_mask)
    hout = 1;
  else if (mh & out_mask)
    hout = -1;
  ph <<= 1;
  mh <<= 1;
  mh |= hin_neg;
  ph |= hin > 0 ? 1 : 0;
  pv = mh | ~(xv | ph);
  mv = ph & xv;
  return hout;
}

}  // namespace

size_t levenshtein(std::u32string_view a, std::u32string_view b) {
  if (a.size() < b.size()) std::swap(a, b);  // the shorter one is the pattern: fewer blocks
  const size_t m = b.size();
  const size_t n = a.size();
  if (m == 0) return n;
  const size_t blocks = (m + kWordBits - 1) / kWordBits;
  PeqTable peq(b, blocks);
  std::vector<Word> pv(blocks, ~Word{0});
  std::vector<Word> mv(blocks, 0);
  const Word last_mask = Word{1} << ((m - 1) % kWordBits);
  size_t score = m;
  for (size_t j = 0; j < n; ++j) {
    int carry = 1;  // row 0 of the DP is 0,1,2,...: every step right adds one
    for (size_t blk = 0; blk < blocks; ++blk) {
      const bool last = blk + 1 == blocks;
      carry = advance_block(pv[blk], mv[blk], peq.get(a[j], blk), carry, last ? last_mask : kHighBit);
    }
    score = static_cast<size_t>(static_cast<long long>(score) + carry);
  }
  return score;
}

namespace {

// Cuts the common prefix and suffix off both strings: the distance of what is left is theirs.
void cut_common_ends(std::u32string_view& a, std::u32string_view& b) {
  const auto [at, bt] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  const auto prefix = static_cast<size_t>(at - a.begin());
  a.remove_prefix(prefix);
  b.remove_prefix(prefix);
  const auto [ar, br] = std::mismatch(a.rbegin(), a.rend(), b.rbegin(), b.rend());
  const auto suffix = static_cast<size_t>(ar - a.rbegin());
  a.remove_suffix(suffix);
  b.remove_suffix(suffix);
}

}  // namespace

// Why the band is enough. Let the shorter string b be the pattern (rows 1..m) and the longer a the text (columns
// 1..n), δ = n - m. A path of the dynamic programme through cell (i, j) costs at least |i - j| to reach it and
// |(m - i) - (n - j)| to leave it; with t = i - j, a path of cost <= k needs |t| + |t + δ| <= k, that is
// j - (k+δ)/2 <= i <= j + (k-δ)/2. Column j is computed only for the 64-row blocks that hold those rows; both ends of
// the band only move down. A block that leaves at the top is never computed again, and the block below it takes the
// row above as growing by one each column (Hyyrö's horizontal input +1, as row 0 does); a block that joins at the
// bottom starts from the column of +1 vertical steps (the initial column). Either boundary is at least the true
// value (a step right or down costs at most 1), and the programme is monotone in its boundary, so every computed
// value is at least the true one, and exactly it on every path of cost <= k, which stays inside the band. The score
// kept is the value at the bottom row of the last block; at the last column that is row m.
size_t levenshtein_bounded(std::u32string_view a, std::u32string_view b, size_t k) {
  cut_common_ends(a, b);
  if (a.size() < b.size()) std::swap(a, b);
  const size_t n = a.size();
  const size_t m = b.size();
  const size_t delta = n - m;
  if (delta > k) return k + 1;
  if (m == 0) return n;
  k = std::min(k, n);  // no distance is above n
  const size_t up = (k + delta) / 2;
  const size_t down = (k - delta) / 2;
  const size_t blocks = (m + kWordBits - 1) / kWordBits;
  const auto rows_in = [&](size_t blk) { return std::min(m, (blk + 1) * kWordBits) - blk * kWordBits; };
  PeqTable peq(b, blocks);
  std::vector<Word> pv(blocks, ~Word{0});
  std::vector<Word> mv(blocks, 0);
  const auto bottom_bit = [&](size_t blk) { return Word{1} << ((rows_in(blk) - 1) % kWordBits); };
  size_t first = 0;
  size_t last = 0;
  Word last_bit = bottom_bit(0);
  size_t score = rows_in(0);  // row 64 (or m) of column 0
  for (size_t j = 1; j <= n; ++j) {
    if (blocks > 1) {  // one block holds every row: no band to follow
      const size_t lo = j > up ? j - up : 1;
      const size_t hi = std::min(m, j + down);
      first = (lo - 1) / kWordBits;
      const size_t new_last = (hi - 1) / kWordBits;
      if (last < new_last) {
        while (last < new_last) score += rows_in(++last);
        last_bit = bottom_bit(last);
      }
    }
    int carry = 1;
    const char32_t c = a[j - 1];
    for (size_t blk = first; blk < last; ++blk) carry = advance_block(pv[blk], mv[blk], peq.get(c, blk), carry, kHighBit);
    carry = advance_block(pv[last], mv[last], peq.get(c, last), carry, last_bit);
    score = static_cast<size_t>(static_cast<long long>(score) + carry);
  }
  return std::min(score, k + 1);
}

size_t levenshtein_dp(std::u32string_view a, std::u32string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

PreparedLine::PreparedLine(std::string_view line) : text(decode_utf8(trim(line))) {}

double normalized_levenshtein(std::string_view a, std::string_view b) {
  const PreparedLine pa(a), pb(b);
  const size_t longer = std::max(pa.text.size(), pb.text.size());
  if (longer == 0) return 0.0;
  return static_cast<double>(levenshtein(pa.text, pb.text)) / static_cast<double>(longer);
}

double normalized_levenshtein_bounded(const PreparedLine& a, const PreparedLine& b, double max_distance) {
  const size_t la = a.text.size();
  const size_t lb = b.text.size();
  const size_t longer = std::max(la, lb);
  if (longer == 0) return 0.0;
  const auto over = [&](size_t edits) { return static_cast<double>(edits) / static_cast<double>(longer); };
  const size_t diff = la > lb ? la - lb : lb - la;
  if (!(over(diff) <= max_distance)) return over(diff);  // a NaN bound too
  // k: the most edits whose normalized distance is within the bound, by the very division the answer is made with.
  size_t k = max_distance >= 1.0 ? longer
                                  : std::max(diff, static_cast<size_t>(max_distance * static_cast<double>(longer)));
  while (k < longer && over(k + 1) <= max_distance) ++k;
  while (k > diff && over(k) > max_distance) --k;
  std::u32string_view sa = a.text, sb = b.text;
  cut_common_ends(sa, sb);
  const size_t sought = std::max(sa.size(), sb.size()) > kMaxComparedSpan ? std::min(k, kLongLineEdits) : k;
  const size_t edits = levenshtein_bounded(sa, sb, sought);
  return over(edits <= sought ? edits : k + 1);
}

std::string closest_name(const std::string& given, const std::vector<std::string>& known) {
  const std::u32string u(given.begin(), given.end());
  std::string best;
  size_t best_cost = std::max<size_t>(2, (given.size() - 2) / 3) + 1;  // edits allowed, plus one
  for (const auto& k : known) {
    const bool prefix = k.size() >= 5 && given.starts_with(k);
    const size_t cost = prefix ? 0 : levenshtein(u, std::u32string(k.begin(), k.end()));
    if (cost < best_cost || (cost == 0 && prefix && k.size() > best.size())) best = k, best_cost = cost;
  }
  return best;
}

}  // namespace spark
