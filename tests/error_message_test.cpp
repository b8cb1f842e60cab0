#include "formats/error_message.h"

#include <gtest/gtest.h>

namespace spark::SPARK_TEST_FILE_ID {

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

// What Debian's pytest 7.2 writes at its defaults (--tb=auto) into a JUnit <failure>, for an exception raised in a
// helper below the test: the test's frame is long (its location after the code, nothing after "7: "), the helper's
// too; the first line's indent stripped, as JUnit's text has it.
constexpr std::string_view kAutoBelowTest =
    "base = {'a': 1}\n\n    def test_below(base):\n        v = base[\"a\"] + 5\n>       assert check(v) == 6\n\n"
    "tests/test_x.py:7: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n\nx = 6\n\n"
    "    def check(x):\n        if x > 2:\n>           raise ValueError(\"too big: %d\" % x)\n"
    "E           ValueError: too big: 6\n\ntests/helpers.py:3: ValueError";

TEST(canonical_traceback, rewrites_pytest_long_frames_as_the_short_form_writes_them) {
  EXPECT_EQ(canonical_traceback(kAutoBelowTest),
            "tests/test_x.py:7: in test_below\n    assert check(v) == 6\ntests/helpers.py:3: in check\n"
            "    raise ValueError(\"too big: %d\" % x)\nE   ValueError: too big: 6");
  const auto frames = parse_traceback(canonical_traceback(kAutoBelowTest));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].path, "tests/test_x.py");
  EXPECT_EQ(frames[0].line, 7);
  EXPECT_EQ(frames[0].function, "test_below");
  EXPECT_EQ(frames[1].function, "check");
  // Read raw, the long form's frames are still found, without their functions.
  const auto raw = parse_traceback(kAutoBelowTest);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0].line, 7);
  EXPECT_EQ(raw[0].function, "");
}

TEST(canonical_traceback, keeps_multi_line_errors_chains_and_short_middle_frames) {
  // A method (argument lines, "E" continuation lines aligned with the statement), a decorated parametrized test.
  EXPECT_EQ(canonical_traceback("self = <test_x.TestC object at 0x7f2f8db82750>\n\n    def test_m(self):\n"
                                "        x = [1, 2]\n>       assert x == [1, 3]\nE       assert [1, 2] == [1, 3]\n"
                                "E         At index 1 diff: 2 != 3\n\ntests/test_x.py:13: AssertionError\n"),
            "tests/test_x.py:13: in test_m\n    assert x == [1, 3]\nE   assert [1, 2] == [1, 3]\n"
            "E     At index 1 diff: 2 != 3\n");
  EXPECT_EQ(canonical_traceback("a = 2, b = 5\n\n    @pytest.mark.parametrize(\"a,b\", [(1, 2), (2, 5)])\n"
                                "    def test_p(a, b):\n>       assert a + 1 == b\nE       assert (2 + 1) == 5\n\n"
                                "tests/test_x.py:18: AssertionError"),
            "tests/test_x.py:18: in test_p\n    assert a + 1 == b\nE   assert (2 + 1) == 5");
  // A chained exception; the default form's middle frame is short already.
  EXPECT_EQ(canonical_traceback("    def test_chain():\n        try:\n>           {}[\"k\"]\nE           KeyError: 'k'\n\n"
                                "tests/test_x.py:23: KeyError\n\nDuring handling of the above exception, another "
                                "exception occurred:\n\n    def test_chain(runner):\n>       result = runner.go()\n\n"
                                "tests/test_x.py:39: \n_ _ _ _ _ _ _ _ _ _ \nsrc/pkg/run.py:684: in go\n"
                                "    return self.name()\n_ _ _ _ _ _ _ _ _ _ \n\nself = <X>\n\n    def name(self):\n"
                                ">       return cli.name\nE       AttributeError: 'list' object has no attribute 'name'\n\n"
                                "src/pkg/run.py:387: AttributeError"),
            "tests/test_x.py:23: in test_chain\n    {}[\"k\"]\nE   KeyError: 'k'\n\nDuring handling of the above "
            "exception, another exception occurred:\ntests/test_x.py:39: in test_chain\n    result = runner.go()\n"
            "src/pkg/run.py:684: in go\n    return self.name()\nsrc/pkg/run.py:387: in name\n    return cli.name\n"
            "E   AttributeError: 'list' object has no attribute 'name'");
}

