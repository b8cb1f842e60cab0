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
  return normalized_levenshtein_bounded(PreparedLine(a), PreparedLine(b), 1.0);
}

double normalized_levenshtein_bounded(const PreparedLine& a, const PreparedLine& b, double max_distance) {
  const size_t la = a.text.size();
  const size_t lb = b.text.size();
  const size_t longer = std::max(la, lb);
  if (longer == 0) return 0.0;
  const size_t diff = la > lb ? la - lb : lb - la;
  const double lower_bound = static_cast<double>(diff) / static_cast<double>(longer);
  if (lower_bound > max_distance) return lower_bound;
  if (a.text == b.text) return 0.0;
  return static_cast<double>(levenshtein(a.text, b.text)) / static_cast<double>(longer);
}

}  // namespace spark
