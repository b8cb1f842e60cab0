// Python structure: every line maps into the file; units are lines of the file; and where the line scanner answers a
// function's span, it is the parser's answer (the scanner is a shortcut, never a second opinion).
#include <cstdio>
#include <string>

#include "fuzz_util.h"
#include "code/python_structure.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const CodeStructure s = analyze_python(text);
  const int n = s.line_count;
  SPARK_FUZZ_CHECK(s.statement.size() == static_cast<size_t>(n) && s.block.size() == static_cast<size_t>(n) &&
                       s.function.size() == static_cast<size_t>(n),
                   "one entry per line");
  for (int i = 0; i < n; ++i) {
    SPARK_FUZZ_CHECK(s.statement[static_cast<size_t>(i)] >= 0 && s.statement[static_cast<size_t>(i)] <= i + 1, "a statement starts at or before its line");
    // A block's id is its first statement's line; a comment before that statement is in the block (tests/fuzz
    // found "#\n:": line 1 in block 2), so a block id may follow a line of its own, but it is a line of the file.
    SPARK_FUZZ_CHECK(s.block[static_cast<size_t>(i)] >= 0 && s.block[static_cast<size_t>(i)] <= n, "a block is a line of the file");
    SPARK_FUZZ_CHECK(s.function[static_cast<size_t>(i)] >= 0 && s.function[static_cast<size_t>(i)] <= n, "a function is a line of the file");
  }
  PythonParser parser;
  // Each scan reads the whole file: at most 16 functions per input, spread over the file, keep big inputs fast.
  const size_t step = s.functions.size() / 16 + 1;
  for (size_t at = 0; at < s.functions.size(); at += step) {
    const auto& f = s.functions[at];
    SPARK_FUZZ_CHECK(f.start >= 1 && f.start <= f.def_line && f.def_line <= f.end && f.end <= n, "a function's span");
    const auto scanned = scan_function_span(text, f.class_name, f.name);
    if (!scanned) continue;  // the lines could not tell: the parser answers
    if (*scanned) {
      SPARK_FUZZ_CHECK((*scanned)->first >= 1 && (*scanned)->first <= (*scanned)->second && (*scanned)->second <= n,
                       "a scanned span is lines of the file");
    }
    // Where the file is not Python (a syntax error the scan does not see, such as a docstring closed early: tests/fuzz
    // found one), tree-sitter's error recovery is its own guess; the two are held to agree on valid files only.
    if (s.has_syntax_errors) continue;
    const auto parsed = parser.parsed_function_span(text, {}, f.class_name, f.name);
    if (*scanned != parsed) {
      const auto show = [](const std::optional<std::pair<int, int>>& span) {
        return span ? std::to_string(span->first) + "-" + std::to_string(span->second) : std::string("none");
      };
      std::fprintf(stderr, "%s%s%s: scanned %s, parsed %s\n", f.class_name.c_str(), f.class_name.empty() ? "" : ".",
                   f.name.c_str(), show(*scanned).c_str(), show(parsed).c_str());
    }
    SPARK_FUZZ_CHECK(*scanned == parsed, "the scan agrees with the parse");
  }
  return 0;
}
