#include "localizer/data_flow.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_set>

#include "base/text.h"

namespace spark {

namespace {

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

const std::unordered_set<std::string_view>& keywords() {
  static const std::unordered_set<std::string_view> k = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return k;
}

// The statement without comments and string literals (replaced by a blank: their words are not names).
std::string code_only(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      out += '\n';
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool triple = i + 2 < text.size() && text[i + 1] == c && text[i + 2] == c;
      const std::string quote = triple ? std::string(3, c) : std::string(1, c);
      size_t end = i + quote.size();
      while (end < text.size() && text.compare(end, quote.size(), quote) != 0) end += text[end] == '\\' ? 2 : 1;
      i = std::min(text.size(), end + quote.size()) - 1;
      out += " \"\" ";
      continue;
    }
    out += c;
  }
  return out;
}

// Dotted names in `code` ("self.inventory.total", "shape"), keywords left out.
std::vector<std::string> dotted_names(std::string_view code) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < code.size()) {
    if (!name_start(code[i]) || (i > 0 && (name_char(code[i - 1]) || code[i - 1] == '.'))) {
      ++i;
      continue;
    }
    size_t end = i;
    for (;;) {
      while (end < code.size() && name_char(code[end])) ++end;
      if (end + 1 < code.size() && code[end] == '.' && name_start(code[end + 1])) {
        ++end;
        continue;
      }
      break;
    }
    std::string name(code.substr(i, end - i));
    i = end;
    if (keywords().contains(name)) continue;
    out.push_back(std::move(name));
  }
  return out;
}

// Where the assignment's `=` is: depth 0, not part of ==, <=, >=, != or a keyword argument. npos when none.
size_t assignment_at(std::string_view code, bool& augmented) {
  int depth = 0;
  augmented = false;
  for (size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == '=' && depth == 0) {
      const char before = i > 0 ? code[i - 1] : ' ';
      const char after = i + 1 < code.size() ? code[i + 1] : ' ';
      if (after == '=') {
        ++i;
        continue;
      }
      if (after == '>') continue;  // JavaScript's arrow, `x => …`
      if (before == '=' || before == '<' || before == '>' || before == '!') continue;
      if (std::string_view("+-*/%&|^@").find(before) != std::string_view::npos ||
          (i >= 2 && (code.substr(i - 2, 2) == "//" || code.substr(i - 2, 2) == "**" || code.substr(i - 2, 2) == ">>" ||
                      code.substr(i - 2, 2) == "<<")))
        augmented = true;
      return i;
    }
  }
  return std::string_view::npos;
}

// "x[i]" → "x"; "self.a.b" stays.
std::string target_base(std::string_view target) {
  std::string t(trim(target));
  if (auto b = t.find('['); b != std::string::npos) t.resize(b);
  while (!t.empty() && (t.back() == ' ' || t.back() == '*')) t.pop_back();
  while (!t.empty() && t.front() == '*') t.erase(0, 1);
  return t;
}

