// Hostile input (issue 13): what an attacker or an accident feeds spark, each case once found and now a regression
// test. Library-level here; the same inputs through the real binary are in fault_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "base/pcre_regex.h"
#include "base/text.h"
#include "code/python_structure.h"
#include "formats/case.h"
#include "formats/config.h"
#include "formats/error_message.h"
#include "formats/junit.h"
#include "formats/redact.h"
#include "localizer/answer.h"
#include "miner/miner.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::sample_case;
using testing::TempDir;
using testing::write_file;

const std::string kCode = "def test_a():\n    x = 1\n    assert x == 2\n";

std::string nested(size_t depth, char open, char close, const std::string& inner = "1") {
  return std::string(depth, open) + inner + std::string(depth, close);
}

TEST(json_too_deep, counts_brackets_outside_strings_only) {
  EXPECT_FALSE(json_too_deep("{\"a\": [1, {\"b\": 2}]}", 3));
  EXPECT_EQ(json_too_deep("{\"a\": [1, {\"b\": 2}]}", 2), 10u);  // the inner '{' opens level 3
  EXPECT_EQ(json_too_deep("{\"a\": [1, {\"b\": 2}]}", 1), 6u);   // the '[' opens level 2
  EXPECT_FALSE(json_too_deep(R"({"s": "[[[[[[[[{{{{", "t": "\"[[["})", 1));
  EXPECT_FALSE(json_too_deep(nested(256, '[', ']')));
  EXPECT_EQ(json_too_deep(nested(257, '[', ']')), 256u);
  EXPECT_FALSE(json_too_deep(""));
  EXPECT_FALSE(json_too_deep("]]]]}}}}"));  // unbalanced closers are the parser's to refuse
}

TEST(read_cases_jsonl, a_meta_nested_100k_deep_is_refused_naming_the_line_not_a_crash) {
  TempDir dir;
  const std::string good = sample_case("a", kCode, 3).dump();
  std::string deep = sample_case("b", kCode, 3).dump();
  deep.insert(deep.size() - 1, ", \"meta\": {\"x\": " + nested(100000, '[', ']') + "}");
  write_file(dir / "c.jsonl", good + "\n" + deep + "\n");
  auto r = read_cases_jsonl(dir / "c.jsonl");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message.starts_with((dir / "c.jsonl").string() + ":2: JSON nested deeper than 256 levels"))
      << r.error().message;
  // Objects too.
  std::string objects = sample_case("b", kCode, 3).dump();
  std::string inner;
  for (int i = 0; i < 100000; ++i) inner += "{\"k\": ";
  inner += "1" + std::string(100000, '}');
  objects.insert(objects.size() - 1, ", \"meta\": " + inner);
  write_file(dir / "o.jsonl", objects + "\n");
  auto o = read_cases_jsonl(dir / "o.jsonl");
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().message.find("o.jsonl:1: JSON nested deeper than 256 levels"), std::string::npos);
  // A reasonable depth is fine.
  std::string fine = sample_case("c", kCode, 3).dump();
  fine.insert(fine.size() - 1, ", \"meta\": {\"x\": " + nested(100, '[', ']') + "}");
  write_file(dir / "f.jsonl", fine + "\n");
  EXPECT_TRUE(read_cases_jsonl(dir / "f.jsonl"));
}

// Found by tests/fuzz (case_jsonl): a number too large for a double ("1e400") is nlohmann's out_of_range, not a
// parse_error; it escaped read_cases_jsonl and ended `spark import` in std::terminate.
TEST(read_cases_jsonl, a_number_past_a_double_is_an_error_naming_the_line) {
  TempDir dir;
  std::string c = sample_case("a", kCode, 3).dump();
  c.insert(c.size() - 1, ", \"meta\": {\"x\": 1e400}");
  write_file(dir / "c.jsonl", c + "\n");
  auto r = read_cases_jsonl(dir / "c.jsonl");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message.starts_with((dir / "c.jsonl").string() + ":1: not valid JSON (")) << r.error().message;
  EXPECT_NE(r.error().message.find("1e400"), std::string::npos) << r.error().message;
}

TEST(read_cases_jsonl, a_faulty_line_past_2_to_the_63_is_out_of_range_as_written_not_wrapped) {
  TempDir dir;
  for (const std::string n : {"9223372036854775808", "18446744073709551615", "9223372036854775807"}) {
    std::string c = sample_case("a", kCode, 3).dump();
    const std::string from = "\"line\":3";
    ASSERT_NE(c.find(from), std::string::npos);
    c.replace(c.find(from), from.size(), "\"line\":" + n);
    write_file(dir / "c.jsonl", c + "\n");
    auto r = read_cases_jsonl(dir / "c.jsonl");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, (dir / "c.jsonl").string() + ":1: faulty_lines[0]: line " + n +
                                     " is out of range (tests/test_x.py has 3 lines)");
  }
}

// A 50 MB test file took 7.5 GB and 272 s to index: files past the limits are refused at the door.
TEST(read_cases_jsonl, a_test_file_past_the_size_limits_is_refused_naming_it) {
  TempDir dir;
  std::string lines = "def test_a():\n";
  for (size_t i = 0; i < kMaxTestFileLines; ++i) lines += "    x = 1\n";
  std::string bytes = "def test_a():\n    x = '" + std::string(kMaxTestFileBytes, 'a') + "'\n";
  for (const auto& [name, content, why] : {std::tuple{"lines", lines, std::to_string(kMaxTestFileLines + 1) + " lines"},
                                           std::tuple{"bytes", bytes, std::to_string(bytes.size()) + " bytes"}}) {
    write_file(dir / "c.jsonl", sample_case("a", content, 1).dump() + "\n");
    auto r = read_cases_jsonl(dir / "c.jsonl");
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().message, (dir / "c.jsonl").string() + ":1: files[0] (tests/test_x.py): " + why +
                                     "; spark reads test files of up to 16777216 bytes and 100000 lines");
  }
  write_file(dir / "ok.jsonl", sample_case("a", "def test_a():\n    x = '" + std::string(5u << 20, 'a') + "'\n", 2).dump() + "\n");
  EXPECT_TRUE(read_cases_jsonl(dir / "ok.jsonl"));
}

// Issue 40: a case's file path is a path inside the project's repository. `..`, absolute paths and a NUL were
// accepted and reached SARIF's artifact uri and the GitHub annotations' file=, pointing a code-scanning alert or an
// annotation at a file outside the repository. Refused at import, naming the file, the line and the path.
TEST(read_cases_jsonl, a_file_path_out_of_the_repository_or_with_a_nul_is_refused_naming_it) {
  TempDir dir;
  for (const auto& [path, why] :
       {std::pair<std::string, std::string>{"../../etc/passwd", "a \"..\" part"},
        {"tests/../../x.py", "a \"..\" part"},
        {"tests\\..\\..\\x.py", "a \"..\" part"},
        {"/etc/passwd", "an absolute path"},
        {"\\\\server\\share\\x.py", "an absolute path"},
        {"C:/x/test_a.py", "an absolute path"},
        {std::string("tests/test_a.py\0.txt", 20), "a control character"},
        {"tests/test_a.py\n::error file=x", "a control character"}}) {
    SCOPED_TRACE(path);
    nlohmann::json c = sample_case("a", kCode, 3);
    c["files"][0]["path"] = path;
    c["faulty_lines"][0]["path"] = path;
    write_file(dir / "c.jsonl", "\n" + c.dump() + "\n");
    auto r = read_cases_jsonl(dir / "c.jsonl");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find((dir / "c.jsonl").string() + ":2: files[0].path "), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    auto imported = testing::run_spark({"import", "c.jsonl"}, dir.path());
    EXPECT_EQ(imported.exit_code, 1);
    EXPECT_NE(imported.err.find("c.jsonl:2: files[0].path"), std::string::npos) << imported.err;
  }
  for (const std::string path : {"tests/test_a.py", "./tests/test_a.py", "src/..x/a..b.py", "tests/:colon.py"}) {
    nlohmann::json c = sample_case("a", kCode, 3);
    c["files"][0]["path"] = path;
    c["faulty_lines"][0]["path"] = path;
    write_file(dir / "ok.jsonl", c.dump() + "\n");
    EXPECT_TRUE(read_cases_jsonl(dir / "ok.jsonl")) << path;
  }
}

// Issue 40: a file whose lines end in a lone carriage return (classic Mac OS) was read as one line, where Python, its
// traceback and tree-sitter's tokens see many: faulty line 3 was "out of range (1 line)" at import, and localize
// ranked the whole file as line 1. A lone CR now ends a line wherever test code comes in (import, --test, git).
TEST(read_cases_jsonl, lone_carriage_returns_end_lines_as_python_reads_them) {
  TempDir dir;
  const std::string code = "def test_a():\r    x = 1\r    assert x == 2\r";
  write_file(dir / "c.jsonl", sample_case("a", code, 3).dump() + "\n");
  auto r = read_cases_jsonl(dir / "c.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cases[0].files[0].content, "def test_a():\n    x = 1\n    assert x == 2\n");
  // CRLF stays as it is: its lines were always read right.
  write_file(dir / "crlf.jsonl", sample_case("a", "def test_a():\r\n    x = 1\r\n    assert x == 2\r\n", 3).dump() + "\n");
  auto crlf = read_cases_jsonl(dir / "crlf.jsonl");
  ASSERT_TRUE(crlf);
  EXPECT_EQ(crlf->cases[0].files[0].content, "def test_a():\r\n    x = 1\r\n    assert x == 2\r\n");
  // localize --test: the traceback's line 3 is the file's line 3.
  write_file(dir / "tests" / "test_a.py", code);
  auto loc = testing::run_spark({"localize", "--test", "tests/test_a.py", "--error", "-", "--format", "json", "-k", "3"},
                                dir.path(), "tests/test_a.py:3: in test_a\n    assert x == 2\nE   assert 1 == 2\n");
  ASSERT_EQ(loc.exit_code, 0) << loc.err;
  const auto j = nlohmann::json::parse(loc.out);
  ASSERT_EQ(j["ranked"].size(), 3u) << loc.out;
  EXPECT_EQ(j["ranked"][0]["line"], 3) << loc.out;
  EXPECT_EQ(j["ranked"][0]["code"], "assert x == 2") << loc.out;
}

TEST(read_outcomes_jsonl, json_nested_100k_deep_is_refused_naming_the_line) {
  TempDir dir;
  write_file(dir / "o.jsonl", "{\"commit\": \"" + std::string(40, 'a') + "\", \"test_id\": \"t\", \"outcome\": \"failed\", \"x\": " +
                                  nested(100000, '[', ']') + "}\n");
  auto r = read_outcomes_jsonl(dir / "o.jsonl");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("o.jsonl:1: JSON nested deeper than 256 levels"), std::string::npos)
      << r.error().message;
}

TEST(junit, a_report_nested_50000_suites_deep_is_read_not_a_stack_overflow) {
  TempDir dir;
  write_file(dir / "tests" / "test_a.py", kCode);
  std::string xml = "<?xml version=\"1.0\"?>\n<testsuites>\n";
  for (int i = 0; i < 50000; ++i) xml += "<testsuite name=\"s\">";
  xml += "\n<testcase classname=\"tests.test_a\" name=\"test_a\"><failure message=\"boom\">E   assert 1 == 2"
         "</failure></testcase>\n";
  for (int i = 0; i < 50000; ++i) xml += "</testsuite>";
  xml += "\n</testsuites>\n";
  write_file(dir / "r.xml", xml);
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 1u);
  EXPECT_EQ(r->outcomes[0].test_id, "tests/test_a.py::test_a");
  EXPECT_EQ(r->outcomes[0].report_line, 4u);
}

TEST(junit, suites_nested_and_side_by_side_are_read_in_document_order) {
  TempDir dir;
  write_file(dir / "r.xml",
             "<testsuites>\n<testsuite name=\"a\">\n<testcase classname=\"x\" name=\"t1\"/>\n"
             "<testsuite name=\"a1\">\n<testcase classname=\"x\" name=\"t2\"/>\n</testsuite>\n"
             "<testsuite name=\"a2\">\n<testcase classname=\"x\" name=\"t3\"/>\n</testsuite>\n</testsuite>\n"
             "<testsuite name=\"b\">\n<testcase classname=\"x\" name=\"t4\"/>\n</testsuite>\n</testsuites>\n");
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r->outcomes[i].test_id, "x::t" + std::to_string(i + 1));
  EXPECT_EQ(r->outcomes[0].report_line, 3u);
  EXPECT_EQ(r->outcomes[3].report_line, 12u);
}

// 100k test cases, half failing: every one read, with its own line (the time is measured by bench/junit_scale.sh).
TEST(junit, a_report_of_100k_testcases_names_each_ones_line) {
  TempDir dir;
  write_file(dir / "tests" / "test_a.py", kCode);
  std::string xml = "<testsuite name=\"big\">\n";
  for (int i = 0; i < 100000; ++i) {
    xml += "<testcase classname=\"tests.test_a\" name=\"test_" + std::to_string(i) + "\"";
    xml += i % 2 ? "><failure message=\"m\">E   assert 1 == 2</failure></testcase>\n" : "/>\n";
  }
  xml += "</testsuite>\n";
  write_file(dir / "r.xml", xml);
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 100000u);
  for (size_t i : {size_t{0}, size_t{1}, size_t{54321}, size_t{99999}}) {
    EXPECT_EQ(r->outcomes[i].report_line, i + 2);
    EXPECT_EQ(r->outcomes[i].test_id, "tests/test_a.py::test_" + std::to_string(i));
    EXPECT_EQ(r->outcomes[i].outcome, i % 2 ? Outcome::failed : Outcome::passed);
  }
}

// Probes that held when first tried (issue 13), kept: entities are never expanded (billion laughs) nor fetched
// (external entities), and a symbolic link out of the repository is not followed. The streaming reader (issue 40)
// refuses a report that declares entities, naming the line of the declaration; the DOM reader before it left them
// unexpanded.
TEST(junit, entity_expansion_and_external_entities_are_not_followed) {
  TempDir dir;
  write_file(dir / "repo" / "tests" / "test_x.py", "def test_a():\n    assert False\n");
  write_file(dir / "secret.txt", "TOKEN-OUTSIDE-THE-REPO\n");
  std::string laughs = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n<!ENTITY lol \"lol\">\n";
  laughs += "<!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n";
  for (int i = 2; i <= 9; ++i) {
    laughs += "<!ENTITY lol" + std::to_string(i) + " \"";
    for (int k = 0; k < 10; ++k) laughs += "&lol" + std::to_string(i - 1) + ";";
    laughs += "\">\n";
  }
  laughs += "]>\n<testsuite><testcase classname=\"tests.test_x\" name=\"test_a\"><failure message=\"&lol9;\">&lol9;"
            "</failure></testcase></testsuite>\n";
  write_file(dir / "laughs.xml", laughs);
  auto r = read_junit(dir / "laughs.xml", dir / "repo");
  ASSERT_FALSE(r) << "read with " << r->outcomes.size() << " outcomes";
  EXPECT_TRUE(r.error().message.starts_with((dir / "laughs.xml").string() +
                                            ":3: not a readable JUnit report: it declares an entity (lol)"))
      << r.error().message;
  write_file(dir / "xxe.xml", "<?xml version=\"1.0\"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM \"file://" + (dir / "secret.txt").string() +
                                  "\">]>\n<testsuite><testcase classname=\"tests.test_x\" name=\"test_a\"><failure>&x;"
                                  "</failure></testcase></testsuite>\n");
  auto x = read_junit(dir / "xxe.xml", dir / "repo");
  ASSERT_FALSE(x);
  EXPECT_NE(x.error().message.find("xxe.xml:2: not a readable JUnit report: it declares an entity (x)"),
            std::string::npos)
      << x.error().message;
  EXPECT_EQ(x.error().message.find("TOKEN-OUTSIDE"), std::string::npos);
  // tests/link.py points out of the repository: not a test file of it.
  std::filesystem::create_symlink(dir / "secret.txt", dir / "repo" / "tests" / "link.py");
  write_file(dir / "link.xml", "<testsuite><testcase classname=\"tests.link\" name=\"t\" file=\"tests/link.py\">"
                               "<failure>x</failure></testcase></testsuite>\n");
  auto l = read_junit(dir / "link.xml", dir / "repo");
  ASSERT_TRUE(l) << l.error().message;
  ASSERT_EQ(l->outcomes.size(), 1u);
  EXPECT_TRUE(l->outcomes[0].file.empty());
  EXPECT_FALSE(inside_root(dir / "repo", "tests/link.py"));
}

// Found by tests/fuzz (error_message, answer, redact): PCRE2 ran in UTF mode without its UTF check, and the JIT read
// past an invalid sequence (SIGSEGV). Inputs as in tests/fuzz/regressions.
TEST(regex, invalid_utf8_is_matched_as_if_each_bad_byte_were_a_question_mark) {
  const Regex words = Regex::must(R"(\w+)");
  std::vector<std::string> got;
  words.for_each_match("ab\xff\xfe" "cd \xe9t\xe9", [&](const auto& g) { got.emplace_back(g[0]); });
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "cd", "t"}));
  EXPECT_EQ(words.replace_all("ab\xff" "cd", "W"), "W\xffW");  // the caller's bytes stay where nothing matched
  const Regex empty = Regex::must("x*");
  size_t n = 0;
  empty.for_each_match("\xc3\xa9\xc3\xa9", [&](const auto&) { ++n; });  // empty matches step over whole characters
  EXPECT_EQ(n, 3u);
}

TEST(regex, invalid_utf8_in_error_messages_answers_and_secrets) {
  const std::string message = "tests/t.py:3: in test_a\n    assert f()\nE   AssertionErro" + std::string(10, '\xad') + "\n";
  const auto frames = parse_traceback(message);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].line, 3);
  (void)normalize_error_message(message);
  const auto a = parse_answer("\"labelled\"nulty lines are: line 1,\xa0li\xe7ne 7 a2 .nd\n", 5, [](int) { return true; });
  for (int id : a.ids) EXPECT_TRUE(id >= 1 && id <= 5);
  auto redactor = Redactor::make();
  ASSERT_TRUE(redactor);
  std::string text = "password = 'hunter22hunter22' \xff\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n\xdc" "bc\n"
                     "-----END RSA PRIVATE KEY-----\n";
  std::map<std::string, size_t> counts;
  EXPECT_GE(redactor->redact(text, counts), 2u);
  EXPECT_EQ(text.find("hunter22"), std::string::npos) << text;
  EXPECT_EQ(text.find("MIIEow"), std::string::npos) << text;
  EXPECT_NE(text.find('\xff'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);
}

