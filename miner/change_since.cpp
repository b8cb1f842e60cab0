#include "miner/change_since.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_set>

#include "base/text.h"
#include "code/code_structure.h"
#include "formats/failure_form.h"

namespace spark {

namespace {

bool word_start(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool word_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

// Words every program repeats: keywords of the languages spark reads and the names a method's receiver goes by.
const std::unordered_set<std::string_view>& common_words() {
  static const std::unordered_set<std::string_view> k = {
      "False", "None", "True", "and", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
      "else", "except", "finally", "for", "from", "global", "import", "lambda", "nonlocal", "not", "pass", "raise",
      "return", "try", "while", "with", "yield", "self", "cls", "function", "const", "let", "var", "new", "this",
      "null", "undefined", "true", "false", "public", "private", "protected", "static", "final", "void", "int", "long",
      "boolean", "String", "throws", "throw", "catch", "extends", "implements", "interface", "package", "export",
      "default", "typeof", "instanceof", "switch", "case", "super", "abstract", "synchronized", "object", "str",
      "print",
      // Python's builtins a change of any function body uses
      "list", "dict", "set", "tuple", "len", "range", "isinstance", "type", "bytes", "open", "bool", "float", "repr",
      "getattr", "setattr", "hasattr", "iter", "next", "sorted", "reversed", "enumerate", "zip", "map", "filter", "min",
      "max", "sum", "any", "all", "Exception", "ValueError", "TypeError", "KeyError", "args", "kwargs"};
  return k;
}

// The names of a line's code: words of ≥ 3 characters outside string literals and comments, not common_words.
void names_of(std::string_view line, std::set<std::string>& out) {
  size_t i = 0;
  while (i < line.size()) {
    const char ch = line[i];
    if (ch == '#' || (ch == '/' && i + 1 < line.size() && line[i + 1] == '/')) break;
    if (ch == '\'' || ch == '"' || ch == '`') {
      ++i;
      while (i < line.size() && line[i] != ch) i += line[i] == '\\' ? 2 : 1;
      ++i;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      while (i < line.size() && word_char(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    if (!word_start(static_cast<unsigned char>(ch))) {
      ++i;
      continue;
    }
    const size_t s = i;
    while (i < line.size() && word_char(static_cast<unsigned char>(line[i]))) ++i;
    const std::string_view w = line.substr(s, i - s);
    if (w.size() >= 3 && !common_words().contains(w)) out.emplace(w);
  }
}

// The name a line defines, when it is a definition: `def f(`, `async def f(`, `class C`, `function f(`, a
// module-level `NAME =` (a constant, a default). "" else.
std::string defined_name(std::string_view line) {
  const size_t indent = line.find_first_not_of(" \t");
  if (indent == std::string_view::npos) return "";
  std::string_view rest = line.substr(indent);
  for (std::string_view kw : {"async def ", "def ", "class ", "function ", "async function "})
    if (rest.starts_with(kw)) {
      rest.remove_prefix(kw.size());
      size_t n = 0;
      while (n < rest.size() && word_char(static_cast<unsigned char>(rest[n]))) ++n;
      return n >= 2 ? std::string(rest.substr(0, n)) : "";
    }
  if (indent != 0 || !word_start(static_cast<unsigned char>(rest[0]))) return "";
  size_t n = 0;
  while (n < rest.size() && word_char(static_cast<unsigned char>(rest[n]))) ++n;
  const size_t eq = rest.find_first_not_of(" \t", n);
  if (n < 2 || eq == std::string_view::npos || rest[eq] != '=' || (eq + 1 < rest.size() && rest[eq + 1] == '='))
    return "";
  const std::string_view name = rest.substr(0, n);
  return common_words().contains(name) ? "" : std::string(name);
}

// A line's literals as failure_form reads values (strings in canonical single quotes, numbers of ≥ 2 characters),
// without the trivial ones a change of any line holds, and without a docstring's or a long text's (a line that starts
// with a quote, a string of over 80 characters): prose, not a value a test compares.
void literals_of(std::string_view line, std::set<std::string>& out) {
  const size_t indent = line.find_first_not_of(" \t");
  if (indent == std::string_view::npos || line[indent] == '"' || line[indent] == '\'') return;
  const size_t hash = line.find('#');
  for (auto& t : literal_tokens(canonical_code(line.substr(0, hash))))
    if (t.size() <= 80 &&
        (t.size() >= 4 || (!t.empty() && std::isdigit(static_cast<unsigned char>(t[0])) && t.size() >= 2)))
      out.insert(std::move(t));
}

size_t indent_of(std::string_view line) {
  const size_t i = line.find_first_not_of(" \t");
  return i == std::string_view::npos ? line.size() : i;
}

// The function whose body holds a changed line that is indented `indent`: the nearest `def`/`function` line at or
// above line `above` (1-based) of `lines` that is indented less, climbing out through the blocks that hold it; ""
// when none (module-level code). Its callers see the change.
std::string enclosing_function(const std::vector<std::string_view>& lines, int above, size_t indent) {
  for (int i = std::min(above, static_cast<int>(lines.size())) - 1; i >= 0; --i) {
    const std::string_view l = lines[static_cast<size_t>(i)];
    if (is_blank(l)) continue;
    const size_t in = indent_of(l);
    if (in >= indent) continue;
    const std::string_view rest = l.substr(in);
    if (rest.starts_with("def ") || rest.starts_with("async def ") || rest.starts_with("function ") ||
        rest.starts_with("async function "))
      return defined_name(l);
    if (in == 0) return "";
    indent = in;
  }
  return "";
}

// Whether `path` is product code this reads: a file of a language spark parses, not test code, not test data.
bool product_code(const std::string& path, const TestCodeRule& rule) {
  return language_of_path(path).has_value() && !rule.matches(path) && !rule.is_test_data(path);
}

// The step from one version of a test file to the next: lines carried through unchanged ranges keep what they had;
// the added lines are marked changed by `commit`.
struct Attributed {
  std::string text;
  std::vector<std::optional<std::string>> commit;  // per line: nullopt = as at the last pass
};

Status step(Attributed& a, const std::string& next, const std::string& path, const std::string& commit) {
  if (a.text == next) return {};
  auto hunks = line_hunks(a.text, next, path);
  TRY(hunks);
  std::vector<std::optional<std::string>> out;
  out.reserve(split_lines(next).size());
  size_t old_at = 0;  // 0-based lines of the old version copied so far
  for (const auto& h : *hunks) {
    // A hunk that removes lines starts at its first removed line; one that only adds starts after old_start.
    const size_t unchanged_end = h.removed.empty() ? static_cast<size_t>(h.old_start)
                                                   : static_cast<size_t>(std::max(h.old_start - 1, 0));
    while (old_at < unchanged_end && old_at < a.commit.size()) out.push_back(a.commit[old_at++]);
    // A line whose text is the same but for its line end (a last line that gained its newline, \n to \r\n) keeps
    // what it had.
    const auto same = [](std::string_view x, std::string_view y) {
      while (!x.empty() && x.back() == '\r') x.remove_suffix(1);
      while (!y.empty() && y.back() == '\r') y.remove_suffix(1);
      return x == y;
    };
    for (size_t i = 0; i < h.added.size(); ++i)
      if (i < h.removed.size() && same(h.removed[i], h.added[i]) && old_at + i < a.commit.size())
        out.push_back(a.commit[old_at + i]);
      else
        out.emplace_back(commit);
    old_at += h.removed.size();
  }
  while (old_at < a.commit.size()) out.push_back(a.commit[old_at++]);
  out.resize(split_lines(next).size());  // a last line without its line end counts as a line either way
  a.text = next;
  a.commit = std::move(out);
  return {};
}

// Adds what one changed product file gives, first seen first, up to kMaxProductChanges.
void add_product(std::vector<ChangeSince::Product>& out, std::set<std::pair<std::string, bool>>& seen,
                 std::vector<ChangeSince::Product> more) {
  for (auto& p : more) {
    if (out.size() >= kMaxProductChanges) return;
    if (seen.emplace(p.token, p.literal).second) out.push_back(std::move(p));
  }
}

}  // namespace

std::vector<ChangeSince::Product> product_tokens(const std::string& before, const std::string& after,
                                                 const std::string& path, const std::string& commit) {
  std::vector<ChangeSince::Product> out;
  auto hunks = line_hunks(before, after, path);
  if (!hunks) return out;
  std::set<std::string> removed_names, added_names, removed_literals, added_literals;
  std::vector<std::string> defined;
  const auto after_lines = split_lines(after);
  for (const auto& h : *hunks) {
    // The function whose body the hunk changed (by its first changed line's indentation, in the new version).
    const std::string& first = !h.added.empty() ? h.added.front() : h.removed.front();
    if (!is_blank(first))
      if (auto f = enclosing_function(after_lines, h.added.empty() ? h.new_start : h.new_start - 1, indent_of(first));
          !f.empty())
        defined.push_back(std::move(f));
    for (const auto& l : h.removed) {
      names_of(l, removed_names);
      literals_of(l, removed_literals);
      if (auto d = defined_name(l); !d.empty()) defined.push_back(std::move(d));
    }
    for (const auto& l : h.added) {
      names_of(l, added_names);
      literals_of(l, added_literals);
      if (auto d = defined_name(l); !d.empty()) defined.push_back(std::move(d));
    }
  }
  std::set<std::string> seen;
  for (auto& d : defined)
    if (seen.insert(d).second) out.push_back({d, false, path, commit});
  for (const auto& n : removed_names)
    if (!added_names.contains(n) && seen.insert(n).second) out.push_back({n, false, path, commit});
  for (const auto& l : removed_literals)
    if (!added_literals.contains(l)) out.push_back({l, true, path, commit});
  // What a case may hold (formats/case.cpp): at most 256 bytes of valid UTF-8 (a Latin-1 file's words are not).
  std::erase_if(out, [](const ChangeSince::Product& p) {
    return p.token.size() > 256 || find_invalid_utf8(p.token).has_value() || find_invalid_utf8(p.path).has_value();
  });
  return out;
}

Result<ChangeSince> change_since(const GitRepository& repo, const std::string& last_pass, const std::string& failing,
                                 const std::string& break_commit, const std::vector<SourceFile>& files,
                                 const ChangeSinceOptions& options) {
  auto since = repo.resolve(last_pass);
  TRY(since);
  auto to = repo.resolve(failing);
  TRY(to);
  auto descends = repo.descends_from(*to, *since);
  TRY(descends);
  if (!*descends)
    return fail("the last pass " + since->substr(0, 10) + " is not an ancestor of the failing commit " +
                to->substr(0, 10) + ": what changed between them is not a change since the pass");
  ChangeSince out;
  out.last_pass = *since;
  out.break_commit = break_commit;
  // The first-parent line from the last pass to the failure, oldest first; empty when the range is read as one diff.
  std::vector<std::string> chain;
  for (std::string at = *to; at != *since;) {
    if (chain.size() >= options.max_commits) {
      chain.clear();
      break;
    }
    chain.push_back(at);
    auto parents = repo.parents(at);
    TRY(parents);
    if (parents->empty()) {  // the root: the last pass is not on this line
      chain.clear();
      break;
    }
    at = parents->front();
  }
  std::reverse(chain.begin(), chain.end());
  const bool whole = chain.empty() && *since != *to;
  if (whole) chain.push_back(*to);
  const auto commit_name = [&](const std::string& sha) { return whole ? std::string() : sha; };

  // Test side.
  for (const auto& f : files) {
    auto base = repo.file_at(*since, f.path);
    if (!base && is_read_error(base.error())) return std::unexpected(base.error());
    Attributed a;
    a.text = base && *base ? **base : "";
    a.commit.assign(a.text.empty() ? 0 : split_lines(a.text).size(), std::nullopt);
    for (const auto& c : chain) {
      auto v = repo.file_at(c, f.path);
      if (!v && is_read_error(v.error())) return std::unexpected(v.error());
      TRY(step(a, v && *v ? **v : "", f.path, commit_name(c)));
    }
    TRY(step(a, f.content, f.path, ""));  // a work tree's version, or a recorded snapshot that differs
    const auto lines = split_lines(f.content);
    for (size_t i = 0; i < a.commit.size() && i < lines.size(); ++i)
      if (a.commit[i] && !is_blank(lines[i])) out.lines.push_back({{f.path, static_cast<int>(i + 1)}, *a.commit[i]});
  }

  // Product side, oldest commit first.
  std::set<std::pair<std::string, bool>> seen;
  std::string before = *since;
  size_t read = 0;  // bytes of product versions diffed: a range that rewrote a vendored tree stops at kMaxProductBytes
  for (const auto& c : chain) {
    if (out.product.size() >= kMaxProductChanges || read >= kMaxProductBytes) break;
    auto paths = repo.changed_paths(before, c);
    TRY(paths);
    for (const auto& p : *paths) {
      if (out.product.size() >= kMaxProductChanges || read >= kMaxProductBytes) break;
      if (!product_code(p, options.test_code)) continue;
      auto old_v = repo.file_at(before, p);
      auto new_v = repo.file_at(c, p);
      for (const auto* v : {&old_v, &new_v})
        if (!*v && is_read_error(v->error())) return std::unexpected(v->error());
      const std::string o = old_v && *old_v ? **old_v : "", n = new_v && *new_v ? **new_v : "";
      if (o.size() > kMaxTestFileBytes || n.size() > kMaxTestFileBytes) continue;
      read += o.size() + n.size();
      add_product(out.product, seen, product_tokens(o, n, p, commit_name(c)));
    }
    before = c;
  }
  return out;
}

}  // namespace spark
