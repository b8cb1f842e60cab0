#include "test_scope.h"

#include <algorithm>
#include <set>

#include "text.h"

namespace spark {

TestIdParts parse_test_id(std::string_view id) {
  TestIdParts parts;
  // Parameters ("[1-a::b]") may hold anything, "::" included: cut them off first.
  if (const auto br = id.find('['); br != std::string_view::npos) id = id.substr(0, br);
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    const size_t sep = id.find("::", start);
    pieces.push_back(id.substr(start, sep == std::string_view::npos ? std::string_view::npos : sep - start));
    if (sep == std::string_view::npos) break;
    start = sep + 2;
  }
  if (pieces.size() == 1) {
    // unittest-style dotted ids ("tests.test_x.TestC.test_f"): the last part is the function.
    const auto dot = id.rfind('.');
    parts.function = std::string(dot == std::string_view::npos ? id : id.substr(dot + 1));
  } else {
    parts.path = std::string(pieces.front());
    for (size_t i = 1; i + 1 < pieces.size(); ++i) parts.classes.emplace_back(pieces[i]);
    parts.function = std::string(pieces.back());
  }
  return parts;
}

TestScope estimate_scope(const PythonStructure& s, std::string_view test_id) {
  TestScope scope;
  const auto n = static_cast<size_t>(s.line_count);
  scope.role.assign(n, ScopeRole::module);
  const TestIdParts parts = parse_test_id(test_id);
  const std::string cls = parts.classes.empty() ? "" : parts.classes.back();

  const FunctionInfo* test = nullptr;
  for (const auto& f : s.functions) {
    if (f.name != parts.function) continue;
    if (!cls.empty() && f.class_name != cls) continue;
    if (cls.empty() && !f.class_name.empty() && test) continue;  // prefer a module-level function
    test = &f;
    if (f.class_name == cls) break;
  }
  if (!test) return scope;
  scope.found = true;
  scope.function_start = test->start;
  scope.function_end = test->end;

  // Every function's lines start as outside; module-level and class-body lines stay `module`.
  for (const auto& f : s.functions)
    for (int l = f.start; l <= f.end && l <= s.line_count; ++l) scope.role[static_cast<size_t>(l - 1)] = ScopeRole::outside;

  // Support: set-up methods of the class, fixtures by parameter name (transitively), helpers called (transitively).
  static const std::set<std::string, std::less<>> kSetup = {
      "setUp", "tearDown", "setUpClass", "tearDownClass", "setup_method", "teardown_method", "setup_class",
      "teardown_class", "setup", "teardown", "asyncSetUp", "asyncTearDown", "__init__"};
  std::set<const FunctionInfo*> support;
  std::vector<const FunctionInfo*> work{test};
  std::set<std::string> wanted;
  const auto want_names = [&](const FunctionInfo& f) {
    for (const auto& p : f.params) wanted.insert(p);
    for (const auto& c : f.calls) wanted.insert(c);
  };
  for (const auto& f : s.functions)
    if (!test->class_name.empty() && f.class_name == test->class_name && kSetup.contains(f.name)) work.push_back(&f);
  for (const auto& f : s.functions)  // module-level setup_module / autouse fixtures
    if (f.class_name.empty() && (f.name == "setup_module" || f.name == "setup_function" ||
                                 std::any_of(f.decorators.begin(), f.decorators.end(), [](const std::string& d) {
                                   return d.find("autouse=True") != std::string::npos;
                                 })))
      work.push_back(&f);
  for (int depth = 0; depth < 4 && !work.empty(); ++depth) {
    std::vector<const FunctionInfo*> next;
    for (const auto* f : work) {
      if (!support.insert(f).second) continue;
      want_names(*f);
    }
    for (const auto& f : s.functions) {
      if (support.contains(&f) || !wanted.contains(f.name)) continue;
      // A helper in another test class is not reachable by a bare name; methods of the same class are.
      if (!f.class_name.empty() && f.class_name != test->class_name && !f.is_fixture()) continue;
      next.push_back(&f);
    }
    work = std::move(next);
  }
  for (const auto* f : support)
    for (int l = f->start; l <= f->end && l <= s.line_count; ++l) scope.role[static_cast<size_t>(l - 1)] = ScopeRole::support;
  for (int l = test->start; l <= test->end && l <= s.line_count; ++l) {
    // A function nested in the test is still the test's own code.
    scope.role[static_cast<size_t>(l - 1)] = ScopeRole::own;
  }
  return scope;
}

std::string lines_text(std::string_view content, int first, int last) {
  const auto lines = split_lines(content);
  std::string out;
  for (int l = std::max(1, first); l <= last && l <= static_cast<int>(lines.size()); ++l) {
    out.append(lines[static_cast<size_t>(l - 1)]);
    out.push_back('\n');
  }
  return out;
}

std::string scope_text(std::string_view content, const TestScope& scope) {
  return scope.found ? lines_text(content, scope.function_start, scope.function_end) : std::string();
}

}  // namespace spark
