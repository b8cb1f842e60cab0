// Python structure of one test file (code_structure.h), from tree-sitter (grammar tree-sitter-python 0.23.6, language
// ABI 14), with the incremental reparse knowledge bases need (many versions of one test file) and the light lookup of
// a test function's lines.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "code/code_structure.h"

struct TSTree;  // tree-sitter's (C) syntax tree

namespace spark {

CodeStructure analyze_python(std::string_view source);

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
  CodeStructure analyze(std::string_view source, std::string_view path = {});

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
std::optional<std::optional<std::pair<int, int>>> scan_function_span(std::string_view source,
                                                                     const std::string& class_name,
                                                                     const std::string& function);

}  // namespace spark
