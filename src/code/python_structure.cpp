#include "code/python_structure.h"

#include <tree_sitter/api.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <unordered_map>

#include "base/text.h"
#include "code/tree_walk.h"

extern "C" const TSLanguage* tree_sitter_python(void);

namespace spark {
namespace {

using ParserDeleter = TsParserDeleter;
using TreeDeleter = TsTreeDeleter;

bool is_compound(std::string_view t) {
  return t == "if_statement" || t == "for_statement" || t == "while_statement" || t == "try_statement" ||
         t == "with_statement" || t == "match_statement" || t == "function_definition" || t == "class_definition" ||
         t == "elif_clause" || t == "else_clause" || t == "except_clause" || t == "except_group_clause" ||
         t == "finally_clause" || t == "case_clause";
}

bool is_simple_statement(std::string_view t) {
  return t == "expression_statement" || t == "assert_statement" || t == "return_statement" || t == "raise_statement" ||
         t == "pass_statement" || t == "break_statement" || t == "continue_statement" || t == "import_statement" ||
         t == "import_from_statement" || t == "future_import_statement" || t == "global_statement" ||
         t == "nonlocal_statement" || t == "delete_statement" || t == "print_statement" || t == "exec_statement" ||
         t == "type_alias_statement" || t == "decorator";
}

// Short kind names for the ranker's statistics.
std::string kind_of(std::string_view type, TSNode node, std::string_view src) {
  if (type == "expression_statement") {
    if (ts_node_named_child_count(node) > 0) {
      TSNode child = ts_node_named_child(node, 0);
      std::string_view ct = ts_node_type(child);
      if (ct == "assignment" || ct == "augmented_assignment") {
        TSNode right = ts_node_child_by_field_name(child, "right", 5);
        if (!ts_node_is_null(right) && std::string_view(ts_node_type(right)) == "call") return "assign_call";
        return "assign";
      }
      if (ct == "call") {
        TSNode fn = ts_node_child_by_field_name(child, "function", 8);
        const auto text = src.substr(ts_node_start_byte(fn), ts_node_end_byte(fn) - ts_node_start_byte(fn));
        if (text.find("assert") != std::string_view::npos) return "assert_call";
        return "call";
      }
      if (ct == "string") return "docstring";
    }
    return "expression";
  }
  std::string k(type);
  for (const char* suffix : {"_statement", "_clause", "_definition"}) {
    const size_t n = std::strlen(suffix);
    if (k.size() > n && k.compare(k.size() - n, n, suffix) == 0) {
      k.resize(k.size() - n);
      break;
    }
  }
  return k;
}

// Calls fn for each named child.
template <class Fn>
void for_each_named_child(TSNode node, Fn&& fn) {
  for_each_child(node, [&](TSNode child) {
    if (ts_node_is_named(child)) fn(child);
  });
}

class Walker {
 public:
  Walker(std::string_view src, CodeStructure& out) : src_(src), out_(out) {}

