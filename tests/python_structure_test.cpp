#include "code/python_structure.h"

#include <gtest/gtest.h>

#include "code/structure_cache.h"
#include "code/scope.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

namespace {
const char* kSource = R"py(import pytest


def helper(x):
    return x + 1


class TestThing:
    def setUp(self):
        self.v = 1

    @pytest.mark.slow
    def test_method(self):
        total = 0
        for i in range(3):
            total += i
        if total > 2:
            total = helper(
                total)
        # a comment
        assert total == 4

    def test_other(self):
        assert False


def test_func(tmp_path):
    def inner():
        return 2
    assert inner() == 2
)py";
}

TEST(analyze_python, maps_lines_to_statements_blocks_and_functions) {
  const auto s = analyze_python(kSource);
  EXPECT_FALSE(s.has_syntax_errors);
  EXPECT_EQ(s.line_count, 30);
  // Blank lines map to no unit.
  EXPECT_EQ(s.statement[1], 0);
  // A statement over two lines.
  EXPECT_EQ(unit_of(s, Level::statement, 18), 18);
  EXPECT_EQ(unit_of(s, Level::statement, 19), 18);
  EXPECT_EQ(s.statement_span(19), (std::pair<int, int>{18, 19}));
  // Functions: a decorated method (its decorator included), a nested function, module level.
  EXPECT_EQ(unit_of(s, Level::function, 14), 13);
  EXPECT_EQ(unit_of(s, Level::function, 12), 13);
  EXPECT_EQ(unit_of(s, Level::function, 29), 28);
  EXPECT_EQ(unit_of(s, Level::function, 30), 27);
  EXPECT_EQ(unit_of(s, Level::function, 1), 0);
  // Blocks as in a CFG: the function's straight-line start (decorator, def, first statement), the loop header
  // (a join), the loop body, the code after the loop up to and including the if condition, the if body, the join
  // after the if (which a comment opens).
  EXPECT_EQ(unit_of(s, Level::block, 12), 12);
  EXPECT_EQ(unit_of(s, Level::block, 13), 12);
  EXPECT_EQ(unit_of(s, Level::block, 14), 12);
  EXPECT_EQ(unit_of(s, Level::block, 15), 15);
  EXPECT_EQ(unit_of(s, Level::block, 16), 16);
  EXPECT_EQ(unit_of(s, Level::block, 17), 17);
  EXPECT_EQ(unit_of(s, Level::block, 18), 18);
  EXPECT_EQ(unit_of(s, Level::block, 19), 18);
  EXPECT_EQ(unit_of(s, Level::block, 20), 21);
  EXPECT_EQ(unit_of(s, Level::block, 21), 21);
  EXPECT_EQ(unit_of(s, Level::block, 24), 23);  // another function
  EXPECT_EQ(s.kind[20], "assert");
  EXPECT_EQ(s.kind[19], "comment");
  EXPECT_EQ(s.kind[13], "assign");
  // Function facts.
  const FunctionInfo* m = s.function_at(21);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name, "test_method");
  EXPECT_EQ(m->class_name, "TestThing");
  EXPECT_EQ(m->decorators, std::vector<std::string>{"pytest.mark.slow"});
  EXPECT_TRUE(m->calls.contains("helper"));
  EXPECT_TRUE(m->calls.contains("range"));
  const FunctionInfo* f = s.function_at(30);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name, "test_func");
  EXPECT_EQ(f->params, std::vector<std::string>{"tmp_path"});
  EXPECT_TRUE(f->calls.contains("inner"));  // called from its own body
}

TEST(analyze_python, still_maps_a_file_with_syntax_errors) {
  const auto s = analyze_python("def test_x(:\n    assert 1 ==\n\nx = (\n");
  EXPECT_TRUE(s.has_syntax_errors);
  EXPECT_EQ(s.line_count, 4);
  for (int l : {1, 2, 4}) EXPECT_NE(unit_of(s, Level::statement, l), 0) << l;
  EXPECT_EQ(unit_of(s, Level::statement, 3), 0);
}