// Found by tests/fuzz (answer): a JSON number past any int was converted to long long (undefined; UBSan caught it).
TEST(parse_answer, numbers_no_line_has_are_out_of_range) {
  for (const std::string answer : {R"({"id": 1844674407370955161620})", R"([1e300, -1e300, 18446744073709551615, 3])",
                                   R"({"line": 9223372036854775808})"}) {
    const auto a = parse_answer(answer, 5, [](int) { return true; });
    EXPECT_TRUE(a.ids.empty() || a.ids == std::vector<int>{3}) << answer;
    EXPECT_GE(a.out_of_range, 1u) << answer;
  }
}

// Found by tests/fuzz (redact): one rule's label completed another's match, leaving part of a password showing until
// a second pass; redaction now repeats to a fixed point.
TEST(redact, a_password_split_by_another_rule_is_redacted_whole_in_one_call) {
  auto redactor = Redactor::make();
  ASSERT_TRUE(redactor);
  std::string text = "s://r:secret://u@.";
  std::map<std::string, size_t> counts;
  redactor->redact(text, counts);
  EXPECT_EQ(text.find("secret"), std::string::npos) << text;
  const std::string once = text;
  std::map<std::string, size_t> again;
  EXPECT_EQ(redactor->redact(text, again), 0u);
  EXPECT_EQ(text, once);
}

