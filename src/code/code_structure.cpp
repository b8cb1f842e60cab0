#include "code/code_structure.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "base/names.h"
#include "base/text.h"
#include "code/brace_structure.h"
#include "code/python_structure.h"

namespace spark {

namespace {

constexpr Named<Language> kLanguageNames[] = {{Language::python, "python"},
                                              {Language::java, "java"},
                                              {Language::javascript, "javascript"},
                                              {Language::typescript, "typescript"},
                                              {Language::other, "other"}};
constexpr Named<Language> kLanguageDisplayNames[] = {{Language::python, "Python"},
                                                     {Language::java, "Java"},
                                                     {Language::javascript, "JavaScript"},
                                                     {Language::typescript, "TypeScript"},
                                                     {Language::other, "plain text"}};
static_assert(std::size(kLanguageNames) == static_cast<size_t>(Language::other) + 1);
static_assert(std::size(kLanguageDisplayNames) == std::size(kLanguageNames));

constexpr Named<Level> kLevelNames[] = {
    {Level::line, "line"}, {Level::statement, "statement"}, {Level::block, "block"}, {Level::function, "function"}};
static_assert(std::size(kLevelNames) == static_cast<size_t>(Level::function) + 1);

}  // namespace

std::string_view language_name(Language language) { return name_of(kLanguageNames, language); }

std::string_view language_display_name(Language language) { return name_of(kLanguageDisplayNames, language); }

std::optional<Language> parse_language(std::string_view name) {
  const std::string lower = ascii_lower(name);
  if (lower == "python" || lower == "py") return Language::python;
  if (lower == "java") return Language::java;
  if (lower == "javascript" || lower == "js") return Language::javascript;
  if (lower == "typescript" || lower == "ts") return Language::typescript;
  return std::nullopt;
}

std::optional<Language> language_of_path(std::string_view path) {
  const auto slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view ext = name.substr(dot + 1);
  if (ext == "py" || ext == "pyi") return Language::python;
  if (ext == "java") return Language::java;
  if (ext == "js" || ext == "mjs" || ext == "cjs" || ext == "jsx") return Language::javascript;
  if (ext == "ts" || ext == "mts" || ext == "cts" || ext == "tsx") return Language::typescript;
  return std::nullopt;
}

Language language_for(std::string_view path, std::string_view case_language) {
  if (auto l = language_of_path(path)) return *l;
  if (auto l = parse_language(case_language)) return *l;
  if (!case_language.empty()) return Language::other;
  // Neither tells: a file without an extension is read as Python (spark's first language, and what cases without a
  // language meant); a file with an extension spark does not know is not.
  const auto slash = path.rfind('/');
  const auto name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return name.find('.') == std::string_view::npos || name.starts_with('.') ? Language::python : Language::other;
}

std::string_view comment_prefix(Language language) {
  switch (language) {
    case Language::java:
    case Language::javascript:
    case Language::typescript:
      return "//";
    case Language::python:
    case Language::other:
      return "#";
  }
  return "#";
}

std::string kind_key(Language language, std::string_view kind) {
  if (language == Language::python) return std::string(kind);
  std::string key(language_name(language));
  key += ':';
  key += kind;
  return key;
}

bool FunctionInfo::is_fixture() const {
  return setup || std::any_of(decorators.begin(), decorators.end(),
                              [](const std::string& d) { return d.find("fixture") != std::string::npos; });
}

const FunctionInfo* CodeStructure::function_at(int line) const {
  if (line < 1 || line > line_count) return nullptr;
  const int def = function[static_cast<size_t>(line - 1)];
  if (def == 0) return nullptr;
  for (const auto& f : functions)
    if (f.def_line == def) return &f;
  return nullptr;
}

std::pair<int, int> CodeStructure::statement_span(int line) const {
  if (line < 1 || line > line_count) return {line, line};
  const int id = statement[static_cast<size_t>(line - 1)];
  if (id == 0) return {line, line};
  int last = line;
  while (last < line_count && statement[static_cast<size_t>(last)] == id) ++last;
  return {id, last};
}

namespace {

bool ends_flow(std::string_view kind) {
  return kind == "return" || kind == "raise" || kind == "break" || kind == "continue";
}

// Basic blocks as in a control-flow graph: a loop header is a join point (the back edge), a clause (elif, else,
// except/catch, finally, case) is a branch target; an `if`, `with`, `try`, `switch`, `match` or `def` header ends or
// continues the straight-line code before it.
bool header_starts_block(std::string_view kind) {
  return kind == "for" || kind == "while" || kind == "do" || kind == "elif" || kind == "else" || kind == "except" ||
         kind == "except_group" || kind == "catch" || kind == "finally" || kind == "case";
}

// Whether the first statement of the header's body is a branch target.
bool body_starts_block(std::string_view kind) { return kind == "if" || kind == "try" || header_starts_block(kind); }

// A line of closing brackets alone ("}", "});", "]);"): it closes the statement before it.
bool closing_brackets_only(std::string_view line) {
  const auto t = trim(line);
  return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
    return c == '}' || c == ')' || c == ']' || c == ';' || c == ',' || c == ' ' || c == '\t';
  });
}

}  // namespace