  void walk(TSNode node, int depth, const std::string& class_name) {
    const std::string_view type = ts_node_type(node);
    if (type == "comment") {
      const int row = static_cast<int>(ts_node_start_point(node).row) + 1;
      comments_.push_back(row);
      return;
    }
    if (type == "ERROR") out_.has_syntax_errors = true;
    if (is_simple_statement(type)) {
      add_stmt(node, static_cast<int>(ts_node_end_point(node).row) + 1, depth, false, kind_of(type, node, src_));
      return;
    }
    if (type == "decorated_definition") {
      TSNode def = ts_node_child_by_field_name(node, "definition", 10);
      if (!ts_node_is_null(def) && std::string_view(ts_node_type(def)) == "function_definition") {
        const size_t idx = begin_function(def, node, class_name);
        for_each_named_child(node, [&](TSNode child) {
          if (std::string_view(ts_node_type(child)) == "decorator") {
            out_.functions[idx].decorators.push_back(trimmed_text(child, 1));
            walk(child, depth, class_name);
          }
        });
        walk_function_body(def, depth, class_name);
        return;
      }
    }
    if (type == "function_definition") {
      begin_function(node, node, class_name);
      walk_function_body(node, depth, class_name);
      return;
    }
    std::string inner_class = class_name;
    if (type == "class_definition") {
      TSNode name = ts_node_child_by_field_name(node, "name", 4);
      inner_class = ts_node_is_null(name) ? "" : text(name);
      out_.classes.push_back({inner_class, static_cast<int>(ts_node_start_point(node).row) + 1,
                              static_cast<int>(ts_node_end_point(node).row) + 1});
    }
    if (is_compound(type)) {
      add_stmt(node, header_last_row(node), depth, true, kind_of(type, node, src_));
      ++depth;
    }
    for_each_named_child(node, [&](TSNode child) {
      const std::string_view ct = ts_node_type(child);
      // Expressions of a compound header (conditions, with items, for targets) belong to the enclosing function.
      const bool structural = ct == "block" || ct == "module" || is_compound(ct) || is_simple_statement(ct) ||
                              ct == "decorated_definition" || ct == "comment" || ct == "ERROR";
      if (structural || !is_compound(type)) walk(child, depth, inner_class);
    });
  }

  std::vector<StatementSpan> stmts;
  std::vector<int> comments_;

 private:
  size_t begin_function(TSNode def, TSNode outer, const std::string& class_name) {
    FunctionInfo info;
    TSNode name = ts_node_child_by_field_name(def, "name", 4);
    info.name = ts_node_is_null(name) ? "" : text(name);
    info.class_name = class_name;
    info.start = static_cast<int>(ts_node_start_point(outer).row) + 1;
    info.end = static_cast<int>(ts_node_end_point(outer).row) + 1;
    info.def_line = static_cast<int>(ts_node_start_point(def).row) + 1;
    TSNode params = ts_node_child_by_field_name(def, "parameters", 10);
    if (!ts_node_is_null(params)) {
      for_each_named_child(params, [&](TSNode p) {
        if (std::string_view(ts_node_type(p)) == "identifier") {
          info.params.push_back(text(p));
        } else {
          TSNode pn = ts_node_child_by_field_name(p, "name", 4);
          if (ts_node_is_null(pn) && ts_node_named_child_count(p) > 0) pn = ts_node_named_child(p, 0);
          if (!ts_node_is_null(pn) && std::string_view(ts_node_type(pn)) == "identifier")
            info.params.push_back(text(pn));
        }
      });
    }
    out_.functions.push_back(std::move(info));
    return out_.functions.size() - 1;
  }

  void walk_function_body(TSNode def, int depth, const std::string& class_name) {
    add_stmt(def, header_last_row(def), depth, true, "def");
    TSNode body = ts_node_child_by_field_name(def, "body", 4);
    if (!ts_node_is_null(body)) walk(body, depth + 1, class_name);
  }

  // Last row of a compound statement's header: the row before its body block, or its first row when the body
  // shares it (`if x: return`).
  int header_last_row(TSNode node) {
    int last = static_cast<int>(ts_node_start_point(node).row) + 1;
    TSTreeCursor cursor = ts_tree_cursor_new(node);
    if (ts_tree_cursor_goto_first_child(&cursor)) {
      do {
        TSNode child = ts_tree_cursor_current_node(&cursor);
        if (std::string_view(ts_node_type(child)) == ":") {
          last = static_cast<int>(ts_node_end_point(child).row) + 1;
          break;
        }
      } while (ts_tree_cursor_goto_next_sibling(&cursor));
    }
    ts_tree_cursor_delete(&cursor);
    return last;
  }

  void add_stmt(TSNode node, int last, int depth, bool header, std::string kind) {
    const int first = static_cast<int>(ts_node_start_point(node).row) + 1;
    stmts.push_back({first, std::max(first, last), depth, header, std::move(kind)});
  }