// Found by tests/fuzz (python_structure): the line scan and the parser disagreed on a NUL byte; the scan declines.
TEST(scan_function_span, declines_a_nul_byte_a_vertical_tab_and_a_lone_carriage_return) {
  EXPECT_FALSE(scan_function_span(std::string_view("def\0e():\n    pass\n", 18), "", "e").has_value());
  EXPECT_FALSE(scan_function_span("def f():\r    pass\n", "", "f").has_value());
  EXPECT_TRUE(scan_function_span("def f():\r\n    pass\r\n", "", "f").has_value());
  // And a vertical tab, which tree-sitter reads as white space (it ran a function on past "x = 1\v").
  EXPECT_FALSE(scan_function_span("def a():\n    x = 1\v\n\n@d\ndef b():\n    pass\n", "", "a").has_value());
}

// Found by tests/fuzz (python_structure): "def:t():" is a syntax error tree-sitter reads as `def t`, and text left
// indented deeper after a docstring closed early is another; the scan declines both and the parser answers.
TEST(scan_function_span, declines_a_malformed_header_and_an_unexpected_indent) {
  EXPECT_FALSE(scan_function_span("def:t():\n", "", "t").has_value());
  EXPECT_FALSE(scan_function_span("def 1t():\n    pass\n", "", "t").has_value());
  EXPECT_FALSE(scan_function_span("class A\n    def t(self):\n        pass\n", "A", "t").has_value());
  EXPECT_FALSE(scan_function_span("def t():\n    x = 1\n        y = 2\n", "", "t").has_value());
  EXPECT_FALSE(scan_function_span("    x = 1\ndef t():\n    pass\n", "", "t").has_value());
  // A body on the header's line opens no indented block: the line after it, deeper, is an unexpected indent
  // (tests/fuzz found "def a():t\n ta", which tree-sitter ends at line 1).
  EXPECT_FALSE(scan_function_span("def a(): t\n    ta\n", "", "a").has_value());
  EXPECT_EQ(scan_function_span("def a(): return 1\ndef b(): pass\n", "", "a"), std::optional(std::optional(std::pair(1, 1))));
  EXPECT_EQ(scan_function_span("def a():\n    while x := f():  # a walrus\n        pass\n", "", "a"),
            std::optional(std::optional(std::pair(1, 3))));
  // A header whose colon is on the next line, which tree-sitter accepts (tests/fuzz: "def _()\n:"); a dedent to a
  // column no open block stands at (tests/fuzz); a header with no body below it.
  EXPECT_FALSE(scan_function_span("def _()\n:\n", "", "_").has_value());
  EXPECT_FALSE(scan_function_span("class T:\n    def a(self):\n        x = 1\n       y = 2\n", "T", "a").has_value());
  EXPECT_FALSE(scan_function_span("def a():\nx = 1\n", "", "a").has_value());
  EXPECT_FALSE(scan_function_span("def b():\n    pass\ndef a():\n", "", "b").has_value());
  // `match` and `case` are names too: a line that uses one so is no header.
  EXPECT_EQ(scan_function_span("def a():\n    match = m.match(x)\n    case = 2\n", "", "a"),
            std::optional(std::optional(std::pair(1, 3))));
  EXPECT_EQ(scan_function_span("def a():\n    match x:\n        case 1:\n            pass\n", "", "a"),
            std::optional(std::optional(std::pair(1, 4))));
  // Well-formed headers, a type parameter list and a class without a base are still scanned.
  EXPECT_EQ(scan_function_span("def t[T](x: T):\n    pass\n", "", "t"), std::optional(std::optional(std::pair(1, 2))));
  EXPECT_EQ(scan_function_span("class A:\n    def t(self):\n        pass\n", "A", "t"),
            std::optional(std::optional(std::pair(2, 3))));
  // The fuzzer's case in small: a docstring closed early leaves its next lines as code indented deeper.
  EXPECT_FALSE(scan_function_span("def t():\n    \"\"\"Doc\"\"\" closes early\n        def u(self):\n    x = 1\n", "", "t")
                   .has_value());
}