void assemble_structure(std::string_view source, std::vector<StatementSpan> stmts, const std::vector<int>& comment_rows,
                        CodeStructure& out) {
  const auto lines = split_lines(source);
  const size_t n = lines.size();
  out.line_count = static_cast<int>(n);
  out.statement.assign(n, 0);
  out.block.assign(n, 0);
  out.function.assign(n, 0);
  out.kind.assign(n, "");

  // Statements: the header or the whole simple statement. Inner statements were added after their parents, so a
  // line ends up with its innermost statement; sort by first line to assign in order.
  std::stable_sort(stmts.begin(), stmts.end(),
                   [](const StatementSpan& a, const StatementSpan& b) { return a.first < b.first; });
  std::vector<int> depth_of(n, 0);
  std::vector<char> header_of(n, 0);
  for (const auto& s : stmts) {
    for (int l = s.first; l <= s.last && l <= out.line_count; ++l) {
      const auto i = static_cast<size_t>(l - 1);
      out.statement[i] = s.first;
      out.kind[i] = s.kind;
      depth_of[i] = s.depth;
      header_of[i] = s.header ? 1 : 0;
    }
  }
  for (int row : comment_rows) {
    const auto i = static_cast<size_t>(row - 1);
    if (row >= 1 && row <= out.line_count && out.statement[i] == 0) {
      out.statement[i] = row;
      out.kind[i] = "comment";
    }
  }
  // Functions: outer first, so inner functions overwrite their lines.
  std::vector<const FunctionInfo*> by_size;
  by_size.reserve(out.functions.size());
  for (const auto& f : out.functions) by_size.push_back(&f);
  std::stable_sort(by_size.begin(), by_size.end(), [](const FunctionInfo* a, const FunctionInfo* b) {
    return (a->end - a->start) > (b->end - b->start);
  });
  for (const auto* f : by_size)
    for (int l = f->start; l <= f->end && l <= out.line_count; ++l)
      out.function[static_cast<size_t>(l - 1)] = f->def_line;

  // Lines nothing claimed (syntax errors, continuation of strings the walker missed) stand alone; in the brace
  // languages a line of closing brackets is its own statement of kind "brace".
  for (size_t i = 0; i < n; ++i) {
    if (is_blank(lines[i])) {
      out.statement[i] = 0;
      out.kind[i] = "";
      out.function[i] = 0;
      continue;
    }
    if (out.statement[i] == 0) {
      out.statement[i] = static_cast<int>(i) + 1;
      out.kind[i] = out.language != Language::python && closing_brackets_only(lines[i]) ? "brace" : "unknown";
    }
  }
  // A function's blank-free lines keep its id; blank lines inside get 0 above.

  // CFG basic blocks, per function. A block starts at the function's first line, at a loop or clause header, at
  // the first statement of a branch or loop body, at the statement after a compound statement ends (a join: the
  // nesting depth falls), and after return/raise/break/continue. Comments join the block of the statement after
  // them; closing brackets the block before them.
  int block = 0;
  int prev_stmt = -1, prev_depth = 0, prev_func = -1;
  bool prev_opens_body = false, prev_ends = false;
  for (size_t i = 0; i < n; ++i) {
    if (out.statement[i] == 0 || out.kind[i] == "comment" || out.kind[i] == "brace") continue;
    if (out.statement[i] == prev_stmt) {
      out.block[i] = block;
      continue;
    }
    // The rest of a statement a nested function interrupted (a lambda's `};`): the block of its first line.
    if (out.language != Language::python && out.statement[i] < static_cast<int>(i) + 1 &&
        out.block[static_cast<size_t>(out.statement[i] - 1)] != 0) {
      out.block[i] = out.block[static_cast<size_t>(out.statement[i] - 1)];
      continue;
    }
    const int d = depth_of[i];
    const std::string& k = out.kind[i];
    const bool starts = block == 0 || out.function[i] != prev_func || (header_of[i] && header_starts_block(k)) ||
                        prev_opens_body || prev_ends || d < prev_depth;
    if (starts) block = static_cast<int>(i) + 1;
    out.block[i] = block;
    prev_stmt = out.statement[i];
    prev_depth = d;
    prev_opens_body = header_of[i] && body_starts_block(k);
    prev_ends = ends_flow(k);
    prev_func = out.function[i];
  }
  // Comments: the block of the next statement in the same function, else the previous one.
  int next_block = 0, next_func = -1;
  for (size_t i = n; i-- > 0;) {
    if (out.statement[i] == 0 || out.kind[i] == "brace") continue;
    if (out.kind[i] != "comment") {
      next_block = out.block[i];
      next_func = out.function[i];
    } else if (next_func == out.function[i] && next_block != 0) {
      out.block[i] = next_block;
    }
  }
  int last_block = 0;
  for (size_t i = 0; i < n; ++i) {
    if (out.statement[i] == 0) continue;
    if (out.block[i] == 0) out.block[i] = last_block != 0 ? last_block : static_cast<int>(i) + 1;
    last_block = out.block[i];
  }
}

