#include "base/text.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

TEST(find_invalid_utf8, accepts_valid_text_and_rejects_bad_sequences) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii"));
  EXPECT_FALSE(find_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xed\xa0\x80"), 1u);     // surrogate
  EXPECT_EQ(find_invalid_utf8("\xe2\x82"), 0u);          // truncated
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // > U+10FFFF
}

TEST(fixed, prints_a_number_with_the_given_decimals_as_printf_does) {
  EXPECT_EQ(fixed(0.05, 2), "0.05");
  EXPECT_EQ(fixed(0.1, 2), "0.10");
  EXPECT_EQ(fixed(12.345, 1), "12.3");
  EXPECT_EQ(fixed(99.5, 0), "100");  // an exact half goes to the even neighbour, as printf's does
  EXPECT_EQ(fixed(-0.25, 1), "-0.2");
  EXPECT_EQ(fixed(1e20, 2), "100000000000000000000.00");
  EXPECT_EQ(seconds_text(2.46), "2.5 s");
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

TEST(json_text, makes_invalid_utf8_in_any_string_valid_instead_of_throwing) {
  // nlohmann's own dump throws type_error.316 here: what made `--format json` exit 1 with empty output (issue 40).
  const nlohmann::json j = {{"error", "HTTP 500: caf\xc3\xa9 \xff\xfe"}, {"list", {"ok", "a\xc3"}}, {"n", 3}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string text = json_text(j);
  EXPECT_FALSE(find_invalid_utf8(text));
  const auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back["error"], "HTTP 500: caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(back["list"][1], "a\xef\xbf\xbd");
  EXPECT_EQ(back["n"], 3);
  EXPECT_EQ(json_text(j, 2), nlohmann::json::parse(text).dump(2));  // the indentation as dump's
}

// Every JSON spark writes goes through json_text: a `.dump(` of its own anywhere else would throw on the first
// invalid byte again (or write one). The sources are read as they are.
TEST(json_text, is_the_one_json_writer_of_the_sources) {
  namespace fs = std::filesystem;
  size_t files = 0;
  for (const char* dir : {"src", "localizer", "miner", "cli"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(SPARK_SOURCE_DIR) / dir)) {
      const auto ext = e.path().extension();
      if ((ext != ".cpp" && ext != ".h") || e.path().filename() == "text.cpp") continue;
      ++files;
      const std::string text = testing::slurp(e.path());
      const auto lines = split_lines(text);
      for (size_t i = 0; i < lines.size(); ++i)
        if (lines[i].find(".dump(") != std::string_view::npos || lines[i].find("->dump(") != std::string_view::npos)
          ADD_FAILURE() << e.path().string() << ":" << i + 1 << ": JSON written without json_text: " << lines[i];
    }
  EXPECT_GT(files, 50u);
}

TEST(terminal_line, escapes_control_characters_and_keeps_text_and_tabs) {
  EXPECT_EQ(terminal_line("tests/test_x.py::test_f[caf\xc3\xa9]\tok"), "tests/test_x.py::test_f[caf\xc3\xa9]\tok");
  // OSC 52 (a clipboard write), a window title, clear screen, a bell, DEL, CR that overwrites the line.
  EXPECT_EQ(terminal_line("a\x1b]52;c;ZXZpbA==\x07" "b"), "a\\x1b]52;c;ZXZpbA==\\x07b");
  EXPECT_EQ(terminal_line("\x1b]0;title\x1b\\\x1b[2J\x7f"), "\\x1b]0;title\\x1b\\\\x1b[2J\\x7f");
  EXPECT_EQ(terminal_line("ok\rforged"), "ok\\rforged");
  EXPECT_EQ(terminal_line("one\ntwo"), "one\\ntwo");
  // C1 controls (CSI as one code point), bidirectional overrides, line separators, invalid UTF-8.
  EXPECT_EQ(terminal_line("x\xc2\x9b" "2J"), "x\\u009b2J");
  EXPECT_EQ(terminal_line("admin\xe2\x80\xae" "gpj.exe"), "admin\\u202egpj.exe");
  EXPECT_EQ(terminal_line("a\xe2\x80\xa8" "b"), "a\\u2028b");
  EXPECT_EQ(terminal_line("bad \xff\xc3"), "bad \\xff\\xc3");
}

TEST(terminal_line, defuses_what_could_start_a_github_workflow_command) {
  EXPECT_EQ(terminal_line("::add-mask::x"), "\\x3a:add-mask::x");
  EXPECT_EQ(terminal_line("  \t::error file=evil.py::x"), "  \t\\x3a:error file=evil.py::x");
  EXPECT_EQ(terminal_line("\xe3\x80\x80::warning::x"), "\xe3\x80\x80\\x3a:warning::x");  // an ideographic space
  EXPECT_EQ(terminal_line("x ##[error]y"), "x ##\\x5berror]y");
  EXPECT_EQ(terminal_line("tests/a.py::TestC::test_f"), "tests/a.py::TestC::test_f");  // "::" inside a line is text
  // A newline cannot start a line of its own: it is escaped, so what follows it stays inside the line.
  EXPECT_EQ(terminal_line("name\n::error file=evil.py,line=1::owned"), "name\\n::error file=evil.py,line=1::owned");
}

TEST(terminal_lines, keeps_newlines_and_defuses_each_line) {
  EXPECT_EQ(terminal_lines("spark: a\n::error file=evil.py,line=1::owned\n  ::add-mask::s\n"),
            "spark: a\n\\x3a:error file=evil.py,line=1::owned\n  \\x3a:add-mask::s\n");
  EXPECT_EQ(terminal_lines("a\r\n::set-output::x"), "a\\r\n\\x3a:set-output::x");
  EXPECT_EQ(terminal_lines("\x1b[31mred"), "\\x1b[31mred");
  // Idempotent: what it wrote is left as it is.
  const std::string once = terminal_lines("::x\n\x1b]52;c;a\x07\n##[group]");
  EXPECT_EQ(terminal_lines(once), once);
  EXPECT_EQ(terminal_line(once), terminal_line(terminal_line(once)));
}

}  // namespace spark::SPARK_TEST_FILE_ID
