#include "formats/failure_form.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "base/names.h"
#include "base/pcre_regex.h"
#include "base/text.h"

namespace spark {

namespace {

constexpr Named<ExceptionGroup> kExceptionGroupNames[] = {
    {ExceptionGroup::none, "none"},  {ExceptionGroup::assertion, "assertion"}, {ExceptionGroup::type, "type"},
    {ExceptionGroup::name, "name"},  {ExceptionGroup::lookup, "lookup"},       {ExceptionGroup::value, "value"},
    {ExceptionGroup::other, "other"}};
static_assert(std::size(kExceptionGroupNames) == static_cast<size_t>(ExceptionGroup::other) + 1);

}  // namespace

std::string_view exception_group_name(ExceptionGroup g) { return name_of(kExceptionGroupNames, g); }

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// "Name: message" or "Name" where Name looks like an exception class (possibly dotted). Returns false otherwise.
bool exception_header(std::string_view s, std::string& name, std::string& message) {
  if (s.empty() || !ident_start(s[0])) return false;
  size_t i = 0;
  while (i < s.size() && ident_char(s[i])) ++i;
  std::string_view n = s.substr(0, i);
  // node's error codes: "AssertionError [ERR_ASSERTION]: …", "TypeError [ERR_INVALID_ARG_TYPE]: …".
  if (s.substr(i).starts_with(" [ERR_"))
    if (const size_t close = s.find(']', i); close != std::string_view::npos && (close + 1 == s.size() || s[close + 1] == ':'))
      i = close + 1;
  if (i < s.size() && s[i] != ':') return false;
  bool qualified = false;  // module-qualified class names (click.exceptions.NoSuchOption) are exceptions
  if (const size_t dot = n.rfind('.'); dot != std::string_view::npos) {
    n = n.substr(dot + 1);
    qualified = i < s.size();
  }
  if (n.empty() || !std::isupper(static_cast<unsigned char>(n[0]))) return false;
  static constexpr std::array<std::string_view, 9> endings = {
      "Error", "Exception", "Exit", "Warning", "Iteration", "Interrupt", "Failed", "Failure", "Timeout"};
  if (!qualified && std::none_of(endings.begin(), endings.end(), [&](std::string_view e) { return n.ends_with(e); }))
    return false;
  name = std::string(n);
  message = i < s.size() ? std::string(trim(s.substr(i + 1))) : std::string();
  return true;
}

ExceptionGroup group_of(std::string_view e) {
  if (e.empty()) return ExceptionGroup::none;
  if (e == "AssertionError") return ExceptionGroup::assertion;
  if (e == "TypeError") return ExceptionGroup::type;
  if (e == "NameError" || e == "UnboundLocalError" || e == "AttributeError" || e == "ImportError" ||
      e == "ModuleNotFoundError")
    return ExceptionGroup::name;
  if (e == "KeyError" || e == "IndexError" || e == "LookupError" || e == "StopIteration") return ExceptionGroup::lookup;
  if (e == "ValueError" || e == "UnicodeError" || e == "UnicodeDecodeError" || e == "UnicodeEncodeError" ||
      e == "JSONDecodeError")
    return ExceptionGroup::value;
  return ExceptionGroup::other;
}

// Splits `expr` at its first top-level comparison operator (outside quotes and brackets). Bounded by the value cap.
bool split_comparison(std::string_view expr, std::string_view& left, std::string_view& right) {
  static constexpr std::array<std::string_view, 10> ops = {" == ", " != ", " not in ", " is not ", " in ",
                                                           " is ", " <= ", " >= ",     " < ",      " > "};
  int depth = 0;
  char quote = 0;
  const size_t limit = std::min(expr.size(), FailureForm::kMaxValueLength * 2);
  for (size_t i = 0; i < limit; ++i) {
    const char c = expr[i];
    if (quote) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
      continue;
    }
    if (c == '\'' || c == '"')
      quote = c;
    else if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      depth = std::max(0, depth - 1);
    else if (c == ' ' && depth == 0)
      for (auto op : ops)
        if (expr.substr(i, op.size()) == op) {
          left = trim(expr.substr(0, i));
          right = trim(expr.substr(i + op.size()));
          return !left.empty() && !right.empty();
        }
  }
  return false;
}

