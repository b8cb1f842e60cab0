// A parametrized pytest test's failing row: its id matched to a row of the `parametrize` list as pytest 7.2 makes
// the ids (checked against Debian's pytest --collect-only), and the scope evidence the row gets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "code/code_structure.h"
#include "base/text.h"
#include "code/scope.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::TempDir;
using testing::write_file;

const char* kRows = R"py(import pytest


@pytest.mark.parametrize("a,b,c", [
    (1, 2, 3),
    (2, 3, 7),
    pytest.param(3, 3, 9, id="three"),
    ("a::b[c", "é\nz", None),
    (1, 2, 3),
    (object(), 0x10, -1.5),
])
def test_table(a, b, c):
    assert a * b == c


def cases():
    return [(1, 1)]


@pytest.mark.parametrize("x, y", cases())
def test_built(x, y):
    assert x == y


@pytest.mark.parametrize("z", [1, 2])
@pytest.mark.parametrize(("p", "q"), [
    ("u", 2),
    ("v", 3),
], ids=["first", None])
def test_stacked(p, q, z):
    assert q < 3
)py";

using Span = std::pair<int, int>;

TEST(match_param_rows, every_id_pytest_makes_finds_its_row) {
  const CodeStructure s = analyze_code(kRows, Language::python, "tests/test_rows.py");
  // The ids as Debian's pytest 7.2 collects them, and the row each is.
  const std::vector<std::pair<std::string, int>> ids = {
      {"1-2-30", 5}, {"2-3-7", 6}, {"three", 7}, {"a::b[c-\\xe9\\nz-None", 8}, {"1-2-31", 9}, {"a5-16--1.5", 10}};
  for (const auto& [param, line] : ids) {
    const auto rows = match_param_rows(s, kRows, "tests/test_rows.py::test_table[" + param + "]");
    EXPECT_EQ(rows.note, "") << param;
    ASSERT_EQ(rows.failing, (std::vector<Span>{{line, line}})) << param;
    EXPECT_EQ(rows.others.size(), 5u) << param;
  }
  // Stacked lists: the innermost's id first; ids=[...] by index, None there is the values' id.
  auto stacked = match_param_rows(s, kRows, "tests/test_rows.py::test_stacked[v-3-2]");
  EXPECT_EQ(stacked.note, "");
  EXPECT_EQ(stacked.failing, (std::vector<Span>{{28, 28}, {25, 25}}));
  EXPECT_EQ(match_param_rows(s, kRows, "tests/test_rows.py::test_stacked[first-1]").failing,
            (std::vector<Span>{{27, 27}, {25, 25}}));
  // A list built by a call: a note, no rows.
  auto built = match_param_rows(s, kRows, "tests/test_rows.py::test_built[1-1]");
  EXPECT_TRUE(built.failing.empty());
  EXPECT_NE(built.note.find("test_built: its parametrize list is not written as rows (cases())"), std::string::npos)
      << built.note;
  // An id no row has, a test without parameters, a missing test, and ids with newlines or brackets inside.
  EXPECT_NE(match_param_rows(s, kRows, "tests/test_rows.py::test_table[9-9-9]").note.find("no row"),
            std::string::npos);
  EXPECT_EQ(match_param_rows(s, kRows, "tests/test_rows.py::test_table").note, "");
  EXPECT_TRUE(match_param_rows(s, kRows, "tests/test_rows.py::test_gone[1]").failing.empty());
  EXPECT_TRUE(match_param_rows(s, kRows, "tests/test_rows.py::test_table[a\n]b[]").failing.empty());
}

// The ids Debian's pytest collects from a test file at `path` holding `content` (its --collect-only -q output).
std::string collected_ids(const std::string& path, const std::string& content) {
  TempDir dir;
  write_file(dir / path, content);
  return testing::run_pytest({"--collect-only", "-q", "tests"}, dir.path()).out;
}

