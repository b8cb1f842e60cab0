#include "formats/error_message.h"

#include <gtest/gtest.h>

namespace spark {

TEST(normalize_error_message, replaces_volatile_tokens_and_keeps_the_rest) {
  const std::string m =
      "E   AssertionError: <Foo object at 0x7f3367751a80> in /tmp/pytest-of-root/pytest-12/test_a0/x.txt "
      "at 2026-08-13T23:46:43Z id 123e4567-e89b-12d3-a456-426614174000 sha 0123456789abcdef0123 line 42";
  EXPECT_EQ(normalize_error_message(m),
            "E   AssertionError: <Foo object at <ADDR>> in <TMP> at <TIME> id <UUID> sha <HEX> line 42");
}

TEST(normalize_error_message, replaces_java_and_javascript_volatile_tokens) {
  const std::string m =
      "org.opentest4j.AssertionFailedError: expected: <com.example.shop.Cart@5e9f23b4> but was: "
      "<com.example.shop.Cart@1b2c3d4e> (CartTest.java:21); connect ECONNREFUSED 127.0.0.1:54321 and "
      "http://localhost:8080/api, [::1]:3000, in /tmp/junit8812736/cart.json, mail ci@example.org";
  EXPECT_EQ(normalize_error_message(m),
            "org.opentest4j.AssertionFailedError: expected: <com.example.shop.Cart@<HASH>> but was: "
            "<com.example.shop.Cart@<HASH>> (CartTest.java:21); connect ECONNREFUSED 127.0.0.1:<PORT> and "
            "http://localhost:<PORT>/api, [::1]:<PORT>, in <TMP>, mail ci@example.org");
}

TEST(parse_traceback, reads_pytest_short_long_and_python_native_frames) {
  const auto short_tb = parse_traceback(
      "tests/test_x.py:142: in test_f\n    f()\nboltons/funcutils.py:902: in get_func\n    x\nE   SyntaxError");
  ASSERT_EQ(short_tb.size(), 2u);
  EXPECT_EQ(short_tb[0].path, "tests/test_x.py");
  EXPECT_EQ(short_tb[0].line, 142);
  EXPECT_EQ(short_tb[0].function, "test_f");
  EXPECT_EQ(short_tb[1].line, 902);

  const auto long_tb = parse_traceback("    def test_f():\n>       assert 1 == 2\nE       assert 1 == 2\n\ntests/test_x.py:7: AssertionError");
  ASSERT_EQ(long_tb.size(), 1u);
  EXPECT_EQ(long_tb[0].line, 7);

  const auto native = parse_traceback(
      "Traceback (most recent call last):\n  File \"/repo/tests/test_x.py\", line 12, in test_g\n    g()\n"
      "  File \"/repo/pkg/mod.py\", line 3, in g\n    raise ValueError\nValueError");
  ASSERT_EQ(native.size(), 2u);
  EXPECT_EQ(native[0].path, "/repo/tests/test_x.py");
  EXPECT_EQ(native[0].function, "test_g");
  EXPECT_TRUE(same_file(native[0].path, "tests/test_x.py"));
  EXPECT_FALSE(same_file("tests/test_x.py", "tests/other_test_x.py"));
}

}  // namespace spark
