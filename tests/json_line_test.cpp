// formats/json_line.h: the fast path (simdjson) answers as the slow one (nlohmann and spark's checks) does, value for
// value and message for message; base/files.h: for_each_line streams lines in bounded memory.
#include "formats/json_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/files.h"
#include "base/text.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using nlohmann::json;
using testing::TempDir;
using testing::write_file;

namespace {

// The fast and the slow answers for `line`, both ways of handing it (copied and padded in place).
void expect_same(const std::string& line) {
  SCOPED_TRACE(line.substr(0, 200));
  JsonLineParser parser;
  const auto slow = parse_json_line_slowly(line);
  std::string padded = line + std::string(kLinePadding, ' ');
  for (const bool in_place : {false, true}) {
    const auto fast = parser.parse(std::string_view(padded.data(), line.size()), in_place);
    ASSERT_EQ(fast.has_value(), slow.has_value()) << (fast ? slow.error().message : fast.error().message);
    if (slow) {
      EXPECT_EQ(*fast, *slow);
      EXPECT_EQ(json_text(*fast), json_text(*slow));  // same types: unsigned 5, integer -5, 1.0 a double
    } else {
      EXPECT_EQ(fast.error().message, slow.error().message);
    }
  }
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST(JsonLineParser, the_library_is_loaded) { EXPECT_TRUE(JsonLineParser::fast()); }

TEST(JsonLineParser, answers_as_nlohmann_does) {
  for (const std::string& line : std::vector<std::string>{
           R"({"id": "a", "n": 5, "m": -5, "z": -0, "f": 1.0, "e": 1e3, "big": 18446744073709551615})",
           R"({"huge": 184467440737095516160, "tiny": 1e-400, "t": true, "no": false, "nil": null})",
           R"({"dup": 1, "dup": 2, "nested": {"dup": "x", "dup": "y"}})",  // the last of duplicate keys, as nlohmann
           R"({"esc": "\u00e9\n\t\"\\\/\u0000", "pair": "\ud83d\ude00", "utf8": "café 😀"})",
           R"(["a", [], {}, [[1, 2], {"k": [3]}]])", R"("just a string")", "42", "  {\"a\": 1}  ", "\xEF\xBB\xBF{}",
           nested(kMaxJsonDepth), nested(kMaxJsonDepth - 1),
           // refused: each message must be the slow path's
           nested(kMaxJsonDepth + 1), R"({"a": 1,})", R"({"a": "\ud800"})", R"({"a": "\udc00"})", R"({"a": 1} x)",
           "{\"a\": \"caf\xff\"}", "{\"a\": \"tab\there\"}", R"({"a": 1e400})", R"({"a": 01})", R"({"a": .5})",
           R"({"a": tru})", "{\"a\": \"\xed\xa0\x80\"}", "", "   ", "{", "[1, 2", R"({"a": NaN})"})
    expect_same(line);
}

TEST(JsonLineParser, reuses_itself_from_line_to_line) {
  JsonLineParser parser;
  const std::string long_line = R"({"content": ")" + std::string(1 << 20, 'x') + R"("})";
  for (const std::string& line : {std::string(R"({"a": 1})"), long_line, std::string("[1]"), std::string("{")}) {
    const auto fast = parser.parse(line);
    const auto slow = parse_json_line_slowly(line);
    ASSERT_EQ(fast.has_value(), slow.has_value());
    if (fast) {
      EXPECT_EQ(*fast, *slow);
    }
  }
}

TEST(for_each_line, hands_out_every_line_with_its_number) {
  TempDir dir;
  // Lines across the 1 MiB read blocks, a line longer than a block, no '\n' at the end.
  std::string text;
  std::vector<std::string> expected;
  for (size_t i = 0; i < 3000; ++i) {
    expected.push_back(std::string(i * 7 % 1500, static_cast<char>('a' + i % 26)));
    text += expected.back() + "\n";
  }
  expected.push_back(std::string(3 << 20, 'L'));
  text += expected.back() + "\n\n";
  expected.emplace_back();
  expected.emplace_back("last");
  text += "last";
  write_file(dir / "t.txt", text);
  std::vector<std::string> got;
  auto s = for_each_line(dir / "t.txt", size_t{8} << 20, [&](std::string_view line, size_t number) -> Status {
    EXPECT_EQ(number, got.size() + 1);
    got.emplace_back(line);
    return {};
  });
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(got, expected);
}

TEST(for_each_line, refuses_a_line_past_the_limit_and_stops_on_the_callers_error) {
  TempDir dir;
  write_file(dir / "t.txt", "short\n" + std::string(5000, 'x') + "\nnever\n");
  size_t seen = 0;
  auto s = for_each_line(dir / "t.txt", 4096, [&](std::string_view, size_t) -> Status {
    ++seen;
    return {};
  });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            (dir / "t.txt").string() + ":2: a line of over 4096 bytes (spark reads lines of up to that)");
  EXPECT_EQ(seen, 1u);
  auto stop = for_each_line(dir / "t.txt", 1 << 20,
                            [&](std::string_view, size_t n) -> Status { return n == 2 ? fail("enough") : Status{}; });
  ASSERT_FALSE(stop);
  EXPECT_EQ(stop.error().message, "enough");
  auto absent = for_each_line(dir / "absent.txt", 1 << 20, [](std::string_view, size_t) -> Status { return {}; });
  ASSERT_FALSE(absent);
  EXPECT_TRUE(absent.error().message.starts_with((dir / "absent.txt").string() + ": cannot open"));
}

}  // namespace spark::SPARK_TEST_FILE_ID
