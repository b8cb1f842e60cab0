#include "code/scope.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <optional>
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
  if (pieces.size() == 1 && language_of_path(id) == Language::python) {
    parts.path = std::string(id);  // a collection error's id: the test file itself, no function
  } else if (pieces.size() == 1) {
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

// A parametrized test's rows: the failing one the test's own, the others other tests' data (another row's data
// cannot make this row fail), and the providers they are in its support.
void mark_rows(TestScope& scope, int line_count, const ParamRows& rows) {
  const auto each_line = [&](const std::vector<std::pair<int, int>>& spans, auto&& f) {
    for (const auto& [first, last] : spans)
      for (int l = std::max(first, 1); l <= last && l <= line_count; ++l) f(scope.role[static_cast<size_t>(l - 1)]);
  };
  each_line(rows.sources, [](ScopeRole& r) { r = std::max(r, ScopeRole::support); });
  each_line(rows.others, [](ScopeRole& r) { r = ScopeRole::outside; });
  each_line(rows.failing, [](ScopeRole& r) { r = ScopeRole::own; });
}

// Java, JavaScript, TypeScript: classes and suites nest; set-up is marked on the function (FunctionInfo::setup).
TestScope estimate_brace_scope(const CodeStructure& s, std::string_view test_id, std::string_view content) {
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
  if (java && !content.empty()) mark_rows(scope, s.line_count, match_param_rows(s, content, test_id));
  return scope;
}

}  // namespace

namespace {

// ---- @pytest.mark.parametrize rows ----------------------------------------------------------------------------

// The offset just past the string literal whose quote is at `i`.
size_t skip_string(std::string_view t, size_t i) {
  const char q = t[i];
  const bool triple = t.substr(i, 3) == std::string(3, q);
  size_t j = i + (triple ? 3 : 1);
  while (j < t.size()) {
    if (t[j] == '\\') {
      j += 2;
      continue;
    }
    if (triple ? t.substr(j, 3) == std::string(3, q) : t[j] == q) return j + (triple ? 3 : 1);
    if (!triple && t[j] == '\n') return j;  // not closed on its line
    ++j;
  }
  return t.size();
}

// The top-level comma-separated items of the bracket opened at t[open], each as [first, last) offsets of its code
// (white space and comments around it left out: Python's `#`, Java's `//` and `/* */`); nullopt when the bracket is
// not closed.
std::optional<std::vector<std::pair<size_t, size_t>>> bracket_items(std::string_view t, size_t open, bool java = false) {
  std::vector<std::pair<size_t, size_t>> out;
  int depth = 0;
  size_t first = std::string_view::npos, last = 0;
  const auto end_item = [&] {
    if (first != std::string_view::npos) out.emplace_back(first, last);
    first = std::string_view::npos;
  };
  for (size_t i = open; i < t.size();) {
    const char c = t[i];
    if (java ? t.substr(i, 2) == "//" : c == '#') {
      while (i < t.size() && t[i] != '\n') ++i;
      continue;
    }
    if (java && t.substr(i, 2) == "/*") {
      const size_t close = t.find("*/", i + 2);
      i = close == std::string_view::npos ? t.size() : close + 2;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (depth == 1 && c == ',') {
      end_item();
      ++i;
      continue;
    }
    const bool closing = c == ')' || c == ']' || c == '}';
    if (closing && --depth == 0) {
      end_item();
      return out;
    }
    if (depth >= 1 && first == std::string_view::npos) first = i;
    if (c == '(' || c == '[' || c == '{') ++depth;
    i = c == '\'' || c == '"' ? skip_string(t, i) : i + 1;
    last = i;
  }
  return std::nullopt;
}

// A Python string literal's value (prefixes r, b, u; escapes decoded), or nullopt when `v` is not one literal (an
// f-string's value is not known before it runs).
std::optional<std::u32string> string_value(std::string_view v) {
  size_t p = 0;
  bool raw = false;
  while (p < v.size() && p < 2 && std::isalpha(static_cast<unsigned char>(v[p]))) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(v[p])));
    if (c == 'f') return std::nullopt;
    if (c != 'r' && c != 'b' && c != 'u') return std::nullopt;
    raw = raw || c == 'r';
    ++p;
  }
  if (p >= v.size() || (v[p] != '\'' && v[p] != '"') || skip_string(v, p) != v.size()) return std::nullopt;
  const bool triple = v.size() - p >= 6 && v.substr(p, 3) == std::string(3, v[p]);
  const size_t q = triple ? 3 : 1;
  const std::u32string body = decode_utf8(v.substr(p + q, v.size() - p - 2 * q));
  if (raw) return body;
  std::u32string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != U'\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char32_t e = body[++i];
    const auto hex = [&](size_t n) {
      char32_t value = 0;
      for (size_t k = 0; k < n && i + 1 < body.size() && body[i + 1] < 128 &&
                         std::isxdigit(static_cast<unsigned char>(body[i + 1]));
           ++k) {
        const auto d = static_cast<char>(body[++i]);
        value = value * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(d)) ? d - '0'
                                                                                              : std::tolower(d) - 'a' + 10);
      }
      return value;
    };
    switch (e) {
      case U'n': out += U'\n'; break;
      case U't': out += U'\t'; break;
      case U'r': out += U'\r'; break;
      case U'0': out += U'\0'; break;
      case U'x': out += hex(2); break;
      case U'u': out += hex(4); break;
      case U'U': out += hex(8); break;
      case U'\n': break;  // a line continuation
      case U'\\': case U'\'': case U'"': out += e; break;
      default: out += U'\\'; out += e;
    }
  }
  return out;
}

