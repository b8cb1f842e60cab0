#include "code/test_scope.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "base/text.h"

namespace spark {

namespace {

// "com.x.FooTest#testBar(int)[2]", "com.x.FooTest.testBar", "com.x.Outer$Inner#test", "FooTest > testBar()".
TestIdParts parse_java_test_id(std::string_view id) {
  TestIdParts parts;
  id = trim(id);
  std::string_view cls, method;
  if (const auto gt = id.find(" > "); gt != std::string_view::npos) {  // Gradle's "Class > method()"
    cls = id.substr(0, gt);
    method = id.substr(gt + 3);
  } else if (const auto hash = id.find('#'); hash != std::string_view::npos) {
    cls = id.substr(0, hash);
    method = id.substr(hash + 1);
  } else {
    const auto paren = id.find('(');
    const auto dot = id.substr(0, paren).rfind('.');
    cls = dot == std::string_view::npos ? std::string_view() : id.substr(0, dot);
    method = dot == std::string_view::npos ? id : id.substr(dot + 1);
  }
  for (const char stop : {'(', '[', ' '})
    if (const auto p = method.find(stop); p != std::string_view::npos) method = method.substr(0, p);
  parts.function = std::string(method);
  // Package: the dotted prefix before the first segment that starts upper-case (the top-level class).
  std::vector<std::string_view> segments;
  for (size_t start = 0;;) {
    const auto dot = cls.find('.', start);
    segments.push_back(cls.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  size_t top = 0;
  while (top + 1 < segments.size() &&
         !(!segments[top].empty() && std::isupper(static_cast<unsigned char>(segments[top][0]))))
    ++top;
  std::string path;
  for (size_t i = 0; i < top; ++i) path.append(segments[i]).push_back('/');
  for (size_t i = top; i < segments.size(); ++i) {
    std::string_view seg = segments[i];
    for (size_t start = 0;;) {  // nested classes by '$' or by '.'
      const auto dollar = seg.find('$', start);
      const auto piece = seg.substr(start, dollar == std::string_view::npos ? std::string_view::npos : dollar - start);
      if (!piece.empty()) parts.classes.emplace_back(piece);
      if (dollar == std::string_view::npos) break;
      start = dollar + 1;
    }
  }
  if (!parts.classes.empty()) parts.path = path + parts.classes.front() + ".java";
  return parts;
}

// "tests/x.test.js > suite > case".
TestIdParts parse_js_test_id(std::string_view id) {
  TestIdParts parts;
  std::vector<std::string_view> pieces;
  for (size_t start = 0;;) {
    const auto sep = id.find(" > ", start);
    pieces.push_back(trim(id.substr(start, sep == std::string_view::npos ? std::string_view::npos : sep - start)));
    if (sep == std::string_view::npos) break;
    start = sep + 3;
  }
  size_t first = 0;
  if (pieces.size() > 1 && language_of_path(pieces.front()).has_value()) {
    parts.path = std::string(pieces.front());
    first = 1;
  }
  for (size_t i = first; i + 1 < pieces.size(); ++i) parts.classes.emplace_back(pieces[i]);
  parts.function = std::string(pieces.back());
  return parts;
}

}  // namespace

Language language_of_test_id(std::string_view id) {
  if (const auto gt = id.find(" > "); gt != std::string_view::npos) {
    const auto lang = language_of_path(trim(id.substr(0, gt)));
    if (lang == Language::javascript || lang == Language::typescript) return *lang;
    if (!lang && id.find('/') == std::string_view::npos) return Language::java;  // Gradle's "Class > method()"
  }
  if (id.find("::") != std::string_view::npos || id.find(".py") != std::string_view::npos) return Language::python;
  if (id.find('#') != std::string_view::npos && id.find('/') == std::string_view::npos) return Language::java;
  return Language::python;
}

TestIdParts parse_test_id(std::string_view id, Language language) {
  if (language == Language::java) return parse_java_test_id(id);
  if (language == Language::javascript || language == Language::typescript) return parse_js_test_id(id);
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

namespace {

void mark(TestScope& scope, const CodeStructure& s, const FunctionInfo& f, ScopeRole role) {
  for (int l = f.start; l <= f.end && l <= s.line_count; ++l) scope.role[static_cast<size_t>(l - 1)] = role;
}

// The test was found: its span, and every function's lines as outside (module-level and class-body lines stay
// `module`) until the support and the test are marked over them.
void found(TestScope& scope, const CodeStructure& s, const FunctionInfo& test) {
  scope.found = true;
  scope.function_start = test.start;
  scope.function_end = test.end;
  for (const auto& f : s.functions) mark(scope, s, f, ScopeRole::outside);
}

// A class path and an ancestor of it (or the path itself): "A.B" is inside "A"; "" holds everything.
bool within(std::string_view inner, std::string_view outer, std::string_view sep) {
  if (outer.empty() || inner == outer) return true;
  return inner.size() > outer.size() + sep.size() && inner.starts_with(outer) &&
         inner.substr(outer.size(), sep.size()) == sep;
}

// Java, JavaScript, TypeScript: classes and suites nest; set-up is marked on the function (FunctionInfo::setup).
TestScope estimate_brace_scope(const CodeStructure& s, std::string_view test_id) {
  TestScope scope;
  const auto n = static_cast<size_t>(s.line_count);
  scope.role.assign(n, ScopeRole::module);
  const bool java = s.language == Language::java;
  const std::string_view sep = java ? "." : " > ";
  const TestIdParts parts = parse_test_id(test_id, s.language);
  std::string cls;
  for (const auto& c : parts.classes) cls += (cls.empty() ? "" : std::string(sep)) + c;
  // Java ids may name a nested class from its top-level class or not: "Outer.Inner" matches "Inner".
  const auto class_matches = [&](const FunctionInfo& f) {
    return f.class_name == cls || (java && !cls.empty() && !f.class_name.empty() &&
                                   (f.class_name.ends_with("." + cls) || cls.ends_with("." + f.class_name)));
  };
  const FunctionInfo* test = nullptr;
  for (const auto& f : s.functions) {
    if (f.name != parts.function || f.setup) continue;
    if (class_matches(f)) {
      test = &f;
      break;
    }
    if (!test) test = &f;  // the name alone, when the classes do not match (a reporter that drops the suites)
  }
  if (!test) return scope;
  found(scope, s, *test);
  const std::string& home = test->class_name;
  std::set<const FunctionInfo*> support;
  std::vector<const FunctionInfo*> work{test};
  for (const auto& f : s.functions) {
    if (&f == test || !within(home, f.class_name, sep)) continue;
    const bool constructor = java && f.class_name == home &&
                             std::find(f.decorators.begin(), f.decorators.end(), "constructor") != f.decorators.end();
    if (f.setup || constructor) work.push_back(&f);
  }
  std::set<std::string> wanted;
  for (int depth = 0; depth < 4 && !work.empty(); ++depth) {
    std::vector<const FunctionInfo*> next;
    for (const auto* f : work) {
      if (!support.insert(f).second) continue;
      for (const auto& c : f->calls) wanted.insert(c);
    }
    for (const auto& f : s.functions) {
      if (support.contains(&f) || f.name.empty() || !wanted.contains(f.name)) continue;
      // @Test, @ParameterizedTest, @RepeatedTest, org.junit.Test; a JavaScript test callback ("test").
      const bool is_test = std::any_of(f.decorators.begin(), f.decorators.end(),
                                       [](const std::string& d) { return d == "test" || d.ends_with("Test"); });
      if (is_test) continue;                                    // another test is not a helper, whatever it is called
      if (!java && !within(home, f.class_name, sep)) continue;  // a helper in another suite is out of reach
      next.push_back(&f);
    }
    work = std::move(next);
  }
  for (const auto* f : support) mark(scope, s, *f, ScopeRole::support);
  mark(scope, s, *test, ScopeRole::own);
  return scope;
}

}  // namespace

std::string test_id_at(const CodeStructure& s, std::string_view content, std::string_view path, int line) {
  const FunctionInfo* best = nullptr;
  bool best_is_test = false;
  for (const auto& f : s.functions) {
    if (line < f.start || line > f.end || f.name.empty()) continue;
    const bool is_test = std::any_of(f.decorators.begin(), f.decorators.end(),
                                     [](const std::string& d) { return d == "test" || d.ends_with("Test"); });
    const bool inner = !best || f.end - f.start < best->end - best->start;
    if ((is_test && (!best_is_test || inner)) || (!is_test && !best_is_test && inner)) {
      best = &f;
      best_is_test = is_test;
    }
  }
  if (!best) return std::string(path);
  if (s.language == Language::java) {
    std::string package;
    for (std::string_view l : split_lines(content)) {
      const auto t = trim(l);
      if (t.starts_with("package ")) {
        package = std::string(trim(t.substr(8)));
        if (package.ends_with(';')) package.pop_back();
        package = std::string(trim(package));
        break;
      }
    }
    std::string cls = best->class_name;
    std::replace(cls.begin(), cls.end(), '.', '$');  // nested classes as the JVM names them
    return (package.empty() ? "" : package + ".") + cls + "#" + best->name;
  }
  return std::string(path) + (best->class_name.empty() ? "" : " > " + best->class_name) + " > " + best->name;
}

TestScope estimate_scope(const CodeStructure& s, std::string_view test_id) {
  if (s.language == Language::java || s.language == Language::javascript || s.language == Language::typescript)
    return estimate_brace_scope(s, test_id);
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
  found(scope, s, *test);

  // Support: set-up methods of the class, fixtures by parameter name (transitively), helpers called (transitively).
  static const std::set<std::string, std::less<>> kSetup = {
      "setUp",          "tearDown", "setUpClass", "tearDownClass", "setup_method",  "teardown_method", "setup_class",
      "teardown_class", "setup",    "teardown",   "asyncSetUp",    "asyncTearDown", "__init__"};
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
  for (const auto* f : support) mark(scope, s, *f, ScopeRole::support);
  mark(scope, s, *test, ScopeRole::own);  // a function nested in the test is still the test's own code
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

std::string test_function_text(std::string_view content, const TestScope& scope) {
  return scope.found ? lines_text(content, scope.function_start, scope.function_end) : std::string();
}

}  // namespace spark
