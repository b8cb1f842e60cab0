// Java, JavaScript and TypeScript structure (one walker): the first byte picks the language, the rest is the file.
// Every line maps into the file, functions and classes are spans of it, the scope of every function named in it is
// lines of the file, and the stack-trace reader takes the same bytes without harm.
#include <string>

#include "code/brace_structure.h"
#include "formats/error_message.h"
#include "fuzz_util.h"
#include "code/scope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  if (size == 0) return 0;
  static constexpr Language kLanguages[] = {Language::java, Language::javascript, Language::typescript,
                                            Language::typescript};
  const Language language = kLanguages[data[0] % 4];
  const bool tsx = data[0] % 4 == 3;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const CodeStructure s = analyze_brace(text, language, tsx);
  const int n = s.line_count;
  SPARK_FUZZ_CHECK(s.language == language, "the language asked for");
  SPARK_FUZZ_CHECK(s.statement.size() == static_cast<size_t>(n) && s.block.size() == static_cast<size_t>(n) &&
                       s.function.size() == static_cast<size_t>(n) && s.kind.size() == static_cast<size_t>(n),
                   "one entry per line");
  for (int i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(i);
    SPARK_FUZZ_CHECK(s.statement[at] >= 0 && s.statement[at] <= i + 1, "a statement starts at or before its line");
    SPARK_FUZZ_CHECK(s.block[at] >= 0 && s.block[at] <= n, "a block is a line of the file");
    SPARK_FUZZ_CHECK(s.function[at] >= 0 && s.function[at] <= n, "a function is a line of the file");
    SPARK_FUZZ_CHECK((s.statement[at] == 0) == (s.block[at] == 0), "a line with a statement has a block");
  }
  for (const auto& f : s.functions)
    SPARK_FUZZ_CHECK(f.start >= 1 && f.start <= f.end && f.end <= n && f.def_line >= f.start && f.def_line <= f.end,
                     "a function's span");
  for (const auto& c : s.classes) SPARK_FUZZ_CHECK(c.start >= 1 && c.start <= c.end && c.end <= n, "a class's span");
  // The scope of a few of its functions, by the test ids spark would make for them.
  const size_t step = s.functions.size() / 8 + 1;
  for (size_t i = 0; i < s.functions.size(); i += step) {
    const std::string id = test_id_at(s, text, "tests/x.test.js", s.functions[i].def_line);
    const TestScope scope = estimate_scope(s, id);
    SPARK_FUZZ_CHECK(scope.role.size() == static_cast<size_t>(n), "a role per line");
    if (scope.found)
      SPARK_FUZZ_CHECK(scope.function_start >= 1 && scope.function_start <= scope.function_end &&
                           scope.function_end <= n,
                       "the test's span");
  }
  for (const auto& f : parse_stack_trace(text)) SPARK_FUZZ_CHECK(f.line > 0 && !f.path.empty(), "a frame has a place");
  return 0;
}