void add_value(FailureForm& f, std::string_view v) {
  v = trim(v);
  if (v.empty() || f.values.size() >= FailureForm::kMaxValues) return;
  f.values.emplace_back(v.substr(0, FailureForm::kMaxValueLength));
}

void add_name(std::vector<std::string>& out, std::string_view n) {
  if (const size_t dot = n.rfind('.'); dot != std::string_view::npos) n = n.substr(dot + 1);
  if (n.size() < 2 || !ident_start(n[0])) return;
  if (std::find(out.begin(), out.end(), n) == out.end() && out.size() < FailureForm::kMaxValues) out.emplace_back(n);
}

}  // namespace

std::string canonical_code(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (char c : trim(text)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c == '"' ? '\'' : c;
  }
  return out;
}

std::vector<std::string> literal_tokens(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '#') break;
    if (c == '\'' || c == '"') {
      const size_t s = i++;
      while (i < text.size() && text[i] != c) i += text[i] == '\\' ? 2 : 1;
      const size_t e = std::min(i + 1, text.size());
      std::string lit = canonical_code(text.substr(s, e - s));
      if (lit.size() >= 3) out.push_back(std::move(lit));  // '' says little
      i = e;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) && (i == 0 || !ident_char(text[i - 1]))) {
      const size_t s = i;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == '_'))
        ++i;
      if (i - s >= 2) out.emplace_back(text.substr(s, i - s));
      continue;
    }
    ++i;
  }
  return out;
}

namespace {

// The last block of pytest's "E" lines (without the "E"); without any, the native traceback's tail from its last
// exception line. Views into `message`.
std::vector<std::string_view> failure_block(std::string_view message) {
  const auto lines = split_lines(message);
  std::vector<std::string_view> block;
  size_t start = 0, end = 0;
  bool in = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool e = lines[i] == "E" || lines[i].starts_with("E ");
    if (e && !in) start = i;
    if (e) end = i + 1;
    in = e;
  }
  if (end > 0) {
    for (size_t i = start; i < end; ++i) block.push_back(lines[i].substr(1));
  } else {
    std::string n, m;
    for (size_t i = lines.size(); i-- > 0;)
      if (exception_header(trim(lines[i]), n, m)) {
        for (size_t j = i; j < lines.size(); ++j) block.push_back(lines[j]);
        break;
      }
  }
  return block;
}

// The block's first `assert …` or exception line, read into f's exception and message; its index, or block.size().
size_t read_exception_header(FailureForm& f, const std::vector<std::string_view>& block) {
  size_t header = block.size();
  for (size_t i = 0; i < block.size() && header == block.size(); ++i) {
    const auto s = trim(block[i]);
    if (s == "assert" || s.starts_with("assert ")) {
      f.exception = "AssertionError";
      f.message = std::string(s.substr(0, FailureForm::kMaxValueLength * 2));
      header = i;
    } else if (exception_header(s, f.exception, f.message)) {
      if (f.message.size() > FailureForm::kMaxValueLength * 2) f.message.resize(FailureForm::kMaxValueLength * 2);
      header = i;
    }
  }
  return header;
}