  std::string text(TSNode n) const {
    return std::string(src_.substr(ts_node_start_byte(n), ts_node_end_byte(n) - ts_node_start_byte(n)));
  }
  std::string trimmed_text(TSNode n, size_t skip) const {
    std::string t = text(n);
    return std::string(trim(std::string_view(t).substr(std::min(skip, t.size()))));
  }

  std::string_view src_;
  CodeStructure& out_;
};

// Called names: one depth-first pass with a single cursor, comparing symbol ids (a TSQuery or a cursor per node
// costs several times more on large files).
void collect_python_calls(std::string_view src, const TSTree* tree, CodeStructure& out) {
  if (out.functions.empty()) return;
  const TSLanguage* lang = tree_sitter_python();
  static const TSSymbol kCall = ts_language_symbol_for_name(lang, "call", 4, true);
  static const TSSymbol kIdentifier = ts_language_symbol_for_name(lang, "identifier", 10, true);
  static const TSSymbol kAttribute = ts_language_symbol_for_name(lang, "attribute", 9, true);
  CallRecorder calls(out);
  const auto record = [&](TSNode n) {
    calls.record(ts_node_start_point(n).row,
                 std::string(src.substr(ts_node_start_byte(n), ts_node_end_byte(n) - ts_node_start_byte(n))));
  };
  for_each_node(ts_tree_root_node(tree), [&](TSNode node) {
    if (ts_node_symbol(node) != kCall) return;
    TSNode fn = ts_node_child_by_field_name(node, "function", 8);
    if (ts_node_is_null(fn)) return;
    if (ts_node_symbol(fn) == kIdentifier) {
      record(fn);
    } else if (ts_node_symbol(fn) == kAttribute) {
      TSNode attr = ts_node_child_by_field_name(fn, "attribute", 9);
      if (!ts_node_is_null(attr)) record(attr);
    }
  });
}

}  // namespace

namespace {

CodeStructure structure_from_tree(std::string_view source, const TSTree* tree) {
  CodeStructure out;
  const auto lines = split_lines(source);
  out.line_count = static_cast<int>(lines.size());
  const size_t n = lines.size();
  out.statement.assign(n, 0);
  out.block.assign(n, 0);
  out.function.assign(n, 0);
  out.kind.assign(n, "");

  Walker walker(source, out);
  if (tree) {
    TSNode root = ts_tree_root_node(tree);
    if (ts_node_has_error(root)) out.has_syntax_errors = true;
    walker.walk(root, 0, "");
  } else {
    out.has_syntax_errors = true;
  }

  std::vector<int> comments = std::move(walker.comments_);
  std::vector<StatementSpan> stmts = std::move(walker.stmts);
  // Called names need the per-line functions assemble_structure fills, so they are collected after it.
  assemble_structure(source, std::move(stmts), comments, out);
  if (tree) collect_python_calls(source, tree, out);
  return out;
}

}  // namespace

struct PythonParser::Impl {
  std::unique_ptr<TSParser, ParserDeleter> parser{ts_parser_new()};
  bool language_ok = false;
  struct Recent {
    std::string source;
    std::unique_ptr<TSTree, TreeDeleter> tree;
    std::vector<size_t> starts;  // line_starts(source)
  };
  std::deque<Recent> recent;  // most recent last
  size_t keep = 4;
  std::unordered_map<std::string, Recent> by_path;  // the last version seen of each file
  static constexpr size_t kMaxPaths = 64;  // trees of the last version of this many files (a few MB each at most)
};

PythonParser::PythonParser(size_t keep) : impl_(std::make_unique<Impl>()) {
  impl_->keep = std::max<size_t>(1, keep);
  impl_->language_ok = ts_parser_set_language(impl_->parser.get(), tree_sitter_python());
}
PythonParser::~PythonParser() = default;
PythonParser::PythonParser(PythonParser&&) noexcept = default;
PythonParser& PythonParser::operator=(PythonParser&&) noexcept = default;

namespace {

struct ByteEdit {
  size_t old_start = 0, old_end = 0, new_start = 0, new_end = 0;
};

std::vector<size_t> line_starts(std::string_view s) {
  std::vector<size_t> out{0};
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n') out.push_back(i + 1);
  if (out.back() != s.size()) out.push_back(s.size());  // the end of a last line without a newline
  return out;
}

// The edits that turn `old` into `now`, and how many bytes of `now` they leave untouched. With the same number of
// lines (a changed assertion, a literal, a comment), one edit per run of differing lines, so changes far apart in a
// large file still share the rest; otherwise one edit between the common prefix and the common suffix.
size_t diff_edits(std::string_view old, const std::vector<size_t>& a, std::string_view now,
                  const std::vector<size_t>& b, std::vector<ByteEdit>& edits) {
  edits.clear();
  constexpr size_t kMaxRuns = 64;
  if (a.size() == b.size()) {
    size_t changed = 0;
    const size_t lines = a.size() - 1;
    for (size_t i = 0; i < lines && edits.size() <= kMaxRuns;) {
      const auto same = [&](size_t l) {
        return old.substr(a[l], a[l + 1] - a[l]) == now.substr(b[l], b[l + 1] - b[l]);
      };
      if (same(i)) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < lines && !same(j)) ++j;
      edits.push_back({a[i], a[j], b[i], b[j]});
      changed += b[j] - b[i];
      i = j;
    }
    if (edits.size() <= kMaxRuns) return now.size() - changed;
    edits.clear();
  }
  const size_t limit = std::min(old.size(), now.size());
  size_t prefix = 0;
  while (prefix < limit && old[prefix] == now[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < limit - prefix && old[old.size() - 1 - suffix] == now[now.size() - 1 - suffix]) ++suffix;
  edits.push_back({prefix, old.size() - suffix, prefix, now.size() - suffix});
  return prefix + suffix;
}

// point_at by the text's line starts (line_starts): a binary search instead of a count.
TSPoint point_in(std::string_view s, const std::vector<size_t>& starts, size_t offset) {
  // The last line start at or before offset; a sentinel start equal to the size belongs to the line before it.
  auto it = std::upper_bound(starts.begin(), starts.end(), offset);
  size_t row = static_cast<size_t>(it - starts.begin()) - 1;
  if (row > 0 && starts[row] == s.size() && (s.empty() || s.back() != '\n')) --row;
  return TSPoint{static_cast<uint32_t>(row), static_cast<uint32_t>(offset - starts[row])};
}

}  // namespace

const TSTree* PythonParser::parse(std::string_view source, std::string_view path) {
  if (!impl_->language_ok || source.size() > std::numeric_limits<uint32_t>::max()) return nullptr;
  // Reparse incrementally from the recent version that shares the most text, when it shares at least half: its tree
  // edited where the texts differ (tree-sitter's ts_tree_edit). Same tree as a full parse, a fraction of the time.
  // The same text again (several tests of one file version): its tree as it is.
  for (auto it = impl_->recent.rbegin(); it != impl_->recent.rend(); ++it)
    if (it->source == source) return it->tree.get();
  Impl::Recent* base = nullptr;
  size_t best_shared = 0;
  std::vector<ByteEdit> edits, best_edits;
  std::vector<Impl::Recent*> candidates;
  for (auto& r : impl_->recent) candidates.push_back(&r);
  if (!path.empty())
    if (auto it = impl_->by_path.find(std::string(path)); it != impl_->by_path.end()) candidates.push_back(&it->second);
  std::vector<size_t> starts = line_starts(source);
  for (Impl::Recent* cand : candidates) {
    const size_t shared = diff_edits(cand->source, cand->starts, source, starts, edits);
    if (shared > best_shared) {
      best_shared = shared;
      best_edits.swap(edits);
      base = cand;
    }
  }
  TSTree* tree = nullptr;
  if (base && best_shared * 2 >= source.size()) {
    const std::string_view old = base->source;
    std::unique_ptr<TSTree, TreeDeleter> edited(ts_tree_copy(base->tree.get()));
    // Last edit first: the earlier ones' positions stay those of the old text.
    for (auto it = best_edits.rbegin(); it != best_edits.rend(); ++it) {
      TSInputEdit edit;
      edit.start_byte = static_cast<uint32_t>(it->old_start);
      edit.old_end_byte = static_cast<uint32_t>(it->old_end);
      edit.new_end_byte = static_cast<uint32_t>(it->old_start + (it->new_end - it->new_start));
      edit.start_point = point_in(old, base->starts, it->old_start);
      edit.old_end_point = point_in(old, base->starts, it->old_end);
      edit.new_end_point = point_in(source, starts, it->new_end);
      ts_tree_edit(edited.get(), &edit);
    }
    tree =
        ts_parser_parse_string(impl_->parser.get(), edited.get(), source.data(), static_cast<uint32_t>(source.size()));
  } else {
    tree = ts_parser_parse_string(impl_->parser.get(), nullptr, source.data(), static_cast<uint32_t>(source.size()));
  }
  if (tree) {
    if (!path.empty()) {
      if (impl_->by_path.size() >= Impl::kMaxPaths && !impl_->by_path.contains(std::string(path)))
        impl_->by_path.clear();
      impl_->by_path[std::string(path)] = {std::string(source),
                                           std::unique_ptr<TSTree, TreeDeleter>(ts_tree_copy(tree)), starts};
    }
    impl_->recent.push_back({std::string(source), std::unique_ptr<TSTree, TreeDeleter>(tree), std::move(starts)});
    if (impl_->recent.size() > impl_->keep) impl_->recent.pop_front();
  }
  return tree;  // owned by impl_->recent until later parses push it out
}

CodeStructure PythonParser::analyze(std::string_view source, std::string_view path) {
  return structure_from_tree(source, parse(source, path));
}

namespace {

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

// The word at the start of `s` (identifier characters), and `s` after it and the blanks that follow.
std::string_view take_word(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && ident_char(s[n])) ++n;
  const std::string_view w = s.substr(0, n);
  s.remove_prefix(n);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return w;
}

// scan_function_span's pass over the physical lines, tracking what makes a line start a statement: not inside a
// string (triple-quoted ones span lines), a bracket, or a backslash continuation. Each statement line has an
// indentation; a block (class, def, if, ...) ends at the next statement line indented no deeper than its header.
class FunctionSpanScan {
 public:
  FunctionSpanScan(const std::string& class_name, const std::string& function)
      : class_name_(class_name), function_(function) {}