// Found by tests/fuzz (config, UBSan): toml++ 3.3.0 reaches __builtin_unreachable when it tests some characters
// beyond ASCII (here U+FEFD) for whitespace where a key may start. Such a file is refused, naming its line, before
// toml++ reads it; strings, comments and a byte order mark keep theirs. Input as in tests/fuzz/regressions/config.
TEST(config, a_character_beyond_ascii_outside_strings_and_comments_is_refused_with_its_line) {
  testing::TempDir dir;
  const auto load = [&](const std::string& name, const std::string& text) {
    write_file(dir / name, text);
    return Config::load(dir / name);
  };
  auto bad = load("bad.toml", "[llm]\n\xef\xbb\xbd" "base_url = \"http://localhost\"");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, (dir / "bad.toml").string() +
                                     ":2: a character beyond ASCII outside a string or comment (TOML allows them "
                                     "only in strings and comments)");
  auto ml = load("ml.toml", "[llm]\nmodel = \"\"\"a \\\n  \xc3\xa9\"\"\"\n");
  ASSERT_FALSE(ml);
  EXPECT_NE(ml.error().message.find("ml.toml:3: a character beyond ASCII right after a line-ending backslash"),
            std::string::npos)
      << ml.error().message;
  // A quote inside a bare value opens no string for toml++ (which then reached its unreachable point on the ľ).
  auto quoted = load("quoted.toml", "kb = 2\"\xc4\xbe\"\n");
  ASSERT_FALSE(quoted);
  EXPECT_NE(quoted.error().message.find("quoted.toml:1: a character beyond ASCII outside a string or comment"),
            std::string::npos)
      << quoted.error().message;
  auto ok = load("ok.toml", "\xef\xbb\xbf# Z\xc3\xbcrich\n[llm]\nmodel = \"m\xc3\xa9\" # \xc3\xa9\n"
                            "base_url = 'http://h/\xc3\xa9'\ntemplate = \"\"\"\xc3\xa9\n\xc3\xa9\"\"\"\n");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->str("llm.model"), "m\xc3\xa9");
  EXPECT_EQ(ok->str("llm.base_url"), "http://h/\xc3\xa9");
  EXPECT_EQ(ok->str("llm.template"), "\xc3\xa9\n\xc3\xa9");
}

// A pattern that backtracks exponentially stops at the match limit and the scan goes on with the next line.
TEST(regex, a_catastrophic_pattern_is_cut_at_the_match_limit_and_the_next_line_still_matches) {
  const Regex evil = Regex::must(R"((a+)+b)");
  const std::string text = std::string(40, 'a') + "c\naab\n";
  std::vector<std::string> got;
  evil.for_each_match(text, [&](const auto& g) { got.emplace_back(g[0]); });
  EXPECT_EQ(got, (std::vector<std::string>{"aab"}));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
