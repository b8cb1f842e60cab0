#include "code/tokens.h"

#include <cctype>

#include "base/pcre_regex.h"

namespace spark {

size_t estimate_tokens(std::string_view text) {
  static const Regex pieces = Regex::must(
      R"('(?:[sdmtSDMT]|ll|ve|re|LL|VE|RE)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  size_t tokens = 0;
  pieces.for_each_match(text, [&](const std::vector<std::string_view>& g) {
    const std::string_view p = g[0];
    size_t letters = 0, other = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const unsigned char ch = static_cast<unsigned char>(p[i]);
      if ((ch & 0xC0) == 0x80) continue;  // UTF-8 continuation byte: part of the previous character
      if (std::isalpha(ch) || ch >= 0x80)
        ++letters;
      else if (!std::isspace(ch))
        ++other;
    }
    if (letters > 0)
      tokens += 1 + (letters - 1) / 6;
    else if (other > 0)
      tokens += (other + 1) / 2;
    else
      tokens += 1;  // a whitespace run
  });
  return tokens;
}

}  // namespace spark