TEST(match_param_rows, the_ids_agree_with_debians_pytest) {
  const std::string collected = collected_ids("tests/test_rows.py", kRows);
  const CodeStructure s = analyze_code(kRows, Language::python, "tests/test_rows.py");
  size_t matched = 0;
  for (std::string_view id : split_lines(collected)) {
    if (!id.starts_with("tests/test_rows.py::") || id.find("test_built") != std::string_view::npos) continue;
    EXPECT_EQ(match_param_rows(s, kRows, id).failing.size(), id.find("stacked") != std::string_view::npos ? 2u : 1u)
        << id;
    ++matched;
  }
  EXPECT_EQ(matched, 10u);
}

TEST(match_param_rows, a_parametrized_fixtures_ids_around_the_rows_are_passed_over) {
  // An autouse fixture with params (markupsafe's "markupsafe._native-…") and one a test asks for, whose id holds "-".
  const char* with_fixtures = R"py(import pytest


@pytest.fixture(autouse=True, params=["mod._native", "mod._speedups"])
def mod(request):
    return request.param


@pytest.fixture(params=["x-y"])
def fx(request):
    return request.param


@pytest.mark.parametrize("a,b,c", [
    (1, 2, 2),
    (2, 3, 7),
])
def test_table(a, b, c):
    assert a * b == c


@pytest.mark.parametrize("v", [
    "p",
    "q",
])
def test_late(v, fx):
    assert v != "q"
)py";
  const std::string collected = collected_ids("tests/test_fx.py", with_fixtures);
  const CodeStructure s = analyze_code(with_fixtures, Language::python, "tests/test_fx.py");
  size_t matched = 0;
  for (std::string_view id : split_lines(collected)) {
    if (!id.starts_with("tests/test_fx.py::")) continue;
    const auto rows = match_param_rows(s, with_fixtures, id);
    EXPECT_EQ(rows.note, "") << id;
    ASSERT_EQ(rows.failing.size(), 1u) << id;
    // Each id's own row: (1, 2, 2) on line 15, (2, 3, 7) on 16; "p" on 23, "q" on 24.
    const bool table = id.find("test_table") != std::string_view::npos;
    const bool second = id.find("-2-3-7") != std::string_view::npos || id.ends_with("-q]");
    EXPECT_EQ(rows.failing[0].first, (table ? 15 : 23) + (second ? 1 : 0)) << id;
    EXPECT_EQ(rows.others.size(), 1u) << id;
    ++matched;
  }
  EXPECT_EQ(matched, 8u) << collected;
}

TEST(estimate_scope, the_failing_row_stays_the_tests_own_and_its_siblings_are_outside) {
  const CodeStructure s = analyze_code(kRows, Language::python, "tests/test_rows.py");
  const TestScope scope = estimate_scope(s, "tests/test_rows.py::test_table[2-3-7]", kRows);
  ASSERT_TRUE(scope.found);
  EXPECT_EQ(scope.role[5], ScopeRole::own);  // line 6: (2, 3, 7)
  EXPECT_EQ(scope.role[12], ScopeRole::own);  // the assert
  for (int line : {5, 7, 8, 9, 10}) EXPECT_EQ(scope.role[static_cast<size_t>(line - 1)], ScopeRole::outside) << line;
  // Without the content (or for a list built by a call) the whole decorator stays the test's own.
  const TestScope plain = estimate_scope(s, "tests/test_rows.py::test_table[2-3-7]");
  EXPECT_EQ(plain.role[4], ScopeRole::own);
  const TestScope built = estimate_scope(s, "tests/test_rows.py::test_built[1-1]", kRows);
  EXPECT_EQ(built.role[19], ScopeRole::own);
}

TEST(parse_test_id, a_collection_errors_id_is_its_file) {
  const TestIdParts parts = parse_test_id("tests/test_x.py");
  EXPECT_EQ(parts.path, "tests/test_x.py");
  EXPECT_EQ(parts.function, "");
  EXPECT_EQ(parse_test_id("tests.test_x.TestC.test_f").function, "test_f");  // unittest's dotted form stays
  EXPECT_EQ(parse_test_id("tests/t.py::test_e[a::b[c-\\xe9\\nz]").function, "test_e");
}