TEST(canonical_traceback, names_a_frame_by_its_first_def_and_reads_lambdas_and_frames_without_source) {
  // The test's frame prints a class with a method inside the test: the frame is the test's.
  EXPECT_EQ(canonical_traceback("self = <T>\n\n    def test_get_len(self):\n        class Record:\n"
                                "            def total_size(self):\n                return 1\n\n"
                                ">       self.assertEqual(\n            1, 2)\nE       AssertionError: 1 != 2\n\n"
                                "tests/test_more.py:6009: AssertionError"),
            "tests/test_more.py:6009: in test_get_len\n    self.assertEqual(\nE   AssertionError: 1 != 2");
  // A lambda's frame prints the lambda alone; a frozen module's has no source ("???").
  EXPECT_EQ(canonical_traceback(">       lambda: mi.sort_together(\n            [(4, 3)], strict_mode=True\n        ),\n"
                                "E   TypeError: unexpected keyword argument 'strict_mode'\n\n"
                                "tests/test_more.py:2301: TypeError\n"),
            "tests/test_more.py:2301: in <lambda>\n    lambda: mi.sort_together(\n"
            "E   TypeError: unexpected keyword argument 'strict_mode'\n");
  EXPECT_EQ(canonical_traceback("cls = <class 'Mapping'>\n\n>   ???\nE   RecursionError: maximum recursion depth\n\n"
                                "<frozen abc>:119: RecursionError"),
            "<frozen abc>:119: \n    ???\nE   RecursionError: maximum recursion depth");
}

TEST(canonical_traceback, reads_a_fixture_pytest_could_not_find_at_its_def_line) {
  const std::string_view m =
      "file /tmp/tb2/tests/test_a.py, line 5\n  def test_missing(basee):\nE       fixture 'basee' not found\n"
      ">       available fixtures: base, capfd\n>       use 'pytest --fixtures [testpath]' for help on them.\n\n"
      "/tmp/tb2/tests/test_a.py:5";
  EXPECT_EQ(canonical_traceback(m), "/tmp/tb2/tests/test_a.py:5: in test_missing\n    def test_missing(basee):\n"
                                    "E   fixture 'basee' not found");
  const auto raw = parse_traceback(m);
  ASSERT_EQ(raw.size(), 1u);  // the "file …, line 5" is not a frame; the location is
  EXPECT_EQ(raw.back().line, 5);
}

TEST(canonical_traceback, leaves_every_other_form_as_it_is) {
  for (std::string_view m :
       {std::string_view("tests/test_x.py:7: in test_below\n    assert check(v) == 6\nE   ValueError: too big: 6"),
        std::string_view("/tmp/tb/tests/test_x.py:13: assert [1, 2] == [1, 3]"),
        std::string_view("E   ValueError: too big: 6"),
        std::string_view("Traceback (most recent call last):\n  File \"/tmp/tb/tests/test_x.py\", line 7, in "
                         "test_below\n    assert check(v) == 6\nValueError: too big: 6\n"),
        std::string_view("")})
    EXPECT_EQ(canonical_traceback(m), m);
}