  // scan_function_span's answer for `source`.
  std::optional<std::optional<std::pair<int, int>>> run(std::string_view source);

 private:
  struct Open {
    int indent;
    enum Kind { kClassScope, kDefScope, kOtherScope } kind;
    std::string_view name;
  };
  struct Candidate {
    bool module_level;
    int start, indent;
    size_t stack_index;  // its own entry in `stack_`
    int end = 0;         // the last line so far
  };
  // What the start of a statement line asks of the scan.
  enum class Next { kDecline, kNextLine, kRestOfLine };

  void finish();
  bool indentation_ok(int indent);
  void close(int indent);
  Next read_statement_start(std::string_view line, size_t& i);
  bool read_block_header(std::string_view rest, int indent);
  void read_rest_of_line(std::string_view line, size_t i);

  const std::string& class_name_;
  const std::string& function_;
  std::vector<Open> stack_;
  std::optional<std::pair<int, int>> module_level_, method_;
  std::optional<Candidate> open_;  // the candidate whose end is being looked for
  // Comment-only lines since the last statement (line, indentation): whether they belong to the candidate is known
  // only when the next statement comes (tree-sitter's scanner dedents at a comment only when the code after it is
  // shallower too).
  std::vector<std::pair<int, int>> comments_;
  int last_statement_indent_ = 0;
  // Whether the last statement was a block's header (class, def, if, ...) and whether its body followed the header's
  // colon on the same logical line (`def f(): return 1`), which opens no indented block.
  bool header_ = false, colon_seen_ = false, inline_body_ = false, soft_header_ = false;
  int decorator_start_ = 0, decorator_indent_ = -1;
  char triple_ = 0;  // the quote of an open triple-quoted string
  int depth_ = 0;
  bool continued_ = false;
  int line_no_ = 0;
  std::vector<int> indents_{0};  // the indentation levels open, as Python's tokenizer keeps them
};

void FunctionSpanScan::finish() {
  const std::pair<int, int> span{open_->start, open_->end};
  if (open_->module_level) {
    if (!module_level_) module_level_ = span;
  } else if (!method_) {
    method_ = span;
  }
  open_.reset();
}

bool FunctionSpanScan::indentation_ok(int indent) {
  if (header_ && !colon_seen_) {
    if (!soft_header_) return false;  // a block header ends with its colon
    header_ = false;                  // `match` or `case` as a name (`match = pattern.match(line)`)
  }
  const bool opens = header_ && !inline_body_;            // a header whose body is on the lines below
  if (opens != (indent > indents_.back())) return false;  // "expected an indented block" / "unexpected indent"
  if (opens) {
    indents_.push_back(indent);
  } else {
    while (indent < indents_.back()) indents_.pop_back();
    if (indent != indents_.back()) return false;  // "unindent does not match any outer indentation level"
  }
  return true;
}

void FunctionSpanScan::close(int indent) {
  // A statement at `indent` (0 at the end of the file): every block whose header is indented as deep or deeper has
  // ended. When that ends the candidate, the comments before the statement are settled as tree-sitter does: the
  // open blocks' body indents, innermost first (each block's body is where its inner block's header stands; the
  // innermost's is the last statement's); a comment shallower than the current body closes that block; the
  // comments that come while the candidate's own body is still open are part of it.
  if (open_ && indent <= open_->indent) {
    std::vector<int> bodies;
    for (size_t j = open_->stack_index; j < stack_.size() && stack_[j].indent < last_statement_indent_; ++j)
      bodies.push_back(j + 1 < stack_.size() && stack_[j + 1].indent < last_statement_indent_ ? stack_[j + 1].indent
                                                                                              : last_statement_indent_);
    size_t level = bodies.size();
    for (const auto& [line, comment_indent] : comments_) {
      while (level > 0 && comment_indent < bodies[level - 1]) --level;
      if (level == 0) break;
      open_->end = line;
    }
    finish();
  }
  comments_.clear();
  while (!stack_.empty() && stack_.back().indent >= indent) stack_.pop_back();
}

// A line where a statement starts: its indentation, then what the statement opens. Leaves `i` after the indentation.
FunctionSpanScan::Next FunctionSpanScan::read_statement_start(std::string_view line, size_t& i) {
  int indent = 0;
  for (; i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f'); ++i) {
    if (line[i] != ' ') return Next::kDecline;  // tabs or form feeds in indentation: let the parser decide
    ++indent;
  }
  if (i == line.size()) return Next::kNextLine;  // blank
  if (line[i] == '#') {
    if (open_) comments_.emplace_back(line_no_, indent);
    return Next::kNextLine;
  }
  // Python's indentation rules; a file that breaks them is a syntax error the parser recovers from in its own way,
  // so the scan declines. tests/fuzz found each: a header with no colon on its line ("def _()\n:"); text left
  // deeper after a docstring closed early ("unexpected indent"); a dedent to a column no open block stands at.
  if (!indentation_ok(indent)) return Next::kDecline;
  close(indent);
  last_statement_indent_ = indent;
  header_ = colon_seen_ = inline_body_ = soft_header_ = false;
  const std::string_view rest = line.substr(i);
  if (rest.front() == '@') {
    if (decorator_indent_ != indent) decorator_start_ = line_no_;
    decorator_indent_ = indent;
    return Next::kRestOfLine;
  }
  return read_block_header(rest, indent) ? Next::kRestOfLine : Next::kDecline;
}

// A statement that is not a decorator, `rest` from its first character: a `def` or `class` header (the candidate
// when it is the function looked for) or another block's header pushes its block. false: a malformed header.
bool FunctionSpanScan::read_block_header(std::string_view rest, int indent) {
  const int start = decorator_indent_ == indent ? decorator_start_ : line_no_;
  decorator_indent_ = -1;
  std::string_view word = take_word(rest);
  if (word == "async") word = take_word(rest);
  const bool in_classes =
      std::all_of(stack_.begin(), stack_.end(), [](const Open& o) { return o.kind == Open::kClassScope; });
  if (word == "def" || word == "class") {
    const std::string_view name = take_word(rest);
    // A header that is not `def NAME(` / `class NAME(` or `NAME:` (a type parameter list `[` too) is a syntax
    // error the parser recovers from in its own way (tests/fuzz found "def:t():", which it reads as `def t`).
    const char after = rest.empty() ? '\0' : rest.front();
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front())) ||
        !(after == '(' || after == '[' || (word == "class" && after == ':')))
      return false;
    if (word == "def" && in_classes && name == function_ && !open_) {
      const bool at_module = stack_.empty();
      const bool wanted = at_module ? !module_level_ && class_name_.empty()
                                    : !method_ && (class_name_.empty() || stack_.back().name == class_name_);
      if (wanted) open_ = Candidate{at_module, start, indent, stack_.size(), line_no_};
    }
    stack_.push_back({indent, word == "def" ? Open::kDefScope : Open::kClassScope, name});
    header_ = true;
  } else if (word == "if" || word == "elif" || word == "else" || word == "for" || word == "while" || word == "try" ||
             word == "except" || word == "finally" || word == "with" || word == "match" || word == "case") {
    stack_.push_back({indent, Open::kOtherScope, {}});
    header_ = true;
    soft_header_ = word == "match" || word == "case";
  }
  return true;
}

