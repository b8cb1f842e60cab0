// The failing test's static scope: which lines of the test files the failing test can execute.
//
// The test id names the function: a pytest node id "tests/test_x.py::TestC::test_f[param]", a JUnit id
// "com.x.FooTest#testBar" (or Surefire's "com.x.FooTest.testBar"), a JavaScript id "tests/x.test.js > suite > case".
// From the structure (code_structure.h) we take its own lines, its class's set-up and tear-down (setUp, fixtures it
// names as parameters, @BeforeEach methods, beforeEach callbacks of its suites), and the same-file helpers it calls
// (transitively, depth-limited). The paper's baseline
// prunes by an estimated execution trace for the same reason: a sibling test's lines cannot cause this failure.
// Contract: pure functions over a CodeStructure the caller owns (and keeps alive for the call): thread-safe. An id
// that names no test in the file gives an empty scope or nullopt, never an error.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "code/code_structure.h"

namespace spark {

struct TestIdParts {
  std::string path;                  // "tests/test_x.py"; Java: "com/x/FooTest.java" (a path's tail)
  std::vector<std::string> classes;  // {"TestC"}; Java {"FooTest", "Inner"}; JavaScript the suites
  std::string function;              // "test_f" (parameters stripped); JavaScript the test's title
};
TestIdParts parse_test_id(std::string_view test_id, Language language = Language::python);
// The language a test id is written in when nothing else tells: " > " after a .js/.ts path is JavaScript or
// TypeScript; " > " without a path (Gradle's "FooTest > testBar()") or a "#" without "/" is Java; anything else is
// Python (a dotted "pkg.FooTest.testBar" too: unittest writes ids that way, so Surefire's form needs the language).
Language language_of_test_id(std::string_view test_id);

enum class ScopeRole : unsigned char {
  outside = 0,  // another test's lines
  module = 1,   // module-level code (imports, constants) and class bodies: runs, rarely the fault
  support = 2,  // set-up, fixtures, helpers the test calls
  own = 3,      // the test function itself
};

struct TestScope {
  bool found = false;           // the test function was located in this file
  std::vector<ScopeRole> role;  // indexed by line - 1
  int function_start = 0, function_end = 0;
};

// The test id of the test function holding `line` (1-based) of a Java, JavaScript or TypeScript file, in that
// language's form ("com.x.FooTest#testBar", "tests/x.test.js > suite > case"), found from the structure: the
// innermost function holding the line that is a test (@Test and the like, a test(...) callback), else the innermost
// named one. Java's package comes from the file's `package` line. `path` itself when no function holds the line.
std::string test_id_at(const CodeStructure& s, std::string_view content, std::string_view path, int line);

// Scope of `test_id` in one file with structure `s` (the id read in `s.language`). When the function is not in this
// file, `found` is false and every line is `module` (no basis to prefer one line over another). With the file's
// `content`, a parametrized Python test's failing row (match_param_rows) stays the test's own and the other rows of
// its `parametrize` lists become `outside`: another row's data cannot make this row fail.
TestScope estimate_scope(const CodeStructure& s, std::string_view test_id, std::string_view content = {});

// The rows of a Python test's `@pytest.mark.parametrize` lists matched to its id's parameters
// ("tests/t.py::test_table[2-3-7]"): each row's id is computed as pytest 7 computes it (`pytest.param(..., id=)`,
// `ids=[...]`, the values themselves: strings ASCII-escaped, numbers, True/False/None; any other value its argname
// and row index; duplicates numbered), stacked lists joined by "-" from the innermost; a parametrized fixture's
// ids may stand before or after them ("native-2-3-7"). A list that is not written as literal rows (built by a call,
// or a name) is not matched and says so in `note`.
// A JUnit 5 `@ParameterizedTest`'s id ends in its invocation's index ("com.x.FooTest#adds(int, int)[2]", as the
// console launcher, Surefire and Gradle write it): the index counts the rows of its sources in the order they are
// written: `@CsvSource` (each string, or each line of its text block but comments; the header row left out under
// `useHeadersInDisplayName`), `@ValueSource` (each value), `@MethodSource` (each argument of the provider's literal
// `Stream.of(...)`, `List.of(...)`, `Arrays.asList(...)` or array initializer; the provider is named in `sources`),
// `@NullSource`/`@EmptySource` (a row without a line); a source whose rows are elsewhere (`@EnumSource`,
// `@CsvFileSource`, `@ArgumentsSource`, a provider in another class or one that filters) says so in `note`.
struct ParamRows {
  std::vector<std::pair<int, int>> failing;  // the failing id's rows (first and last line), one per list
  std::vector<std::pair<int, int>> others;   // the lists' other rows
  std::vector<std::pair<int, int>> sources;  // Java: the @MethodSource providers the rows are in (first, last line)
  std::string note;                          // why the id was not matched ("" when it was, or it has no parameters)
};
ParamRows match_param_rows(const CodeStructure& s, std::string_view content, std::string_view test_id);

// The lines of each conftest.py (by path) a Python test can run: the fixtures it asks for (its parameters and
// `usefixtures`, then their parameters, among the fixtures of its file and of those conftest.py files), autouse
// fixtures, pytest's hooks (`pytest_*`), and module-level code. nullopt when the test function is not found (a
// collection error names none): then all of it.
struct CodeFile {
  std::string_view path, content;
};
std::optional<std::map<std::string, std::set<int>>> conftest_reach(const std::string& test_id,
                                                                    const CodeFile& test_file,
                                                                    const std::vector<CodeFile>& conftests);
// The same over structures already parsed (many tests of one file against the same conftest.py files).
struct ParsedFile {
  std::string_view path;
  const CodeStructure* structure;
};
std::optional<std::map<std::string, std::set<int>>> conftest_reach(const std::string& test_id,
                                                                    const CodeStructure& test_file,
                                                                    const std::vector<ParsedFile>& conftests);

// The text of the test function's own lines (for the embedder's test-function block); "" when not found.
std::string test_function_text(std::string_view content, const TestScope& scope);
// The text of lines [first, last].
std::string lines_text(std::string_view content, int first, int last);

}  // namespace spark