// pytest's ASCII escaping of a string parameter (Python's unicode_escape).
std::string ascii_escaped(const std::u32string& value) {
  std::string out;
  char buf[16];
  for (const char32_t c : value) {
    if (c == U'\\') out += "\\\\";
    else if (c == U'\n') out += "\\n";
    else if (c == U'\t') out += "\\t";
    else if (c == U'\r') out += "\\r";
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else {
      std::snprintf(buf, sizeof buf, c <= 0xff ? "\\x%02x" : c <= 0xffff ? "\\u%04x" : "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  return out;
}

// pytest's id of one parameter value: a string escaped, a number, True/False/None as written; else its argname and
// the row's index. nullopt when it cannot be known (an f-string).
std::optional<std::string> value_id(std::string_view v, const std::string& argname, size_t index) {
  if (v == "True" || v == "False" || v == "None") return std::string(v);
  if (!v.empty() && (v.back() == '\'' || v.back() == '"')) {
    auto value = string_value(v);
    if (!value) return std::nullopt;
    return ascii_escaped(*value);
  }
  std::string_view digits = v.starts_with('-') || v.starts_with('+') ? v.substr(1) : v;
  if (!digits.empty() && std::isdigit(static_cast<unsigned char>(digits[0])) &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'; })) {
    std::string n;
    for (char c : digits)
      if (c != '_') n += c;
    const std::string sign = v.starts_with('-') ? "-" : "";
    if (n.size() > 2 && n[0] == '0' && std::strchr("xXoObB", n[1])) {
      const int base = std::tolower(n[1]) == 'x' ? 16 : std::tolower(n[1]) == 'o' ? 8 : 2;
      return sign + std::to_string(std::stoll(n.substr(2), nullptr, base));
    }
    return sign + n;
  }
  return argname + std::to_string(index);
}

struct ParametrizeList {
  std::vector<std::pair<size_t, size_t>> rows;  // offsets of each row in the decorator text
  std::vector<std::optional<std::string>> ids;  // each row's id (nullopt: not known)
  std::string note;                             // why rows are not known
};

// One `parametrize(...)` call's rows and ids; `t` is the decorator text, t[open] its '('.
ParametrizeList parametrize_list(std::string_view t, size_t open) {
  ParametrizeList out;
  auto args = bracket_items(t, open);
  if (!args) return out;
  std::string_view names, values, ids;
  size_t positional = 0;
  for (const auto& [a, b] : *args) {
    std::string_view arg = t.substr(a, b - a);
    const auto eq = arg.find('=');
    const auto key = eq == std::string_view::npos ? std::string_view() : trim(arg.substr(0, eq));
    const bool keyword = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    const std::string_view value = keyword ? trim(arg.substr(eq + 1)) : arg;
    if (keyword ? key == "argnames" : positional == 0) names = value;
    if (keyword ? key == "argvalues" : positional == 1) values = value;
    if (keyword && key == "ids") ids = value;
    if (!keyword) ++positional;
  }
  std::vector<std::string> argnames;
  if (auto s = string_value(names)) {
    std::string all = encode_utf8(*s);
    for (size_t start = 0; start <= all.size();) {
      size_t comma = all.find(',', start);
      if (comma == std::string::npos) comma = all.size();
      if (auto n = trim(std::string_view(all).substr(start, comma - start)); !n.empty()) argnames.emplace_back(n);
      start = comma + 1;
    }
  } else if (names.starts_with('[') || names.starts_with('(')) {
    const size_t base = static_cast<size_t>(names.data() - t.data());
    if (auto items = bracket_items(t, base))
      for (const auto& [a, b] : *items)
        if (auto n = string_value(t.substr(a, b - a))) argnames.push_back(encode_utf8(*n));
  }
  if (values.empty() || !(values.starts_with('[') || values.starts_with('('))) {
    out.note = "its parametrize list is not written as rows (" + std::string(clip(values, 40)) + ")";
    return out;
  }
  const size_t base = static_cast<size_t>(values.data() - t.data());
  auto rows = bracket_items(t, base);
  if (!rows) return out;
  std::vector<std::optional<std::string>> given;  // ids=[...]
  if (ids.starts_with('[') || ids.starts_with('('))
    if (auto items = bracket_items(t, static_cast<size_t>(ids.data() - t.data())))
      for (const auto& [a, b] : *items) {
        auto v = string_value(t.substr(a, b - a));
        given.push_back(v ? std::optional<std::string>(ascii_escaped(*v)) : std::nullopt);
      }
  for (size_t r = 0; r < rows->size(); ++r) {
    const auto [a, b] = (*rows)[r];
    std::string_view row = t.substr(a, b - a);
    out.rows.emplace_back(a, b);
    if (r < given.size() && given[r]) {
      out.ids.push_back(given[r]);
      continue;
    }
    std::vector<std::string_view> parts;
    bool param = false;
    for (const char* call : {"pytest.param(", "param("})
      if (row.starts_with(call)) {
        param = true;
        const size_t open_at = a + std::strlen(call) - 1;
        if (auto items = bracket_items(t, open_at))
          for (const auto& [c, d] : *items) {
            const std::string_view item = t.substr(c, d - c);
            if (item.starts_with("id=") || item.starts_with("id =")) {
              auto v = string_value(trim(item.substr(item.find('=') + 1)));
              if (v) out.ids.emplace_back(ascii_escaped(*v));
              else out.ids.emplace_back(std::nullopt);
              parts.clear();
              break;
            }
            if (item.find('=') == std::string_view::npos || item.front() == '\'' || item.front() == '"' ||
                item.front() == '(' || item.front() == '[')
              parts.push_back(item);
          }
        break;
      }
    if (out.ids.size() > r) continue;  // an explicit id=
    if (!param) {
      if (argnames.size() > 1 && (row.starts_with('(') || row.starts_with('['))) {
        if (auto items = bracket_items(t, a))
          for (const auto& [c, d] : *items) parts.push_back(t.substr(c, d - c));
      } else {
        parts.push_back(row);
      }
    }
    std::optional<std::string> id = std::string();
    for (size_t k = 0; k < std::max(parts.size(), argnames.size()) && id; ++k) {
      const std::string name = k < argnames.size() ? argnames[k] : "arg" + std::to_string(k);
      auto v = k < parts.size() ? value_id(parts[k], name, r) : std::optional<std::string>(name + std::to_string(r));
      if (!v) id.reset();
      else *id += (k ? "-" : "") + *v;
    }
    out.ids.push_back(id);
  }
  // Duplicates are numbered as pytest numbers them: "a0", "a1".
  std::map<std::string, int> count, next;
  for (const auto& id : out.ids)
    if (id) ++count[*id];
  for (auto& id : out.ids)
    if (id && count[*id] > 1) *id += std::to_string(next[*id]++);
  return out;
}

// Whether `param` is the stacked lists' ids from list `k` on, joined by "-"; `chosen` gets each list's row.
bool match_stacked(const std::vector<ParametrizeList>& lists, size_t k, std::string_view param,
                   std::vector<size_t>& chosen) {
  for (size_t r = 0; r < lists[k].ids.size(); ++r) {
    const auto& id = lists[k].ids[r];
    if (!id) continue;
    chosen[k] = r;
    if (k + 1 == lists.size()) {
      if (param == *id) return true;
    } else if (param.starts_with(*id + "-") && match_stacked(lists, k + 1, param.substr(id->size() + 1), chosen)) {
      return true;
    }
  }
  return false;
}

// ---- JUnit 5 @ParameterizedTest sources ------------------------------------------------------------------------

// An annotation attribute's name and value ("value = {...}" → {"value", "{...}"}); a bare value is `value`'s.
std::pair<std::string_view, std::string_view> attribute(std::string_view item) {
  const auto eq = item.find('=');
  if (eq == std::string_view::npos || (eq + 1 < item.size() && item[eq + 1] == '=')) return {"value", item};
  const auto key = trim(item.substr(0, eq));
  const bool name = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
  return name ? std::pair{key, trim(item.substr(eq + 1))} : std::pair{std::string_view("value"), item};
}

// The items of an array-valued attribute (`{a, b}`), or the value itself; offsets into `t`, `value` a view of it.
std::vector<std::pair<size_t, size_t>> values_of(std::string_view t, std::string_view value) {
  const auto at = static_cast<size_t>(value.data() - t.data());
  if (!value.starts_with('{')) return {{at, at + value.size()}};
  auto items = bracket_items(t, at, true);
  return items ? *items : std::vector<std::pair<size_t, size_t>>{};
}

// The rows of a @MethodSource provider `f`: the arguments of its literal `X.of(...)`/`asList(...)`, or its array
// initializer (`new Object[][] {...}`); nullopt when it builds them otherwise.
std::optional<std::vector<std::pair<size_t, size_t>>> provider_rows(std::string_view t, size_t from, size_t to) {
  const std::string_view body = t.substr(from, to - from);
  for (const char* reorders : {".filter(", ".skip(", ".limit(", ".sorted(", ".distinct(", "flatMap(", ".add("})
    if (body.find(reorders) != std::string_view::npos) return std::nullopt;
  size_t best = std::string_view::npos;
  for (const char* call : {".of(", "asList("}) {
    const auto at = body.find(call);
    if (at != std::string_view::npos) best = std::min(best, at + std::strlen(call) - 1);
  }
  for (auto at = body.find("[]"); at != std::string_view::npos; at = body.find("[]", at + 2)) {
    const auto brace = body.find_first_not_of(" \t\r\n[]", at);
    if (brace != std::string_view::npos && body[brace] == '{') {
      best = std::min(best, brace);
      break;
    }
  }
  if (best == std::string_view::npos) return std::nullopt;
  return bracket_items(t, from + best, true);
}

// One annotation above a Java test: its simple name and its arguments (`key = value`, the key "" for a lone value).
struct JavaAnnotation {
  std::string_view name;
  std::vector<std::pair<std::string_view, std::string_view>> args;

  std::string_view arg(std::string_view key) const {
    for (const auto& [k, v] : args)
      if (k == key) return v;
    return {};
  }
};

// The next annotation from offset `i` on, before `last` (strings and // comments skipped), or nullopt; `i` is left
// just past its name.
std::optional<JavaAnnotation> next_annotation(std::string_view content, size_t& i, size_t last) {
  for (; i < last; ++i) {
    if (content[i] == '"' || content[i] == '\'') {
      i = skip_string(content, i) - 1;
      continue;
    }
    if (content.substr(i, 2) == "//") i = std::min(content.find('\n', i), last);
    if (content[i] != '@') continue;
    JavaAnnotation a;
    size_t e = i + 1;
    while (e < last && (std::isalnum(static_cast<unsigned char>(content[e])) || content[e] == '_' || content[e] == '.'))
      ++e;
    a.name = content.substr(i + 1, e - i - 1);
    if (const auto dot = a.name.rfind('.'); dot != std::string_view::npos) a.name = a.name.substr(dot + 1);
    size_t paren = e;
    while (paren < last && (content[paren] == ' ' || content[paren] == '\t')) ++paren;
    if (paren < last && content[paren] == '(')
      if (auto items = bracket_items(content, paren, true))
        for (const auto& [from, to] : *items) a.args.push_back(attribute(content.substr(from, to - from)));
    i = e;
    return a;
  }
  return std::nullopt;
}

// A @CsvSource's records: its text block's non-blank, non-comment lines, or its value's items; the header record
// dropped when useHeadersInDisplayName is true.
std::vector<std::pair<size_t, size_t>> csv_source_rows(std::string_view content, const JavaAnnotation& a) {
  std::vector<std::pair<size_t, size_t>> records;
  if (const auto block = a.arg("textBlock"); block.starts_with("\"\"\"")) {
    const auto at = static_cast<size_t>(block.data() - content.data());
    const size_t body = content.find('\n', at);
    for (size_t l = body; l != std::string_view::npos && l + 1 < at + block.size() - 3;) {
      const size_t next = content.find('\n', l + 1);
      const auto text = trim(content.substr(l + 1, std::min(next, at + block.size() - 3) - l - 1));
      if (!text.empty() && !text.starts_with('#')) {
        const auto from = static_cast<size_t>(text.data() - content.data());
        records.emplace_back(from, from + text.size());
      }
      l = next;
    }
  } else if (const auto value = a.arg("value"); !value.empty()) {
    records = values_of(content, value);
  }
  if (a.arg("useHeadersInDisplayName") == "true" && !records.empty()) records.erase(records.begin());
  return records;
}

ParamRows match_java_rows(const CodeStructure& s, std::string_view content, std::string_view test_id) {
  ParamRows out;
  const auto open = test_id.rfind('[');
  const std::string_view digits = test_id.substr(open + 1, test_id.size() - open - 2);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return out;
  const size_t index = std::stoul(std::string(digits));  // 1-based
  const TestIdParts parts = parse_test_id(test_id, Language::java);
  const FunctionInfo* test = nullptr;
  for (const auto& f : s.functions)
    if (f.name == parts.function && !f.setup &&
        (!test || (!parts.classes.empty() && f.class_name.ends_with(parts.classes.back()))))
      test = &f;
  const auto lines = split_lines(content);
  if (!test || test->def_line <= test->start || static_cast<size_t>(test->def_line) > lines.size()) return out;
  const auto offset_of = [&](int line) { return static_cast<size_t>(lines[static_cast<size_t>(line - 1)].data() - content.data()); };
  const auto line_of = [&](size_t offset) {
    return 1 + static_cast<int>(std::count(content.begin(), content.begin() + static_cast<ptrdiff_t>(offset), '\n'));
  };
  const std::string name = parts.function + ": ";
  std::vector<std::optional<std::pair<size_t, size_t>>> rows;  // nullopt: a row without a line (@NullSource)
  size_t i = offset_of(test->start);
  const size_t last = offset_of(test->def_line);
  while (const auto a = next_annotation(content, i, last)) {
    if (a->name == "CsvSource") {
      const auto records = csv_source_rows(content, *a);
      rows.insert(rows.end(), records.begin(), records.end());
    } else if (a->name == "ValueSource") {
      if (!a->args.empty())
        for (const auto& r : values_of(content, a->args.front().second)) rows.emplace_back(r);
    } else if (a->name == "NullSource" || a->name == "EmptySource") {
      rows.emplace_back(std::nullopt);
    } else if (a->name == "NullAndEmptySource") {
      rows.insert(rows.end(), 2, std::nullopt);
    } else if (a->name == "MethodSource") {
      std::vector<std::string> providers;
      if (const auto value = a->arg("value"); value.empty())
        providers.push_back(parts.function);
      else
        for (const auto& [from, to] : values_of(content, value)) {
          const auto literal = string_value(content.substr(from, to - from));
          providers.push_back(literal ? encode_utf8(*literal) : std::string(content.substr(from, to - from)));
        }
      for (const auto& p : providers) {
        const FunctionInfo* provider = nullptr;
        for (const auto& f : s.functions)
          if (f.name == p && &f != test && (!provider || f.class_name == test->class_name)) provider = &f;
        const auto body =
            provider ? provider_rows(content, offset_of(provider->def_line),
                                     offset_of(provider->end) + lines[static_cast<size_t>(provider->end - 1)].size())
                     : std::nullopt;
        if (!body) {
          if (rows.size() >= index) break;  // the failing row came before
          out.note = name + "its @MethodSource " + p + (provider ? " does not return literal rows" : " is not in this file") +
                     "; the failing row [" + std::string(digits) + "] is not known";
          return out;
        }
        out.sources.emplace_back(provider->start, provider->end);
        rows.insert(rows.end(), body->begin(), body->end());
      }
    } else if (a->name == "EnumSource" || a->name == "CsvFileSource" || a->name == "ArgumentsSource" ||
               a->name == "FieldSource") {
      if (rows.size() >= index) break;
      out.note = name + "its @" + std::string(a->name) + " rows are not in the test file; the failing row [" +
                 std::string(digits) + "] is not known";
      return out;
    }
  }
  if (index == 0 || index > rows.size()) {
    out.sources.clear();
    if (!rows.empty())
      out.note = name + "its sources hold " + std::to_string(rows.size()) + " rows, none is [" + std::string(digits) + "]";
    return out;
  }
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r]) (r + 1 == index ? out.failing : out.others).emplace_back(line_of(rows[r]->first), line_of(rows[r]->second - 1));
  return out;
}

}  // namespace