// The values an assertion compared (both sides, pytest's `where` and diff lines, unittest's differing elements) and
// the message's quoted strings; whether the check was against a generic value (None, True, 0, an empty container).
void read_compared_values(FailureForm& f, const std::vector<std::string_view>& block, size_t header) {
  std::string_view expr = f.message;
  if (f.group == ExceptionGroup::assertion && !expr.starts_with("assert"))
    // `assert x == y, message`: pytest prints the message first, the failed expression on a later line.
    for (size_t i = header + 1; i < block.size(); ++i)
      if (const auto s = trim(block[i]); s.starts_with("assert ")) {
        f.message = std::string(s.substr(0, FailureForm::kMaxValueLength * 2));
        expr = f.message;
        break;
      }
  if (expr.starts_with("assert ")) expr.remove_prefix(7);
  if (const size_t differ = expr.find(" differ: "); differ < 40)  // npos is not
    expr.remove_prefix(differ + 9);
  const auto generic = [](std::string_view v) {
    static constexpr std::array<std::string_view, 13> g = {"None", "True", "False", "0",  "1",     "-1", "''",
                                                           "\"\"", "[]",   "{}",    "()", "set()", "b''"};
    return std::find(g.begin(), g.end(), trim(v)) != g.end();
  };
  if (std::string_view l, r; f.group == ExceptionGroup::assertion && split_comparison(expr, l, r)) {
    add_value(f, l);
    add_value(f, r);
    f.generic_check = generic(l) || generic(r);
  } else if (f.group == ExceptionGroup::assertion) {
    // No comparison: a truth test (`assert x`, `assert not x`), or unittest's "False is not true", "unexpectedly None".
    const std::string_view m = f.message;
    f.generic_check = m.starts_with("assert") || m.find(" is not true") != std::string_view::npos ||
                      m.find(" is not false") != std::string_view::npos ||
                      m.find("unexpectedly None") != std::string_view::npos;
  }
  {
    // Quoted strings of the message: "No such option '--foo'", "'meh' is not one of …".
    static const Regex quoted_text = Regex::must(R"re('([^'\n]{1,200})')re");
    quoted_text.for_each_match(std::string_view(f.message).substr(0, 4096),
                               [&](const std::vector<std::string_view>& g) {
                                 if (g.size() > 1 && g[0].size() >= 3) add_value(f, g[0]);
                               });
  }
  static const Regex where = Regex::must(R"re(^\+\s*(?:where|and)\s+(.+?) = )re");
  for (size_t i = header + 1; i < block.size(); ++i) {
    const auto s = trim(block[i]);
    bool matched = false;
    where.for_each_match(s, [&](const std::vector<std::string_view>& g) {
      matched = true;
      if (g.size() > 1) add_value(f, g[1]);
    });
    if (matched) continue;
    if (s.starts_with("- ") || s.starts_with("+ "))
      add_value(f, s.substr(2));
    else if (s.starts_with("First differing element") && i + 2 < block.size()) {
      add_value(f, block[i + 1]);
      add_value(f, block[i + 2]);
      i += 2;
    }
  }
}

// The names the failure quotes (the missing attribute, key, name; what a TypeError called; an exception's repr) and
// the ones it suggests ("did you mean").
void read_quoted_names(FailureForm& f, const std::vector<std::string_view>& block, size_t header) {
  static const Regex quoted = Regex::must(R"re('([A-Za-z_][A-Za-z0-9_.]*)')re");
  static const Regex called = Regex::must(R"re(([A-Za-z_][A-Za-z0-9_.]*)\(\))re");
  static const Regex mean = Regex::must(R"re([Dd]id you mean:?\s*'?([A-Za-z_][A-Za-z0-9_.]*))re");
  const std::string_view head = std::string_view(f.message).substr(0, 1024);
  std::vector<std::string_view> q;
  quoted.for_each_match(head, [&](const std::vector<std::string_view>& g) {
    if (g.size() > 1) q.push_back(g[1]);
  });
  if (f.exception == "AttributeError") {
    if (!q.empty()) add_name(f.names, q.back());  // "'X' object has no attribute 'y'": the attribute
  } else if (f.exception == "KeyError") {
    add_value(f, head);
    for (auto n : q) add_name(f.names, n);
  } else if (f.group == ExceptionGroup::name || f.group == ExceptionGroup::type) {
    for (auto n : q) add_name(f.names, n);
    if (f.group == ExceptionGroup::type)
      called.for_each_match(head, [&](const std::vector<std::string_view>& g) {
        if (g.size() > 1) add_name(f.names, g[1]);
      });
  }
  static const Regex in_repr = Regex::must(R"re(\w+(?:Error|Exception)\('([A-Za-z_][A-Za-z0-9_.]*)')re");
  for (size_t i = header; i < block.size(); ++i)
    in_repr.for_each_match(block[i].substr(0, 4096), [&](const std::vector<std::string_view>& g) {
      if (g.size() > 1) add_name(f.names, g[1]);
    });
  for (size_t i = header; i < block.size(); ++i)
    mean.for_each_match(block[i].substr(0, 1024), [&](const std::vector<std::string_view>& g) {
      if (g.size() > 1) add_name(f.suggestions, g[1]);
    });
}

}  // namespace

FailureForm parse_failure_form(std::string_view message) {
  FailureForm f;
  const std::vector<std::string_view> block = failure_block(message);
  const size_t header = read_exception_header(f, block);
  f.group = group_of(f.exception);
  if (header == block.size()) return f;
  read_compared_values(f, block, header);
  read_quoted_names(f, block, header);
  return f;
}

}  // namespace spark