// ---- JUnit 5 @ParameterizedTest: the invocation index ("adds(int, int, int)[2]") counted over the sources' rows ----

const char* kJavaRows = R"java(package com.ex;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.NullSource;
import org.junit.jupiter.params.provider.ValueSource;

class TableTest {
    @ParameterizedTest
    @CsvSource({
        "1, 1, 2",
        // "9, 9, 9", not a row
        "2, 3, 7",
        "4, 4, 8"
    })
    void adds(int a, int b, int sum) {
        assertEquals(sum, a + b);
    }

    @ParameterizedTest(name = "even {0}")
    @ValueSource(ints = {
        2,
        4,
        5,
        8})
    void even(int n) {
        assertEquals(0, n % 2);
    }

    @ParameterizedTest
    @CsvSource(useHeadersInDisplayName = true, textBlock = """
        word, length
        # a comment
        a, 1
        bb, 3
        """)
    void sizes(String word, int length) {
        assertEquals(length, word.length());
    }

    static Stream<Arguments> pairs() {
        return Stream.of(
            Arguments.of("a", 1),
            Arguments.of("bb", 3),
            Arguments.of("ccc", 3));
    }

    @ParameterizedTest
    @MethodSource("pairs")
    void lengths(String s, int n) {
        assertEquals(n, s.length());
    }

    @ParameterizedTest
    @NullSource
    @ValueSource(strings = {
        "x",
        "",
        "z"})
    void single(String s) {
        if (s != null) assertEquals(1, s.length());
    }
}
)java";

// The failing invocations and the line of each one's row in kJavaRows.
const std::map<std::string, int> kJavaFailing = {{"adds(int, int, int)[2]", 18},
                                                 {"even(int)[3]", 29},
                                                 {"sizes(String, int)[2]", 40},
                                                 {"lengths(String, int)[2]", 49},
                                                 {"single(String)[3]", 63}};

// Every testcase of the report JUnit 5's console launcher writes, and whether it failed.
std::map<std::string, bool> junit5_outcomes(const TempDir& dir) {
  const std::string root = dir.path().string();
  const std::string cmd = "cd '" + root +
                          "' && javac -d out -cp /usr/share/java/junit-jupiter-api.jar:/usr/share/java/"
                          "junit-jupiter-params.jar:/usr/share/java/apiguardian-api.jar src/test/java/com/ex/"
                          "TableTest.java > javac.log 2>&1 && java -jar /usr/share/java/junit-platform-console-"
                          "standalone.jar -cp out --select-class com.ex.TableTest --reports-dir reports "
                          "--disable-banner --details=none > junit.log 2>&1";
  (void)std::system(cmd.c_str());
  std::map<std::string, bool> out;
  const auto report = dir / "reports/TEST-junit-jupiter.xml";
  if (!std::filesystem::exists(report)) {
    ADD_FAILURE() << "javac or JUnit 5 did not run (scripts/setup.sh --tests installs default-jdk-headless and "
                     "junit5): " << testing::slurp(dir / "javac.log");
    return out;
  }
  const std::string xml = testing::slurp(report);
  for (size_t at = xml.find("<testcase name=\""); at != std::string::npos; at = xml.find("<testcase name=\"", at + 1)) {
    const size_t name = at + 16, end = xml.find('"', name);
    const size_t close = xml.find("</testcase>", end);
    out[xml.substr(name, end - name)] = xml.substr(end, close - end).find("<failure") != std::string::npos;
  }
  return out;
}