// The rest of the line from `i`: strings, brackets, comments, a trailing backslash.
void FunctionSpanScan::read_rest_of_line(std::string_view line, size_t i) {
  continued_ = false;
  for (; i < line.size(); ++i) {
    const char c = line[i];
    if (triple_) {
      if (c == '\\') {
        ++i;
      } else if (c == triple_ && line.compare(i, 3, std::string(3, triple_)) == 0) {
        triple_ = 0;
        i += 2;
      }
      continue;
    }
    if (c == '#') break;
    if (header_ && !colon_seen_ && depth_ == 0 && c == ':' && !(i + 1 < line.size() && line[i + 1] == '=')) {
      colon_seen_ = true;  // the header's colon (a walrus `:=` is not one)
      continue;
    }
    if (colon_seen_ && c != ' ' && c != '\t' && c != '\f') inline_body_ = true;
    if (c == '"' || c == '\'') {
      if (line.compare(i, 3, std::string(3, c)) == 0) {
        triple_ = c;
        i += 2;
        continue;
      }
      // A one-line string: to its closing quote (an unclosed one ends with the line, as Python would refuse it).
      for (++i; i < line.size() && line[i] != c; ++i)
        if (line[i] == '\\') ++i;
      continue;
    }
    if (c == '(' || c == '[' || c == '{')
      ++depth_;
    else if (c == ')' || c == ']' || c == '}')
      depth_ = std::max(0, depth_ - 1);
    else if (c == '\\' && i + 1 == line.size())
      continued_ = true;
  }
}

