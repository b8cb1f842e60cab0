// The failing test's static scope: which lines of the test files the failing test can execute.
//
// The test id (pytest node id "tests/test_x.py::TestC::test_f[param]") names the function; from the tree-sitter
// structure we take its own lines, its class's set-up and tear-down methods, the fixtures it names as parameters
// (and theirs, transitively), and the same-file helpers it calls (transitively, depth-limited). The paper's baseline
// prunes by an estimated execution trace for the same reason: a sibling test's lines cannot cause this failure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "python_structure.h"

namespace spark {

struct TestIdParts {
  std::string path;                   // "tests/test_x.py"
  std::vector<std::string> classes;   // {"TestC"}
  std::string function;               // "test_f" (parameters stripped)
};
TestIdParts parse_test_id(std::string_view test_id);

enum class ScopeRole : unsigned char {
  outside = 0,   // another test's lines
  module = 1,    // module-level code (imports, constants) and class bodies: runs, rarely the fault
  support = 2,   // set-up, fixtures, helpers the test calls
  own = 3,       // the test function itself
};

struct TestScope {
  bool found = false;               // the test function was located in this file
  std::vector<ScopeRole> role;      // indexed by line - 1
  int function_start = 0, function_end = 0;
};

// Scope of `test_id` in one file with structure `s`. When the function is not in this file, `found` is false and
// every line is `module` (no basis to prefer one line over another).
TestScope estimate_scope(const PythonStructure& s, std::string_view test_id);

// The text of the test function's own lines (for the embedder's scope block); "" when not found.
std::string scope_text(std::string_view content, const TestScope& scope);
// The text of lines [first, last].
std::string lines_text(std::string_view content, int first, int last);

}  // namespace spark