TEST(match_param_rows, a_junit5_invocation_index_finds_its_row_as_junit5_counts_them) {
  TempDir dir;
  write_file(dir / "src/test/java/com/ex/TableTest.java", kJavaRows);
  const auto outcomes = junit5_outcomes(dir);
  const CodeStructure s = analyze_code(kJavaRows, Language::java, "src/test/java/com/ex/TableTest.java");
  std::map<std::string, int> failing;
  for (const auto& [name, failed] : outcomes) {
    const ParamRows rows = match_param_rows(s, kJavaRows, "com.ex.TableTest#" + name);
    EXPECT_EQ(rows.note, "") << name;
    if (name == "single(String)[1]") {  // @NullSource: a row without a line
      EXPECT_TRUE(rows.failing.empty());
      EXPECT_EQ(rows.others.size(), 3u);
      continue;
    }
    ASSERT_EQ(rows.failing.size(), 1u) << name;
    EXPECT_FALSE(rows.others.empty()) << name;
    if (failed) failing[name] = rows.failing[0].first;
  }
  EXPECT_EQ(failing, kJavaFailing);  // JUnit's failures are exactly the bad rows, each matched to its line
  EXPECT_EQ(outcomes.size(), 16u);
}

TEST(estimate_scope, a_junit5_failing_row_is_the_tests_own_its_provider_support_its_siblings_outside) {
  const CodeStructure s = analyze_code(kJavaRows, Language::java, "src/test/java/com/ex/TableTest.java");
  const TestScope scope = estimate_scope(s, "com.ex.TableTest#lengths(String, int)[2]", kJavaRows);
  ASSERT_TRUE(scope.found);
  const auto role = [&](int line) { return scope.role[static_cast<size_t>(line - 1)]; };
  EXPECT_EQ(role(49), ScopeRole::own);  // Arguments.of("bb", 3)
  EXPECT_EQ(role(56), ScopeRole::own);  // the assertion
  EXPECT_EQ(role(48), ScopeRole::outside);
  EXPECT_EQ(role(50), ScopeRole::outside);
  EXPECT_EQ(role(47), ScopeRole::support);  // return Stream.of(
  EXPECT_EQ(role(22), ScopeRole::outside);  // another test
  const TestScope csv = estimate_scope(s, "com.ex.TableTest#adds(int, int, int)[2]", kJavaRows);
  EXPECT_EQ(csv.role[17], ScopeRole::own);  // "2, 3, 7"
  EXPECT_EQ(csv.role[15], ScopeRole::outside);
  EXPECT_EQ(csv.role[18], ScopeRole::outside);
}

TEST(match_param_rows, junit5_rows_kept_elsewhere_are_named_not_guessed) {
  const std::string elsewhere = R"java(package com.ex;

class OtherTest {
    static Stream<Arguments> built() {
        List<Arguments> out = new ArrayList<>();
        out.add(Arguments.of(1));
        return out.stream();
    }

    @ParameterizedTest
    @MethodSource("built")
    void fromBuilt(int n) {}

    @ParameterizedTest
    @EnumSource(Color.class)
    void colors(Color c) {}

    @ParameterizedTest
    @MethodSource("com.ex.Data#rows")
    void fromOther(int n) {}

    @ParameterizedTest
    @ValueSource(ints = {1, 2})
    void two(int n) {}
}
)java";
  const CodeStructure s = analyze_code(elsewhere, Language::java, "src/test/java/com/ex/OtherTest.java");
  EXPECT_EQ(match_param_rows(s, elsewhere, "com.ex.OtherTest#fromBuilt(int)[1]").note,
            "fromBuilt: its @MethodSource built does not return literal rows; the failing row [1] is not known");
  EXPECT_EQ(match_param_rows(s, elsewhere, "com.ex.OtherTest#colors(Color)[2]").note,
            "colors: its @EnumSource rows are not in the test file; the failing row [2] is not known");
  EXPECT_EQ(match_param_rows(s, elsewhere, "com.ex.OtherTest#fromOther(int)[1]").note,
            "fromOther: its @MethodSource com.ex.Data#rows is not in this file; the failing row [1] is not known");
  EXPECT_EQ(match_param_rows(s, elsewhere, "com.ex.OtherTest#two(int)[3]").note,
            "two: its sources hold 2 rows, none is [3]");
  EXPECT_EQ(match_param_rows(s, elsewhere, "com.ex.OtherTest#two(int)[2]").failing.size(), 1u);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