std::optional<std::optional<std::pair<int, int>>> FunctionSpanScan::run(std::string_view source) {
  size_t pos = 0;
  while (pos < source.size()) {
    size_t end = source.find('\n', pos);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(pos, end - pos);
    pos = end + 1;
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t i = 0;
    if (triple_ == 0 && depth_ == 0 && !continued_) {  // a statement starts on this line
      const Next next = read_statement_start(line, i);
      if (next == Next::kDecline) return std::nullopt;
      if (next == Next::kNextLine) continue;
    }
    read_rest_of_line(line, i);
    if (open_) open_->end = line_no_;
  }
  if (triple_ || depth_ != 0) return std::nullopt;  // unbalanced at the end: a syntax error the parser recovers from
  if (header_ && !(colon_seen_ && inline_body_) && !(soft_header_ && !colon_seen_))
    return std::nullopt;  // a block header with no body
  close(0);
  if (!class_name_.empty()) return method_;
  return module_level_ ? module_level_ : method_;
}

}  // namespace

std::optional<std::optional<std::pair<int, int>>> scan_function_span(std::string_view source,
                                                                     const std::string& class_name,
                                                                     const std::string& function) {
  // Bytes tree-sitter reads otherwise than as text: a NUL (tests/fuzz found "def\0e():", which the parser ends at the
  // NUL), a vertical tab or form feed (white space to it: tests/fuzz found a function the parser ran on past a "\v"
  // at a line's end) and a carriage return not before a line feed (a line break to it). The parser decides those.
  if (source.find_first_of(std::string_view("\0\v\f", 3)) != std::string_view::npos) return std::nullopt;
  for (size_t at = source.find('\r'); at != std::string_view::npos; at = source.find('\r', at + 1))
    if (at + 1 >= source.size() || source[at + 1] != '\n') return std::nullopt;
  return FunctionSpanScan(class_name, function).run(source);
}