ParamRows match_param_rows(const CodeStructure& s, std::string_view content, std::string_view test_id) {
  ParamRows out;
  const auto bracket = test_id.find('[');
  if (s.language == Language::java && test_id.ends_with(']') && bracket != std::string_view::npos)
    return match_java_rows(s, content, test_id);
  if (s.language != Language::python || bracket == std::string_view::npos || !test_id.ends_with(']')) return out;
  const std::string_view param = test_id.substr(bracket + 1, test_id.size() - bracket - 2);
  const TestIdParts parts = parse_test_id(test_id);
  const std::string cls = parts.classes.empty() ? "" : parts.classes.back();
  const FunctionInfo* test = nullptr;
  for (const auto& f : s.functions)
    if (f.name == parts.function && (cls.empty() || f.class_name == cls) && (!test || f.class_name == cls)) test = &f;
  if (!test || test->def_line <= test->start) return out;
  // The decorators' text: the lines from the function's first line to its `def`.
  const auto lines = split_lines(content);
  if (static_cast<size_t>(test->def_line - 1) > lines.size()) return out;
  const char* from = lines[static_cast<size_t>(test->start - 1)].data();
  const char* to = lines[static_cast<size_t>(test->def_line - 1)].data();
  const std::string_view text(from, static_cast<size_t>(to - from));
  const auto line_of = [&](size_t offset) {
    return test->start + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(offset), '\n'));
  };
  std::vector<ParametrizeList> lists;
  for (size_t at = text.find("parametrize("); at != std::string_view::npos; at = text.find("parametrize(", at + 1))
    lists.push_back(parametrize_list(text, at + std::strlen("parametrize")));
  if (lists.empty()) return out;
  std::reverse(lists.begin(), lists.end());  // pytest applies the innermost decorator first: its id comes first
  for (const auto& l : lists)
    if (!l.note.empty()) {
      out.note = parts.function + ": " + l.note + "; the failing row of " + std::string(param) + " is not known";
      return out;
    }
  std::vector<size_t> chosen(lists.size(), 0);
  // A parametrized fixture's ids join the lists' ("native-2-3-7", "native-x-y-q"): the lists' part is a run of the
  // id's "-"-separated parts, the longest one found from the left.
  std::vector<size_t> cuts = {0};  // where a part starts
  for (size_t i = param.find('-'); i != std::string_view::npos && cuts.size() < 64; i = param.find('-', i + 1))
    cuts.push_back(i + 1);
  bool matched = false;
  for (size_t a = 0; a < cuts.size() && !matched; ++a)
    for (size_t b = cuts.size(); b > a && !matched; --b) {
      const size_t begin = cuts[a], end = b == cuts.size() ? param.size() : cuts[b] - 1;
      matched = match_stacked(lists, 0, param.substr(begin, end - begin), chosen);
    }
  if (!matched) {
    out.note = parts.function + ": no row of its parametrize list has the id \"" + std::string(param) + "\"";
    return out;
  }
  for (size_t k = 0; k < lists.size(); ++k)
    for (size_t r = 0; r < lists[k].rows.size(); ++r) {
      const std::pair<int, int> span{line_of(lists[k].rows[r].first), line_of(lists[k].rows[r].second - 1)};
      (r == chosen[k] ? out.failing : out.others).push_back(span);
    }
  return out;
}

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