TEST(split_test_output, finds_each_failure_section_and_its_node_id) {
  const std::string out =
      "============================= test session starts ==============================\n"
      "collected 6 items\n\ntests/test_x.py FF.FF                                  [100%]\n\n"
      "==================================== ERRORS ====================================\n"
      "_________________________ ERROR at setup of test_uses __________________________\n\n"
      "    @pytest.fixture\n    def base():\n>       return d[\"b\"]\nE       KeyError: 'b'\n\n"
      "tests/conftest.py:6: KeyError\n"
      "=================================== FAILURES ===================================\n"
      "__________________________________ test_below __________________________________\n"
      "tests/test_x.py:7: in test_below\n    assert check(v) == 6\nE   ValueError: too big: 6\n"
      "----------------------------- Captured stdout call -----------------------------\nE   noise\n"
      "_________________________________ TestC.test_m _________________________________\n"
      "tests/test_x.py:13: in test_m\n    assert x == [1, 3]\nE   assert [1, 2] == [1, 3]\n"
      "_ test_p[a.b - c] _\n"  // a title wider than the terminal: one fill character each side
      "tests/test_x.py:18: in test_p\n    assert a + 1 == b\n"
      "=========================== short test summary info ============================\n"
      "FAILED tests/test_x.py::test_below - ValueError: too big: 6\n"
      "FAILED tests/test_x.py::TestC::test_m - assert [1, 2] == [1, 3]\n"
      "FAILED tests/test_x.py::test_p[a.b - c] - assert (2 + 1) == 5\n"
      "ERROR tests/test_x.py::test_uses - KeyError: 'b'\n"
      "===================== 3 failed, 1 passed, 1 error in 0.08s =====================\n";
  const auto s = split_test_output(out);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].title, "ERROR at setup of test_uses");
  EXPECT_TRUE(s[0].error);
  EXPECT_EQ(s[0].test_id, "tests/test_x.py::test_uses");
  EXPECT_EQ(s[1].test_id, "tests/test_x.py::test_below");
  EXPECT_EQ(s[1].text, "tests/test_x.py:7: in test_below\n    assert check(v) == 6\nE   ValueError: too big: 6\n");
  EXPECT_FALSE(s[1].error);
  EXPECT_EQ(s[2].test_id, "tests/test_x.py::TestC::test_m");
  EXPECT_EQ(s[3].test_id, "tests/test_x.py::test_p[a.b - c]");
  EXPECT_TRUE(split_test_output("E   ValueError: x\n").empty());
  // --tb=line and --tb=no: no sections, the summary's lines.
  // --tb=line's output: its one line (of one failure), then the summary's.
  const auto line_form = [](const std::string& summary) {
    return split_test_output(
        "=================================== FAILURES ===================================\n"
        "/tmp/tb/tests/test_x.py:18: assert (2 + 1) == 5\n"
        "=========================== short test summary info ============================\n" +
        summary);
  };
  const auto line = line_form(
      "FAILED tests/test_x.py::test_p[a - b] - assert (2 + 1) == 5\nFAILED tests/test_x.py::TestC::test_m\n"
      "ERROR tests/test_b.py\n");
  ASSERT_EQ(line.size(), 3u);
  EXPECT_EQ(line[0].test_id, "tests/test_x.py::test_p[a - b]");
  EXPECT_EQ(line[0].text, "E   assert (2 + 1) == 5\n");  // two failures, one --tb=line line: not paired
  EXPECT_EQ(line[1].test_id, "tests/test_x.py::TestC::test_m");
  EXPECT_EQ(line[1].text, "");
  EXPECT_EQ(line[2].test_id, "tests/test_b.py");
  EXPECT_TRUE(line[2].error);
  const auto paired = line_form("FAILED tests/test_x.py::test_p[2-5] - assert (2 + 1) == 5\n");
  ASSERT_EQ(paired.size(), 1u);
  EXPECT_EQ(paired[0].text, "/tmp/tb/tests/test_x.py:18: assert (2 + 1) == 5\nE   assert (2 + 1) == 5\n");
  const auto collecting = split_test_output(
      "==================================== ERRORS ====================================\n"
      "_______________________ ERROR collecting tests/test_b.py _______________________\n"
      "tests/test_b.py:1: in <module>\n    import nosuchmod\nE   ModuleNotFoundError: No module named 'nosuchmod'\n");
  ASSERT_EQ(collecting.size(), 1u);
  EXPECT_EQ(collecting[0].test_id, "tests/test_b.py");
  EXPECT_TRUE(collecting[0].error);
}

TEST(split_test_output, reads_unittests_failures_and_makes_their_ids) {
  const std::string rule_eq(70, '='), rule_dash(70, '-');
  const auto s = split_test_output(
      "FE.\n" + rule_eq + "\nERROR: test_b (tests.test_u.TestC.test_b)\n" + rule_dash +
      "\nTraceback (most recent call last):\n  File \"/tmp/ut/tests/test_u.py\", line 10, in test_b\n    {}[\"k\"]\n"
      "KeyError: 'k'\n\n" + rule_eq + "\nFAIL: test_a (tests.test_u.TestC)\n" + rule_dash +
      "\nTraceback (most recent call last):\n  File \"/tmp/ut/tests/test_u.py\", line 7, in test_a\n"
      "    self.assertEqual(x, 3)\nAssertionError: 2 != 3\n\n" + rule_dash + "\nRan 3 tests in 0.005s\n\nFAILED\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].test_id, "tests/test_u.py::TestC::test_b");
  EXPECT_TRUE(s[0].error);
  EXPECT_EQ(s[1].test_id, "tests/test_u.py::TestC::test_a");  // Python before 3.11 names the class only
  EXPECT_FALSE(s[1].error);
  EXPECT_EQ(s[1].text, "Traceback (most recent call last):\n  File \"/tmp/ut/tests/test_u.py\", line 7, in test_a\n"
                       "    self.assertEqual(x, 3)\nAssertionError: 2 != 3\n\n");
}

}  // namespace spark::SPARK_TEST_FILE_ID