std::optional<std::pair<int, int>> PythonParser::function_span(std::string_view source, std::string_view path,
                                                               const std::string& class_name,
                                                               const std::string& function) {
  if (auto scanned = scan_function_span(source, class_name, function)) return *scanned;
  return parsed_function_span(source, path, class_name, function);
}

std::optional<std::pair<int, int>> PythonParser::parsed_function_span(std::string_view source, std::string_view path,
                                                                      const std::string& class_name,
                                                                      const std::string& function) {
  const TSTree* tree = parse(source, path);
  if (!tree) return std::nullopt;
  const auto text = [&](TSNode n) {
    return source.substr(ts_node_start_byte(n), ts_node_end_byte(n) - ts_node_start_byte(n));
  };
  const auto span = [](TSNode n) {
    return std::pair<int, int>{static_cast<int>(ts_node_start_point(n).row) + 1,
                               static_cast<int>(ts_node_end_point(n).row) + 1};
  };
  std::optional<std::pair<int, int>> module_level, method;
  // Walks a module or class body; `cls` is the enclosing class ("" at module level).
  std::function<void(TSNode, const std::string&)> visit = [&](TSNode body, const std::string& cls) {
    for_each_named_child(body, [&](TSNode child) {
      const std::string_view type = ts_node_type(child);
      TSNode def = child;
      if (type == "decorated_definition") def = ts_node_child_by_field_name(child, "definition", 10);
      if (ts_node_is_null(def)) return;
      const std::string_view def_type = ts_node_type(def);
      TSNode name = ts_node_child_by_field_name(def, "name", 4);
      if (def_type == "function_definition" && !ts_node_is_null(name) && text(name) == function) {
        if (cls.empty() && !module_level) module_level = span(child);
        if (!cls.empty() && !method && (class_name.empty() || cls == class_name)) method = span(child);
      } else if (def_type == "class_definition" && !ts_node_is_null(name)) {
        TSNode inner = ts_node_child_by_field_name(def, "body", 4);
        if (!ts_node_is_null(inner)) visit(inner, std::string(text(name)));
      }
    });
  };
  visit(ts_tree_root_node(tree), "");
  if (!class_name.empty()) return method;
  return module_level ? module_level : method;
}

CodeStructure analyze_python(std::string_view source) { return PythonParser(1).analyze(source); }

}  // namespace spark