CallRecorder::CallRecorder(CodeStructure& s) : s_(s), parent_(s.functions.size(), -1) {
  // Functions nest (a tree of spans): sorted by start, outer first, a stack of the open ones gives each its innermost
  // enclosing function in O(n log n) (a minified file defines tens of thousands).
  std::vector<size_t> order(s.functions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &fa = s.functions[a], &fb = s.functions[b];
    return fa.start != fb.start ? fa.start < fb.start : fa.end > fb.end;
  });
  std::vector<size_t> open;
  for (size_t i : order) {
    const auto& f = s.functions[i];
    while (!open.empty() && s.functions[open.back()].end < f.end) open.pop_back();
    if (!open.empty()) parent_[i] = static_cast<long>(open.back());
    open.push_back(i);
  }
  for (size_t i = 0; i < s.functions.size(); ++i) by_def_.emplace_back(s.functions[i].def_line, i);
  // The first function of each def line wins, as CodeStructure::function_at finds it.
  std::stable_sort(by_def_.begin(), by_def_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

void CallRecorder::record(size_t row, const std::string& name) {
  if (row >= s_.function.size() || s_.function[row] == 0) return;
  const auto it = std::lower_bound(by_def_.begin(), by_def_.end(), std::make_pair(s_.function[row], size_t{0}),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (it == by_def_.end() || it->first != s_.function[row]) return;
  for (long f = static_cast<long>(it->second); f >= 0; f = parent_[static_cast<size_t>(f)])
    s_.functions[static_cast<size_t>(f)].calls.insert(name);
}

CodeStructure analyze_lines(std::string_view source, Language language) {
  CodeStructure out;
  out.language = language;
  const auto lines = split_lines(source);
  std::vector<StatementSpan> stmts;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (is_blank(lines[i])) continue;
    const int row = static_cast<int>(i) + 1;
    stmts.push_back({row, row, 0, false, "line"});
  }
  assemble_structure(source, std::move(stmts), {}, out);
  // Without control flow to read, every line is its own block too.
  out.block = out.statement;
  return out;
}

CodeStructure analyze_code(std::string_view source, Language language, std::string_view path) {
  switch (language) {
    case Language::python:
      return analyze_python(source);
    case Language::java:
    case Language::javascript:
    case Language::typescript:
      return analyze_brace(source, language, path.ends_with(".tsx"));
    case Language::other:
      return analyze_lines(source, language);
  }
  return analyze_lines(source, language);
}

std::string_view level_name(Level level) { return name_of(kLevelNames, level); }

bool parse_level(std::string_view text, Level& out) {
  const auto level = value_named(kLevelNames, text);
  if (level) out = *level;
  return level.has_value();
}

std::vector<std::string> level_names() { return names_of(kLevelNames); }

int unit_of(const CodeStructure& s, Level level, int line) {
  if (line < 1 || line > s.line_count) return 0;
  const auto i = static_cast<size_t>(line - 1);
  switch (level) {
    case Level::line:
      return line;
    case Level::statement:
      return s.statement[i];
    case Level::block:
      return s.block[i];
    case Level::function:
      return s.statement[i] == 0 ? 0 : s.function[i];
  }
  return line;
}

}  // namespace spark
