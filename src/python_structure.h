// Python structure of one test file, from tree-sitter (grammar tree-sitter-python 0.23.6, language ABI 14).
//
// Every line of the file (1-based, the file's own numbering) maps to the units the paper localizes at:
// its AST statement, its CFG basic block (per function, split at control flow), its function (methods and nested
// functions included; module-level lines belong to the pseudo-function 0) and the file. Unit ids are the first line of
// the unit, so they read as locations. Blank lines map to no unit (0). A file with syntax errors still maps: lines
// the parser could not place become statements and blocks of their own.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

struct TSTree;  // tree-sitter's (C) syntax tree

namespace spark {

struct FunctionInfo {
  std::string name;
  std::string class_name;        // enclosing class, "" at module level
  int start = 0;                 // first line, decorators included
  int end = 0;                   // last line
  int def_line = 0;              // the `def` line
  std::vector<std::string> params;
  std::vector<std::string> decorators;  // decorator text without '@'
  std::set<std::string> calls;          // names it calls, nested functions included: f(), obj.f(), self.f()
  bool is_fixture() const;
};

struct ClassInfo {
  std::string name;
  int start = 0;
  int end = 0;
};

struct PythonStructure {
  int line_count = 0;
  bool has_syntax_errors = false;
  // Indexed by line - 1. 0 means "no unit" (blank line).
  std::vector<int> statement;
  std::vector<int> block;
  std::vector<int> function;      // def line of the innermost function, 0 for module level
  std::vector<std::string> kind;  // statement kind: "assert", "assign", "call", "with", "comment", ...
  std::vector<FunctionInfo> functions;
  std::vector<ClassInfo> classes;

  // The innermost function containing `line`, or nullptr.
  const FunctionInfo* function_at(int line) const;
  // Statement span [first, last] of the statement containing `line`.
  std::pair<int, int> statement_span(int line) const;
};

PythonStructure analyze_python(std::string_view source);

// A parser that remembers its last few trees, and the last tree of each file path it was told, and reparses a new
// version of a file incrementally (tree-sitter's ts_tree_edit) when it shares at least half its text with one of
// them: knowledge bases hold many versions of the same test file. Not thread-safe.
class PythonParser {
 public:
  explicit PythonParser(size_t keep = 8);
  ~PythonParser();
  PythonParser(PythonParser&&) noexcept;
  PythonParser& operator=(PythonParser&&) noexcept;
  // `path` (optional) names the file, so a later version of it can be reparsed from this one.
  PythonStructure analyze(std::string_view source, std::string_view path = {});

  // Lines [first, last] of the function a test id names (decorators included), found without building the whole
  // structure: only module and class bodies are searched. Chooses as estimate_scope does (the method of the named
  // class; without a class, a module-level function before a method). nullopt when not found there. Found by
  // scan_function_span (no parse: 30-100x faster) unless the lines cannot tell; then by parsed_function_span.
  std::optional<std::pair<int, int>> function_span(std::string_view source, std::string_view path,
                                                   const std::string& class_name, const std::string& function);
  // The same from tree-sitter's tree (the reference the scan is checked against).
  std::optional<std::pair<int, int>> parsed_function_span(std::string_view source, std::string_view path,
                                                          const std::string& class_name, const std::string& function);

 private:
  const TSTree* parse(std::string_view source, std::string_view path);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// PythonParser::function_span's answer from the lines alone, without a parse: strings (triple-quoted ones over
// lines), brackets, backslash continuations, comments and indentation tell where each statement starts and where a
// `def`'s block ends. nullopt when the lines cannot tell (tabs or form feeds in indentation, a string or bracket
// left open at the end of the file): then the parser decides. Checked against the parser on every function of the
// development corpus (tests/python_structure_test.cpp, dev_corpus_test.cpp).
std::optional<std::optional<std::pair<int, int>>> scan_function_span(std::string_view source, const std::string& class_name,
                                                                     const std::string& function);

// Unit granularity names used by `--level`.
enum class Level { line, statement, block, function };
std::string_view level_name(Level level);
bool parse_level(std::string_view text, Level& out);
// The unit id of `line` at `level` (the line itself at line level).
int unit_of(const PythonStructure& s, Level level, int line);

}  // namespace spark
