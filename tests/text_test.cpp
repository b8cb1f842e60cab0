#include "base/text.h"

#include <gtest/gtest.h>

namespace spark {

TEST(find_invalid_utf8, accepts_valid_text_and_rejects_bad_sequences) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii"));
  EXPECT_FALSE(find_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xed\xa0\x80"), 1u);     // surrogate
  EXPECT_EQ(find_invalid_utf8("\xe2\x82"), 0u);          // truncated
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // > U+10FFFF
}

TEST(split_lines, counts_lines_as_an_editor_does) {
  EXPECT_EQ(split_lines("").size(), 0u);
  EXPECT_EQ(split_lines("a").size(), 1u);
  EXPECT_EQ(split_lines("a\n").size(), 1u);
  const auto l = split_lines("a\r\n\nb\n");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], "a");
  EXPECT_EQ(l[1], "");
  EXPECT_EQ(l[2], "b");
}

TEST(trim, strips_ascii_white_space) {
  EXPECT_EQ(trim("  \tx y\r\n"), "x y");
  EXPECT_TRUE(is_blank(" \t "));
  EXPECT_FALSE(is_blank(" # c"));
}

TEST(sanitize_utf8, replaces_each_bad_byte_and_keeps_good_text) {
  EXPECT_EQ(sanitize_utf8("ok"), "ok");
  EXPECT_EQ(sanitize_utf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(encode_utf8(decode_utf8("\xe2\x82\xac")), "\xe2\x82\xac");
}

}  // namespace spark