TestScope estimate_scope(const CodeStructure& s, std::string_view test_id, std::string_view content) {
  if (s.language == Language::java || s.language == Language::javascript || s.language == Language::typescript)
    return estimate_brace_scope(s, test_id, content);
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
  if (!content.empty()) mark_rows(scope, s.line_count, match_param_rows(s, content, test_id));
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

std::optional<std::map<std::string, std::set<int>>> conftest_reach(const std::string& test_id,
                                                                    const CodeFile& test_file,
                                                                    const std::vector<CodeFile>& conftests) {
  const CodeStructure own = analyze_code(test_file.content, Language::python, test_file.path);
  std::vector<CodeStructure> structures;
  structures.reserve(conftests.size());
  for (const auto& c : conftests) structures.push_back(analyze_code(c.content, Language::python, c.path));
  std::vector<ParsedFile> parsed;
  parsed.reserve(conftests.size());
  for (size_t i = 0; i < conftests.size(); ++i) parsed.push_back({conftests[i].path, &structures[i]});
  return conftest_reach(test_id, own, parsed);
}

std::optional<std::map<std::string, std::set<int>>> conftest_reach(const std::string& test_id,
                                                                    const CodeStructure& own,
                                                                    const std::vector<ParsedFile>& conftests) {
  const TestIdParts parts = parse_test_id(test_id);
  if (parts.function.empty()) return std::nullopt;
  const FunctionInfo* test = nullptr;
  for (const auto& f : own.functions)
    if (f.name == parts.function && (parts.classes.empty() || f.class_name == parts.classes.back())) test = &f;
  if (!test) return std::nullopt;
  std::set<std::string> wanted(test->params.begin(), test->params.end());
  const auto asked_by_decorators = [&wanted](const FunctionInfo& f) {
    for (const auto& d : f.decorators)
      if (d.find("usefixtures") != std::string::npos)
        for (size_t q = d.find_first_of("'\""); q != std::string::npos; q = d.find_first_of("'\"", q + 1)) {
          const size_t end = d.find(d[q], q + 1);
          if (end == std::string::npos) break;
          wanted.insert(d.substr(q + 1, end - q - 1));
          q = end;
        }
  };
  asked_by_decorators(*test);
  std::vector<const CodeStructure*> all{&own};
  for (const auto& c : conftests) all.push_back(c.structure);
  // Fixtures ask for fixtures: through the test file's and the conftest files', to a fixed point.
  for (size_t round = 0, before = 0; round < 16 && wanted.size() != before; ++round) {
    before = wanted.size();
    for (const CodeStructure* st : all)
      for (const auto& f : st->functions)
        if (f.is_fixture() && wanted.contains(f.name)) wanted.insert(f.params.begin(), f.params.end());
  }
  std::map<std::string, std::set<int>> out;
  for (size_t i = 0; i < conftests.size(); ++i) {
    const CodeStructure& st = *conftests[i].structure;
    std::set<int>& lines = out[std::string(conftests[i].path)];
    for (int l = 1; l <= st.line_count; ++l)
      if (st.function[static_cast<size_t>(l - 1)] == 0) lines.insert(l);  // module level
    for (const auto& f : st.functions) {
      const bool autouse = std::any_of(f.decorators.begin(), f.decorators.end(),
                                       [](const std::string& d) { return d.find("autouse=True") != std::string::npos; });
      if (f.name.starts_with("pytest_") || autouse || (f.is_fixture() && wanted.contains(f.name)))
        for (int l = f.start; l <= f.end; ++l) lines.insert(l);
    }
  }
  return out;
}

}  // namespace spark