TEST(PythonParser, incremental_reparse_gives_the_same_structure_as_a_fresh_parse) {
  PythonParser parser;
  const std::string a = kSource;
  std::string b = a;
  b.replace(b.find("total == 4"), 10, "total != 4 and True");
  (void)parser.analyze(a);
  const auto inc = parser.analyze(b);
  const auto fresh = analyze_python(b);
  EXPECT_EQ(inc.statement, fresh.statement);
  EXPECT_EQ(inc.block, fresh.block);
  EXPECT_EQ(inc.function, fresh.function);
  EXPECT_EQ(inc.kind, fresh.kind);
}

TEST(parse_test_id, splits_pytest_and_unittest_ids) {
  const auto p = parse_test_id("tests/test_x.py::TestC::test_f[1-a::b]");
  EXPECT_EQ(p.path, "tests/test_x.py");
  EXPECT_EQ(p.classes, std::vector<std::string>{"TestC"});
  EXPECT_EQ(p.function, "test_f");
  EXPECT_EQ(parse_test_id("tests.test_x.TestC.test_g").function, "test_g");
}

TEST(estimate_scope, marks_own_support_module_and_sibling_lines) {
  const auto s = analyze_python(kSource);
  const auto scope = estimate_scope(s, "tests/test_thing.py::TestThing::test_method");
  ASSERT_TRUE(scope.found);
  const auto role = [&](int line) { return scope.role[static_cast<size_t>(line - 1)]; };
  EXPECT_EQ(role(14), ScopeRole::own);
  EXPECT_EQ(role(12), ScopeRole::own);       // its decorator
  EXPECT_EQ(role(10), ScopeRole::support);   // setUp
  EXPECT_EQ(role(5), ScopeRole::support);    // helper it calls
  EXPECT_EQ(role(24), ScopeRole::outside);   // sibling test
  EXPECT_EQ(role(1), ScopeRole::module);
  EXPECT_FALSE(estimate_scope(s, "tests/x.py::test_missing").found);
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {

TEST(PythonParser, reparses_a_new_version_of_a_named_file_after_many_others) {
  PythonParser parser(2);
  const std::string a = kSource;
  (void)parser.analyze(a, "tests/test_thing.py");
  for (int i = 0; i < 20; ++i) (void)parser.analyze("def test_" + std::to_string(i) + "():\n    assert True\n", "other.py");
  std::string b = a;
  b.replace(b.find("total = 0"), 9, "total = 1");
  const auto inc = parser.analyze(b, "tests/test_thing.py");
  const auto fresh = analyze_python(b);
  EXPECT_EQ(inc.statement, fresh.statement);
  EXPECT_EQ(inc.block, fresh.block);
  EXPECT_EQ(inc.kind, fresh.kind);
  ASSERT_EQ(inc.functions.size(), fresh.functions.size());
  for (size_t i = 0; i < inc.functions.size(); ++i) EXPECT_EQ(inc.functions[i].calls, fresh.functions[i].calls);
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {

TEST(PythonParser, function_span_agrees_with_estimate_scope) {
  PythonParser parser;
  const auto s = analyze_python(kSource);
  for (const std::string id : {"t.py::TestThing::test_method", "t.py::test_func", "t.py::TestThing::test_other",
                               "t.py::helper", "t.py::test_method"}) {
    const auto parts = parse_test_id(id);
    const auto scope = estimate_scope(s, id);
    const auto span = parser.function_span(kSource, "t.py", parts.classes.empty() ? "" : parts.classes.back(), parts.function);
    ASSERT_TRUE(scope.found) << id;
    ASSERT_TRUE(span) << id;
    EXPECT_EQ(span->first, scope.function_start) << id;
    EXPECT_EQ(span->second, scope.function_end) << id;
  }
  EXPECT_FALSE(parser.function_span(kSource, "t.py", "", "test_missing"));
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {

TEST(PythonParser, reparses_edits_far_apart_as_a_fresh_parse_would) {
  // Two versions of a large file changed at its top and at its bottom (mutations of different tests): the reparse
  // edits the old tree in each place; the structure must equal a fresh parse's, also when an edit opens a block or
  // the file has no final newline.
  std::string a;
  for (int i = 0; i < 300; ++i)
    a += "def test_" + std::to_string(i) + "():\n    x = " + std::to_string(i) + "\n    assert x == " + std::to_string(i) + "\n\n";
  a += "def test_last():\n    assert True";
  std::vector<std::string> versions;
  std::string b = a;
  b.replace(b.find("x = 3\n"), 5, "x = 4");
  b.replace(b.find("x = 290\n"), 7, "if x: (");
  versions.push_back(b);
  std::string c = a;
  c.replace(c.find("assert x == 10\n"), 14, "assert x == 10  # note");
  c.replace(c.find("assert True"), 11, "assert False, 'no'");
  versions.push_back(c);
  versions.push_back(a);
  PythonParser parser;
  (void)parser.analyze(a, "tests/test_big.py");
  for (const auto& v : versions) {
    const auto inc = parser.analyze(v, "tests/test_big.py");
    const auto fresh = analyze_python(v);
    EXPECT_EQ(inc.has_syntax_errors, fresh.has_syntax_errors);
    EXPECT_EQ(inc.statement, fresh.statement);
    EXPECT_EQ(inc.block, fresh.block);
    EXPECT_EQ(inc.function, fresh.function);
    EXPECT_EQ(inc.kind, fresh.kind);
    ASSERT_EQ(inc.functions.size(), fresh.functions.size());
  }
}

// Every function's span by the scan and by the parse, asked as the test ids ask (with its class, and bare).
void expect_scan_agrees(const std::string& source) {
  PythonParser parser;
  const auto st = parser.analyze(source);
  ASSERT_FALSE(st.functions.empty());
  for (const auto& f : st.functions)
    for (const std::string& cls : {f.class_name, std::string(), std::string("Missing")}) {
      const auto scanned = scan_function_span(source, cls, f.name);
      ASSERT_TRUE(scanned) << f.name << " was not scanned";
      const auto parsed = parser.parsed_function_span(source, "", cls, f.name);
      EXPECT_EQ(*scanned, parsed) << cls << "::" << f.name << "\n" << source;
    }
}

TEST(scan_function_span, agrees_with_the_parser_on_strings_brackets_continuations_and_comments) {
  // Triple-quoted strings and brackets whose lines start at column 0, a backslash continuation, decorators with
  // arguments over lines, nested classes, one-line defs, defs inside blocks (not found at module level), and
  // comments after a body: deeper ones stay in it, shallower ones close it only when the code after them is
  // shallower too.
  expect_scan_agrees(R"py(import textwrap


@pytest.mark.parametrize(
    "a",
[1, 2],
)
def test_strings(a):
    text = textwrap.dedent("""\
def not_a_function():
    pass
""")
    other = '''
class NotAClass:
'''
    x = [
1,
    ]
    y = 1 + \
2
    assert "#" in '# not a comment'  # a comment
    # trailing, as deep as the body


class TestOuter:
    class Inner:
        def test_inner(self):
            pass
# shallow comment inside the body
            return 1
        # as deep as Inner's body: closes test_inner, stays in Inner

    def test_outer(self): return 2

    def test_blocks(self):
        for i in range(3):
            if i:
                pass
    # shallower than the if and the for, as deep as the method: kept
  # shallower than the method: closes it

if True:
    def test_hidden():
        pass


def test_last():
    x = 1
        # deeper than the body
# at column 0: closes it
)py");
}

TEST(scan_function_span, declines_tabs_and_unbalanced_text_and_the_parser_answers) {
  EXPECT_FALSE(scan_function_span("def test_a():\n\tpass\n", "", "test_a"));
  EXPECT_FALSE(scan_function_span("def test_a():\n    x = (\n", "", "test_a"));
  EXPECT_FALSE(scan_function_span("def test_a():\n    x = '''\n", "", "test_a"));
  PythonParser parser;
  const auto span = parser.function_span("def test_a():\n\tpass\n", "", "", "test_a");
  ASSERT_TRUE(span);
  EXPECT_EQ(*span, (std::pair<int, int>{1, 2}));
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {
namespace {

void expect_same_structure(const CodeStructure& a, const CodeStructure& b) {
  EXPECT_EQ(a.line_count, b.line_count);
  EXPECT_EQ(a.has_syntax_errors, b.has_syntax_errors);
  EXPECT_EQ(a.statement, b.statement);
  EXPECT_EQ(a.block, b.block);
  EXPECT_EQ(a.function, b.function);
  EXPECT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.functions.size(), b.functions.size());
  for (size_t i = 0; i < a.functions.size(); ++i) {
    EXPECT_EQ(a.functions[i].name, b.functions[i].name);
    EXPECT_EQ(a.functions[i].class_name, b.functions[i].class_name);
    EXPECT_EQ(a.functions[i].start, b.functions[i].start);
    EXPECT_EQ(a.functions[i].end, b.functions[i].end);
    EXPECT_EQ(a.functions[i].def_line, b.functions[i].def_line);
    EXPECT_EQ(a.functions[i].params, b.functions[i].params);
    EXPECT_EQ(a.functions[i].decorators, b.functions[i].decorators);
    EXPECT_EQ(a.functions[i].calls, b.functions[i].calls);
  }
  ASSERT_EQ(a.classes.size(), b.classes.size());
  for (size_t i = 0; i < a.classes.size(); ++i) {
    EXPECT_EQ(a.classes[i].name, b.classes[i].name);
    EXPECT_EQ(a.classes[i].start, b.classes[i].start);
    EXPECT_EQ(a.classes[i].end, b.classes[i].end);
  }
}

}  // namespace

TEST(StructureCache, a_structure_round_trips_through_bytes_and_damaged_bytes_are_refused) {
  for (const std::string& source : {std::string(kSource), std::string("def broken(:\n    x = (\n"), std::string()}) {
    const CodeStructure s = analyze_python(source);
    const std::string bytes = serialize_structure(s, 42);
    auto back = deserialize_structure(bytes, 42);
    ASSERT_TRUE(back);
    expect_same_structure(s, *back);
    EXPECT_FALSE(deserialize_structure(bytes, 43));  // another spark binary's
    // Cut short at every length, and one byte changed at a spread of places: refused or read whole, never a crash.
    for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(deserialize_structure(std::string_view(bytes).substr(0, n), 42));
    EXPECT_FALSE(deserialize_structure(bytes + "x", 42));
    for (size_t at = 8; at < bytes.size(); at += 7) {
      std::string changed = bytes;
      changed[at] = static_cast<char>(changed[at] ^ 0xff);
      (void)deserialize_structure(changed, 42);
    }
  }
}

TEST(StructureCache, a_new_cache_reads_what_another_parsed_from_the_folder) {
  testing::TempDir dir;
  const auto folder = dir / "structures";
  std::shared_ptr<const CodeStructure> first;
  {
    StructureCache cache;
    cache.persist_in(folder);
    first = cache.get(kSource, "tests/test_thing.py");
    EXPECT_EQ(cache.parsed(), 1u);
    EXPECT_EQ(cache.loaded(), 0u);
  }
  StructureCache again;
  again.persist_in(folder);
  auto second = again.get(kSource, "tests/test_thing.py");
  EXPECT_EQ(again.parsed(), 0u);
  EXPECT_EQ(again.loaded(), 1u);
  expect_same_structure(*first, *second);

  // A damaged file is parsed again (and replaced); the folder keeps the newest max_files structures.
  for (const auto& e : std::filesystem::directory_iterator(folder)) testing::write_file(e.path(), "SPKPYS01 cut");
  StructureCache third;
  third.persist_in(folder, 3);
  expect_same_structure(*first, *third.get(kSource));
  EXPECT_EQ(third.parsed(), 1u);
  for (int i = 0; i < 6; ++i) third.get("def test_" + std::to_string(i) + "():\n    assert True\n");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files += e.path().extension() == ".struct";
  EXPECT_EQ(files, 3u);
}

}  // namespace spark::SPARK_TEST_FILE_ID