void add_all(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

DefUse def_use(std::string_view statement) {
  DefUse du;
  const std::string code = code_only(statement);
  const std::string_view c = trim(code);
  if (c.starts_with("for ")) {
    const size_t in = c.find(" in ");
    if (in != std::string_view::npos) {
      add_all(du.defs, dotted_names(c.substr(4, in - 4)));
      add_all(du.uses, dotted_names(c.substr(in + 4)));
      return du;
    }
  }
  if (c.starts_with("with ") || c.starts_with("async with ")) {
    // with A as x, B as y:
    std::string_view rest = c.substr(c.find("with ") + 5);
    size_t at = 0;
    while ((at = rest.find(" as ")) != std::string_view::npos) {
      add_all(du.uses, dotted_names(rest.substr(0, at)));
      rest = rest.substr(at + 4);
      size_t end = 0;
      while (end < rest.size() && (name_char(rest[end]) || rest[end] == '.')) ++end;
      du.defs.emplace_back(rest.substr(0, end));
      rest = rest.substr(end);
    }
    add_all(du.uses, dotted_names(rest));
    return du;
  }
  bool augmented = false;
  const size_t eq = assignment_at(c, augmented);
  if (eq != std::string_view::npos && !c.starts_with("assert") && !c.starts_with("if ") && !c.starts_with("return")) {
    const std::string_view lhs = c.substr(0, augmented ? eq - 1 : eq);
    // Targets: "a, b", "x[i]", "self.y", "a = b = 3" (chained: every part but the last is a target).
    std::string_view rest = c.substr(eq + 1);
    std::vector<std::string_view> targets = {lhs};
    bool more = false;
    while (true) {
      const size_t next = assignment_at(rest, more);
      if (next == std::string_view::npos) break;
      targets.push_back(rest.substr(0, next));
      rest = rest.substr(next + 1);
    }
    for (auto t : targets) {
      size_t start = 0;
      int depth = 0;
      for (size_t i = 0; i <= t.size(); ++i) {
        const char ch = i < t.size() ? t[i] : ',';
        if (ch == '(' || ch == '[')
          ++depth;
        else if (ch == ')' || ch == ']')
          --depth;
        else if (ch == ',' && depth == 0) {
          const std::string base = target_base(t.substr(start, i - start));
          if (!base.empty() && name_start(base.front())) du.defs.push_back(base);
          // Subscripts' indices are uses: x[i] = … uses i.
          if (auto b = t.substr(start, i - start).find('['); b != std::string_view::npos)
            add_all(du.uses, dotted_names(t.substr(start + b, i - start - b)));
          start = i + 1;
        }
      }
    }
    add_all(du.uses, dotted_names(rest));
    if (augmented) add_all(du.uses, du.defs);
    return du;
  }
  // A call on an object as a statement of its own may change that object: x.append(1), self.inventory.add(…).
  du.uses = dotted_names(c);
  const auto names = dotted_names(c.substr(0, std::min(c.size(), c.find('('))));
  if (!names.empty() && c.find('(') != std::string_view::npos && !c.starts_with("assert") &&
      names.front().find('.') != std::string::npos) {
    const std::string& callee = names.front();
    du.defs.push_back(callee.substr(0, callee.rfind('.')));
  }
  return du;
}

namespace {

// Words of Java and JavaScript/TypeScript that are not names of values.
const std::unordered_set<std::string_view>& brace_keywords() {
  static const std::unordered_set<std::string_view> k = {
      "new",    "null",  "undefined", "true",  "false",  "typeof", "instanceof", "void",
      "const",  "let",   "var",       "final", "static", "super",  "throw",      "return",
      "await",  "async", "function",  "of",    "delete", "yield",  "int",        "long",
      "double", "float", "boolean",   "char",  "byte",   "short",  "String"};
  return k;
}

// A Java or JavaScript statement in the shape def_use reads: comments cut, `;` and an opening `{` dropped,
// declarations' keywords and types dropped (`final List<String> xs = …` → `xs = …`), destructuring unpacked
// (`const { a, b } = …` → `a, b = …`), and enhanced for loops as Python's (`for (String s : xs)` → `for s in xs`).
std::string brace_statement(std::string_view statement) {
  std::string code;
  char quote = 0;
  for (size_t i = 0; i < statement.size(); ++i) {
    const char c = statement[i];
    if (quote) {
      code += c;
      if (c == '\\' && i + 1 < statement.size())
        code += statement[++i];
      else if (c == quote)
        quote = 0;
      continue;
    }
    if (c == '"' || c == '\'' || c == '`') quote = c;
    if (c == '/' && i + 1 < statement.size() && statement[i + 1] == '/') {
      while (i < statement.size() && statement[i] != '\n') ++i;
      code += ' ';
      continue;
    }
    code += c == '\n' ? ' ' : c;
  }
  std::string_view c = trim(code);
  while (!c.empty() && (c.back() == ';' || c.back() == '{')) c = trim(c.substr(0, c.size() - 1));
  if (c.starts_with("for") && trim(c.substr(3)).starts_with("(")) {
    std::string_view inner = trim(c.substr(3));
    inner = inner.substr(1, inner.rfind(')') == std::string_view::npos ? std::string_view::npos : inner.rfind(')') - 1);
    for (const std::string_view sep : {std::string_view(" : "), std::string_view(" of "), std::string_view(" in ")})
      if (const auto at = inner.find(sep); at != std::string_view::npos) {
        std::string_view lhs = trim(inner.substr(0, at));
        if (const auto space = lhs.find_last_of(" \t"); space != std::string_view::npos) lhs = lhs.substr(space + 1);
        return "for " + std::string(lhs) + " in " + std::string(inner.substr(at + sep.size()));
      }
    return "spark_for(" + std::string(inner) + ")";
  }
  for (bool again = true; again;) {
    again = false;
    for (const std::string_view word : {"final ", "const ", "let ", "var ", "static ", "export "})
      if (c.starts_with(word)) {
        c = trim(c.substr(word.size()));
        again = true;
      }
  }
  bool augmented = false;
  const size_t eq = assignment_at(c, augmented);
  if (eq == std::string_view::npos || augmented) return std::string(c);
  std::string lhs(trim(c.substr(0, eq)));
  if (lhs.starts_with('{') || lhs.starts_with('[')) {  // destructuring: its names, renames taking the new name
    std::string names;
    const std::string inner = lhs.substr(1, lhs.size() - 2);
    for (size_t start = 0; start <= inner.size();) {
      const size_t comma = std::min(inner.find(',', start), inner.size());
      std::string_view t = trim(std::string_view(inner).substr(start, comma - start));
      if (const auto colon = t.find(':'); colon != std::string_view::npos) t = trim(t.substr(colon + 1));
      if (const auto dflt = t.find('='); dflt != std::string_view::npos) t = trim(t.substr(0, dflt));
      if (t.starts_with("...")) t.remove_prefix(3);
      if (!t.empty()) names += (names.empty() ? "" : ", ") + std::string(t);
      start = comma + 1;
    }
    lhs = names;
  } else {
    // A type before the name (`int total`, `Map<String, Integer> m`, `String[] xs`): the last word is the name.
    int angle = 0;
    size_t last_space = std::string::npos;
    for (size_t i = 0; i < lhs.size(); ++i) {
      if (lhs[i] == '<')
        ++angle;
      else if (lhs[i] == '>')
        --angle;
      else if ((lhs[i] == ' ' || lhs[i] == '\t') && angle == 0)
        last_space = i;
    }
    if (last_space != std::string::npos && lhs.find('.') == std::string::npos && lhs.find('(') == std::string::npos)
      lhs = lhs.substr(last_space + 1);
  }
  return lhs + " = " + std::string(c.substr(eq + 1));
}

}  // namespace

DefUse def_use(std::string_view statement, Language language) {
  if (language != Language::java && language != Language::javascript && language != Language::typescript)
    return def_use(statement);
  DefUse du = def_use(brace_statement(statement));
  // `this.total` is a name (as Python's `self.total`); `this` alone and keywords are not.
  const auto keyword = [](const std::string& name) {
    return name == "this" || brace_keywords().contains(std::string_view(name).substr(0, name.find('.')));
  };
  std::erase_if(du.defs, keyword);
  std::erase_if(du.uses, keyword);
  return du;
}

std::map<int, int> backward_slice(const CodeStructure& s, const std::vector<std::string_view>& lines, int stop_line,
                                  const std::vector<ScopeRole>& roles) {
  std::map<int, int> out;
  if (stop_line < 1 || stop_line > s.line_count) return out;
  const auto text_of = [&](int first, int last) {
    std::string t;
    for (int l = first; l <= last && l <= static_cast<int>(lines.size()); ++l) {
      t += lines[static_cast<size_t>(l - 1)];
      t += '\n';
    }
    return t;
  };
  const auto [stop_first, stop_last] = s.statement_span(stop_line);
  // wanted name → the hop of the statement that needs it (0: the failing statement).
  std::map<std::string, int> wanted;
  const auto want = [&](const std::vector<std::string>& names, int hop) {
    for (const auto& n : names) {
      if (n == "self" || n == "cls") continue;
      for (size_t dot = n.size(); dot != std::string::npos && dot > 0; dot = n.rfind('.', dot - 1)) {
        const std::string prefix = n.substr(0, dot);
        if (prefix == "self" || prefix == "cls") break;
        auto [it, fresh] = wanted.emplace(prefix, hop);
        if (!fresh) it->second = std::min(it->second, hop);
      }
    }
  };
  want(def_use(text_of(stop_first, stop_last), s.language).uses, 0);
  // The statements of the failing function before the failing one, last first.
  const int fn = s.function[static_cast<size_t>(stop_first - 1)];
  std::vector<std::pair<int, int>> before;
  for (int l = 1; l < stop_first; ++l) {
    const auto i = static_cast<size_t>(l - 1);
    if (s.statement[i] != l || s.kind[i] == "comment" || s.kind[i] == "def" || s.kind[i] == "docstring") continue;
    if (fn != 0 && s.function[i] != fn) continue;
    if (fn == 0 && s.function[i] != 0) continue;
    before.push_back(s.statement_span(l));
  }
  const auto defines_wanted = [&](const DefUse& du) {
    int hop = -1;
    for (const auto& d : du.defs)
      if (auto it = wanted.find(d); it != wanted.end() && (hop < 0 || it->second < hop)) hop = it->second;
    return hop;
  };
  for (auto it = before.rbegin(); it != before.rend(); ++it) {
    const DefUse du = def_use(text_of(it->first, it->second), s.language);
    const int need = defines_wanted(du);
    if (need < 0) continue;
    out[it->first] = need + 1;
    want(du.uses, need + 1);
  }
  // Set-up lines (setup_method, fixtures, helpers) that define a self. attribute or a name the slice needs.
  if (!roles.empty())
    for (int l = 1; l <= s.line_count; ++l) {
      const auto i = static_cast<size_t>(l - 1);
      if (i >= roles.size() || roles[i] != ScopeRole::support || s.statement[i] != l || s.kind[i] == "comment" ||
          s.kind[i] == "def")
        continue;
      const auto [first, last] = s.statement_span(l);
      const DefUse du = def_use(text_of(first, last), s.language);
      bool self_attr = false;
      for (const auto& d : du.defs) self_attr = self_attr || d.starts_with("self.");
      if (!self_attr) continue;
      if (const int need = defines_wanted(du); need >= 0) out.emplace(first, need + 1);
    }
  // Fixtures the test names as parameters and helpers it calls (functions among the support lines): a wanted name
  // that is such a function's name gets its value from the function's `return` and `yield` statements, and the slice
  // goes on backwards inside that function.
  if (!roles.empty())
    for (int l = 1; l <= s.line_count; ++l) {
      const auto i = static_cast<size_t>(l - 1);
      if (i >= roles.size() || i >= lines.size() || roles[i] != ScopeRole::support || s.kind[i] != "def") continue;
      std::string_view t = trim(lines[i]);
      if (t.starts_with("async ")) t.remove_prefix(6);
      if (!t.starts_with("def ")) continue;
      t.remove_prefix(4);
      const std::string name(t.substr(0, t.find('(')));
      const auto w = wanted.find(name);
      if (w == wanted.end()) continue;
      const int base = w->second + 1;  // the hop of the function's return statements
      std::vector<std::pair<int, int>> body;
      for (int b = l + 1; b <= s.line_count; ++b) {
        const auto j = static_cast<size_t>(b - 1);
        if (s.function[j] != l || s.statement[j] != b || s.kind[j] == "comment" || s.kind[j] == "docstring") continue;
        body.push_back(s.statement_span(b));
      }
      std::map<std::string, int> local;  // names the function's result needs → hop
      for (auto it = body.rbegin(); it != body.rend(); ++it) {
        const std::string text = text_of(it->first, it->second);
        const std::string_view st = trim(text);
        const DefUse du = def_use(text, s.language);
        int hop = -1;
        if (st.starts_with("return") || st.starts_with("yield")) {
          hop = base;
        } else {
          for (const auto& d : du.defs)
            if (auto f = local.find(d); f != local.end() && (hop < 0 || f->second + 1 < hop)) hop = f->second + 1;
        }
        if (hop < 0) continue;
        out.emplace(it->first, hop);
        for (const auto& u : du.uses) {
          auto [f, fresh] = local.emplace(u, hop);
          if (!fresh) f->second = std::min(f->second, hop);
        }
      }
    }
  return out;
}

}  // namespace spark
