#include "code/brace_structure.h"

#include <tree_sitter/api.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "base/text.h"
#include "code/tree_walk.h"

extern "C" const TSLanguage* tree_sitter_java(void);
extern "C" const TSLanguage* tree_sitter_javascript(void);
extern "C" const TSLanguage* tree_sitter_typescript(void);
extern "C" const TSLanguage* tree_sitter_tsx(void);

namespace spark {
namespace {

using TypeSet = std::unordered_set<std::string_view>;

// Statements that hold no others (their expressions are still searched for functions: lambdas, callbacks).
const TypeSet kSimple = {"expression_statement",    "local_variable_declaration",
                         "lexical_declaration",     "variable_declaration",
                         "return_statement",        "throw_statement",
                         "break_statement",         "continue_statement",
                         "yield_statement",         "assert_statement",
                         "empty_statement",         "debugger_statement",
                         "import_declaration",      "package_declaration",
                         "import_statement",        "field_declaration",
                         "constant_declaration",    "explicit_constructor_invocation",
                         "public_field_definition", "type_alias_declaration",
                         "ambient_declaration",     "abstract_method_signature",
                         "function_signature",      "method_signature",
                         "module_declaration",      "annotation_type_element_declaration",
                         "enum_constant",           "index_signature",
                         "property_signature"};

// Compound statements: a header, then statements nested one level deeper.
const TypeSet kCompound = {
    "if_statement",      "for_statement",  "enhanced_for_statement", "for_in_statement",
    "while_statement",   "do_statement",   "try_statement",          "try_with_resources_statement",
    "catch_clause",      "finally_clause", "switch_statement",       "switch_block_statement_group",
    "switch_rule",       "switch_case",    "switch_default",         "synchronized_statement",
    "labeled_statement", "else_clause",    "with_statement",         "static_initializer",
    "class_static_block"};

const TypeSet kFunction = {"method_declaration",   "constructor_declaration",        "compact_constructor_declaration",
                           "function_declaration", "generator_function_declaration", "method_definition"};

const TypeSet kFunctionExpression = {"lambda_expression", "arrow_function", "function_expression", "function",
                                     "generator_function"};

const TypeSet kClass = {"class_declaration",
                        "interface_declaration",
                        "enum_declaration",
                        "record_declaration",
                        "annotation_type_declaration",
                        "abstract_class_declaration",
                        "class"};

// Where a header ends: the first of these among a compound statement's children opens its body.
const TypeSet kBody = {
    "block",          "statement_block", "class_body",           "switch_block", "switch_body", "constructor_body",
    "interface_body", "enum_body",       "annotation_type_body", "record_body"};

// JUnit's (4 and 5) and TestNG's set-up and tear-down annotations.
const TypeSet kSetupAnnotations = {"BeforeEach", "BeforeAll",   "AfterEach",  "AfterAll",     "Before",
                                   "After",      "BeforeClass", "AfterClass", "BeforeMethod", "AfterMethod"};
// The test frameworks' global functions of JavaScript (Jest, Vitest, Mocha, Jasmine, node:test).
const TypeSet kSuiteCalls = {"describe", "suite", "context", "fdescribe", "xdescribe"};
const TypeSet kTestCalls = {"test", "it", "specify", "fit", "xit", "xtest"};
const TypeSet kHookCalls = {"beforeEach", "afterEach", "beforeAll", "afterAll", "before", "after"};

int row_of(TSNode n) { return static_cast<int>(ts_node_start_point(n).row) + 1; }
int end_row_of(TSNode n) { return static_cast<int>(ts_node_end_point(n).row) + 1; }

TSNode field(TSNode n, std::string_view name) {
  return ts_node_child_by_field_name(n, name.data(), static_cast<uint32_t>(name.size()));
}

std::string kind_from_type(std::string_view type) {
  if (type == "enhanced_for_statement" || type == "for_in_statement") return "for";
  if (type == "try_with_resources_statement") return "try";
  if (type == "switch_block_statement_group" || type == "switch_rule" || type == "switch_case" ||
      type == "switch_default")
    return "case";
  if (type == "throw_statement") return "raise";
  if (type == "import_declaration" || type == "import_statement") return "import";
  if (type == "package_declaration") return "package";
  if (type == "field_declaration" || type == "public_field_definition" || type == "constant_declaration")
    return "field";
  if (type == "static_initializer" || type == "class_static_block") return "static";
  std::string k(type);
  for (const std::string_view suffix : {"_statement", "_clause", "_declaration", "_expression"}) {
    if (k.size() > suffix.size() && std::string_view(k).ends_with(suffix)) {
      k.resize(k.size() - suffix.size());
      break;
    }
  }
  return k;
}

class BraceWalker {
 public:
  BraceWalker(std::string_view src, Language language, CodeStructure& out)
      : src_(src), language_(language), out_(out) {}

  std::vector<StatementSpan> stmts;
  std::vector<int> comments;

  void walk(TSNode node, int depth, const std::string& cls) {
    if (depth > kMaxNesting) return;
    const std::string_view type = ts_node_type(node);
    if (type == "comment" || type == "line_comment" || type == "block_comment") {
      for (int r = row_of(node); r <= end_row_of(node); ++r) comments.push_back(r);
      return;
    }
    if (!ts_node_is_named(node)) return;
    if (type == "ERROR") out_.has_syntax_errors = true;
    if (type == "export_statement" && !ts_node_is_null(field(node, "declaration"))) {
      for_each_child(node, [&](TSNode c) { walk(c, depth, cls); });
      return;
    }
    if (kFunction.contains(type)) {
      function(node, node, depth, cls, name_of(node), false);
      return;
    }
    if (kClass.contains(type)) {
      klass(node, depth, cls);
      return;
    }
    if (kSimple.contains(type)) {
      simple(node, depth, cls);
      return;
    }
    if (type == "if_statement") {
      if_statement(node, depth, cls, "if");
      return;
    }
    if (kCompound.contains(type)) {
      add(row_of(node), header_end(node), depth, true, kind_from_type(type));
      for_each_child(node, [&](TSNode c) { walk_nested(c, depth + 1, cls); });
      return;
    }
    // Containers (program, block, class body, switch body): their children at the same depth.
    for_each_child(node, [&](TSNode c) { walk(c, depth, cls); });
  }

 private:
  // A compound statement's children: statements and bodies are walked; its header's expressions (conditions,
  // resources) are searched for functions only.
  void walk_nested(TSNode c, int depth, const std::string& cls) {
    const std::string_view ct = ts_node_type(c);
    if (kBody.contains(ct) || kSimple.contains(ct) || kCompound.contains(ct) || kClass.contains(ct) ||
        ct == "if_statement" || ct == "comment" || ct == "line_comment" || ct == "block_comment" || ct == "ERROR")
      walk(c, depth, cls);
    else if (ts_node_is_named(c))
      find_functions(c, depth, cls, "");
  }

  // `if` with its `else` as a clause; an `else if` is a clause of the same chain ("elif"), as in Python.
  void if_statement(TSNode node, int depth, const std::string& cls, std::string kind) {
    add(row_of(node), header_end(node), depth, true, std::move(kind));
    for_each_child(node, [&](TSNode c) {
      const std::string_view ct = ts_node_type(c);
      if (ct == "else") {  // Java: the keyword, then the alternative statement
        return;
      }
      if (ct == "else_clause") {  // JavaScript/TypeScript
        else_branch(c, depth + 1, cls);
        return;
      }
      if (ts_node_eq(c, field(node, "alternative"))) {
        else_keyword_then(c, depth + 1, cls);
        return;
      }
      walk_nested(c, depth + 1, cls);
    });
  }

  // Java's `else` (the keyword's line) and the statement after it.
  void else_keyword_then(TSNode alternative, int depth, const std::string& cls) {
    if (std::string_view(ts_node_type(alternative)) == "if_statement") {
      if_statement(alternative, depth, cls, "elif");
      return;
    }
    const int r = row_of(alternative);
    add(r, r, depth, true, "else");
    walk_nested(alternative, depth + 1, cls);
  }

  void else_branch(TSNode clause, int depth, const std::string& cls) {
    TSNode inner = ts_node_named_child_count(clause) > 0 ? ts_node_named_child(clause, 0) : TSNode{};
    if (!ts_node_is_null(inner) && std::string_view(ts_node_type(inner)) == "if_statement" &&
        row_of(inner) == row_of(clause)) {
      if_statement(inner, depth, cls, "elif");
      return;
    }
    add(row_of(clause), header_end(clause), depth, true, "else");
    for_each_child(clause, [&](TSNode c) { walk_nested(c, depth + 1, cls); });
  }

  void simple(TSNode node, int depth, const std::string& cls) {
    const std::string_view type = ts_node_type(node);
    if (language_ != Language::java && type == "expression_statement" && test_framework_call(node, depth, cls)) return;
    add(row_of(node), end_row_of(node), depth, false, statement_kind(node));
    find_functions(node, depth + 1, cls, declared_name(node));
  }

  // Functions inside an expression (lambdas, callbacks, anonymous classes), found without recursion: minified code
  // nests expressions thousands deep.
  void find_functions(TSNode root, int depth, const std::string& cls, const std::string& name) {
    if (depth > kMaxNesting) return;
    TSTreeCursor cursor = ts_tree_cursor_new(root);
    for (;;) {
      const TSNode n = ts_tree_cursor_current_node(&cursor);
      const std::string_view t = ts_node_type(n);
      bool descend = true;
      if (kFunctionExpression.contains(t)) {
        function(n, n, depth, cls, name, false);
        descend = false;
      } else if (kClass.contains(t) || t == "class_body") {
        if (t == "class_body")
          for_each_child(n, [&](TSNode c) { walk(c, depth, cls); });
        else
          klass(n, depth, cls);
        descend = false;
      } else if (t == "ERROR") {
        out_.has_syntax_errors = true;
      }
      if (descend && ts_tree_cursor_goto_first_child(&cursor)) continue;
      bool done = false;
      while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
        if (!ts_tree_cursor_goto_parent(&cursor) || ts_node_eq(ts_tree_cursor_current_node(&cursor), root)) {
          done = true;
          break;
        }
      }
      if (done) break;
    }
    ts_tree_cursor_delete(&cursor);
  }

  // describe/test/it/hooks: a suite, a test, a set-up function. False when `stmt` is not such a call.
  bool test_framework_call(TSNode stmt, int depth, const std::string& cls) {
    TSNode call = ts_node_named_child_count(stmt) > 0 ? ts_node_named_child(stmt, 0) : TSNode{};
    if (!ts_node_is_null(call) && std::string_view(ts_node_type(call)) == "await_expression" &&
        ts_node_named_child_count(call) > 0)
      call = ts_node_named_child(call, 0);
    if (ts_node_is_null(call) || std::string_view(ts_node_type(call)) != "call_expression") return false;
    const std::string base = callee_base(field(call, "function"));
    const bool suite = kSuiteCalls.contains(base), test = kTestCalls.contains(base), hook = kHookCalls.contains(base);
    if (!suite && !test && !hook) return false;
    TSNode args = field(call, "arguments");
    if (ts_node_is_null(args)) return false;
    std::string title;
    TSNode body{};
    for_each_child(args, [&](TSNode a) {
      const std::string_view at = ts_node_type(a);
      if (title.empty() && (at == "string" || at == "template_string")) title = string_value(a);
      if (kFunctionExpression.contains(at)) body = a;
    });
    if (ts_node_is_null(body) || ((suite || test) && title.empty())) return false;
    const int first = row_of(stmt);
    TSNode block = field(body, "body");
    const int header_last = ts_node_is_null(block) ? first : std::max(first, row_of(block));
    if (suite) {
      const std::string inner = cls.empty() ? title : cls + " > " + title;
      out_.classes.push_back({title, first, end_row_of(stmt)});
      add(first, header_last, depth, true, "class");
      walk_function_body(body, depth + 1, inner);
      return true;
    }
    FunctionInfo info;
    info.name = test ? title : base;
    info.class_name = cls;
    info.start = first;
    info.end = end_row_of(stmt);
    info.def_line = first;
    info.setup = hook;
    if (test) info.decorators.push_back("test");
    params_of(body, info.params);
    out_.functions.push_back(std::move(info));
    add(first, header_last, depth, true, "def");
    walk_function_body(body, depth + 1, cls);
    return true;
  }

  void walk_function_body(TSNode fn, int depth, const std::string& cls) {
    TSNode body = field(fn, "body");
    if (ts_node_is_null(body)) return;
    const std::string_view bt = ts_node_type(body);
    if (kBody.contains(bt)) {
      for_each_child(body, [&](TSNode c) { walk(c, depth, cls); });
    } else {  // an expression body (`x => x + 1`): one statement
      add(row_of(body), end_row_of(body), depth, false, "return");
      find_functions(body, depth + 1, cls, "");
    }
  }

  // A function: `outer` spans annotations and decorators, `def` is the declaration or the function expression.
  void function(TSNode def, TSNode outer, int depth, const std::string& cls, std::string name, bool setup) {
    FunctionInfo info;
    info.name = std::move(name);
    info.class_name = cls;
    info.start = row_of(outer);
    info.end = end_row_of(outer);
    const std::string_view type = ts_node_type(def);
    TSNode name_node = field(def, "name");
    info.def_line = kFunctionExpression.contains(type) || ts_node_is_null(name_node) ? row_of(def) : row_of(name_node);
    info.setup = setup;
    const int header_first =
        kFunctionExpression.contains(type) ? row_of(def) : std::min(info.def_line, declaration_row(def));
    // Annotations and decorators: statements of their own, and the function's decorators.
    for_each_child(def, [&](TSNode c) {
      const std::string_view ct = ts_node_type(c);
      if (ct == "modifiers") {
        for_each_child(c, [&](TSNode m) {
          const std::string_view mt = ts_node_type(m);
          if (mt == "marker_annotation" || mt == "annotation") annotation(m, depth, info);
        });
      } else if (ct == "decorator") {
        annotation(c, depth, info);
      }
    });
    if (type == "constructor_declaration" || type == "compact_constructor_declaration")
      info.decorators.push_back("constructor");
    TSNode body = field(def, "body");
    const int header_last = ts_node_is_null(body) ? end_row_of(def) : std::max(header_first, row_of(body));
    params_of(def, info.params);
    out_.functions.push_back(std::move(info));
    if (!kFunctionExpression.contains(type)) add(header_first, header_last, depth, true, "def");
    walk_function_body(def, depth + 1, cls);
  }

  // The first row of a declaration after its annotations (`@Test` on its own line, then `void f() {`).
  int declaration_row(TSNode def) {
    int row = std::numeric_limits<int>::max();
    for_each_child(def, [&](TSNode c) {
      const std::string_view ct = ts_node_type(c);
      if (ct == "modifiers") {
        for_each_child(c, [&](TSNode m) {
          const std::string_view mt = ts_node_type(m);
          if (mt != "marker_annotation" && mt != "annotation" && mt != "line_comment" && mt != "block_comment")
            row = std::min(row, row_of(m));
        });
      } else if (ct != "decorator" && ct != "comment" && ct != "line_comment" && ct != "block_comment") {
        row = std::min(row, row_of(c));
      }
    });
    return row == std::numeric_limits<int>::max() ? row_of(def) : row;
  }

  void annotation(TSNode a, int depth, FunctionInfo& info) {
    TSNode n = field(a, "name");
    std::string name = ts_node_is_null(n) ? trim_copy(text(a)) : text(n);
    if (name.starts_with("@")) name.erase(0, 1);
    const auto dot = name.rfind('.');
    const std::string simple = dot == std::string::npos ? name : name.substr(dot + 1);
    if (kSetupAnnotations.contains(simple)) info.setup = true;
    info.decorators.push_back(name);
    add(row_of(a), end_row_of(a), depth, false, "decorator");
  }

  void klass(TSNode node, int depth, const std::string& cls) {
    TSNode n = field(node, "name");
    const std::string name = ts_node_is_null(n) ? "" : text(n);
    const std::string inner = name.empty() ? cls : cls.empty() ? name : cls + "." + name;
    out_.classes.push_back({name, row_of(node), end_row_of(node)});
    TSNode body = field(node, "body");
    const int first = std::min(declaration_row(node), ts_node_is_null(n) ? row_of(node) : row_of(n));
    add(first, ts_node_is_null(body) ? end_row_of(node) : std::max(first, row_of(body)), depth, true, "class");
    for_each_child(node, [&](TSNode c) {
      const std::string_view ct = ts_node_type(c);
      if (ct == "modifiers")
        for_each_child(c, [&](TSNode m) {
          const std::string_view mt = ts_node_type(m);
          if (mt == "marker_annotation" || mt == "annotation") add(row_of(m), end_row_of(m), depth, false, "decorator");
        });
      else if (ct == "decorator")
        add(row_of(c), end_row_of(c), depth, false, "decorator");
    });
    if (!ts_node_is_null(body)) for_each_child(body, [&](TSNode c) { walk(c, depth + 1, inner); });
  }

  // The header of a compound statement ends where its body opens: the row of its first block child, or the row
  // before its first nested statement when that starts on a later row.
  int header_end(TSNode node) {
    const int first = row_of(node);
    int last = first;
    bool stop = false;
    for_each_child(node, [&](TSNode c) {
      if (stop) return;
      const std::string_view ct = ts_node_type(c);
      if (kBody.contains(ct)) {
        last = std::max(last, row_of(c));
        stop = true;
      } else if (kSimple.contains(ct) || kCompound.contains(ct) || ct == "if_statement" || ct == "else_clause" ||
                 ct == "else" || ct == "comment" || ct == "line_comment" || ct == "block_comment") {
        last = std::max(last, row_of(c) > first ? row_of(c) - 1 : first);
        stop = true;
      } else {
        last = std::max(last, end_row_of(c));
      }
    });
    return last;
  }

  std::string statement_kind(TSNode node) {
    const std::string_view type = ts_node_type(node);
    if (type == "local_variable_declaration" || type == "lexical_declaration" || type == "variable_declaration") {
      bool any_value = false, call = false;
      for_each_child(node, [&](TSNode d) {
        if (std::string_view(ts_node_type(d)) != "variable_declarator") return;
        TSNode v = field(d, "value");
        if (ts_node_is_null(v)) return;
        any_value = true;
        call = call || is_call(v);
      });
      return !any_value ? "declaration" : call ? "assign_call" : "assign";
    }
    if (type != "expression_statement") return kind_from_type(type);
    TSNode e = ts_node_named_child_count(node) > 0 ? ts_node_named_child(node, 0) : TSNode{};
    if (ts_node_is_null(e)) return "expression";
    if (std::string_view(ts_node_type(e)) == "await_expression" && ts_node_named_child_count(e) > 0)
      e = ts_node_named_child(e, 0);
    const std::string_view et = ts_node_type(e);
    if (et == "assignment_expression" || et == "augmented_assignment_expression") {
      TSNode right = field(e, "right");
      return !ts_node_is_null(right) && is_call(right) ? "assign_call" : "assign";
    }
    if (et == "update_expression") return "assign";
    if (et == "method_invocation" || et == "call_expression") {
      const std::string callee = text_until_arguments(e);
      if (callee.find("assert") != std::string::npos || callee.find("expect") != std::string::npos ||
          callee.find("should") != std::string::npos)
        return "assert_call";
      return "call";
    }
    if (et == "string") return "docstring";
    return "expression";
  }

  static bool is_call(TSNode v) {
    std::string_view t = ts_node_type(v);
    if (t == "await_expression" && ts_node_named_child_count(v) > 0) t = ts_node_type(ts_node_named_child(v, 0));
    return t == "method_invocation" || t == "call_expression" || t == "object_creation_expression" ||
           t == "new_expression";
  }

  // The callee's text of a call, without its arguments (`assertEquals`, `expect(x).toBe`).
  std::string text_until_arguments(TSNode call) {
    TSNode args = field(call, "arguments");
    const uint32_t begin = ts_node_start_byte(call);
    const uint32_t end = ts_node_is_null(args) ? ts_node_end_byte(call) : ts_node_start_byte(args);
    return std::string(src_.substr(begin, std::min<size_t>(end - begin, 4096)));
  }

  // The framework name of a callee: `test` in test(...), test.only(...), test.each(table)(...); `describe` in
  // test.describe(...) (node:test's module object).
  std::string callee_base(TSNode f) {
    for (int guard = 0; guard < 16 && !ts_node_is_null(f); ++guard) {
      const std::string_view t = ts_node_type(f);
      if (t == "identifier") return text(f);
      if (t == "member_expression") {  // test.only(...), but node:test's test.describe(...) and t.test(...)
        TSNode p = field(f, "property");
        std::string prop = ts_node_is_null(p) ? "" : text(p);
        if (kSuiteCalls.contains(prop) || kTestCalls.contains(prop) || kHookCalls.contains(prop)) return prop;
        f = field(f, "object");
      } else if (t == "call_expression")
        f = field(f, "function");
      else
        return "";
    }
    return "";
  }

  std::string string_value(TSNode s) {
    std::string t = text(s);
    if (t.size() >= 2) t = t.substr(1, t.size() - 2);
    return t;
  }

  // The name a declaration gives a function expression in it (`const helper = () => …`).
  std::string declared_name(TSNode stmt) {
    std::string name;
    for_each_child(stmt, [&](TSNode d) {
      if (!name.empty() || std::string_view(ts_node_type(d)) != "variable_declarator") return;
      TSNode v = field(d, "value");
      TSNode n = field(d, "name");
      if (!ts_node_is_null(v) && !ts_node_is_null(n) && kFunctionExpression.contains(ts_node_type(v))) name = text(n);
    });
    return name;
  }

  std::string name_of(TSNode def) {
    TSNode n = field(def, "name");
    return ts_node_is_null(n) ? "" : text(n);
  }

  void params_of(TSNode fn, std::vector<std::string>& out) {
    TSNode params = field(fn, "parameters");
    if (ts_node_is_null(params)) params = field(fn, "parameter");
    if (ts_node_is_null(params)) return;
    if (std::string_view(ts_node_type(params)) == "identifier") {
      out.push_back(text(params));
      return;
    }
    for_each_child(params, [&](TSNode p) {
      const std::string_view pt = ts_node_type(p);
      if (pt == "identifier") {
        out.push_back(text(p));
        return;
      }
      TSNode n = field(p, "name");
      if (ts_node_is_null(n)) n = field(p, "pattern");
      if (ts_node_is_null(n)) n = field(p, "left");
      if (!ts_node_is_null(n) && std::string_view(ts_node_type(n)) == "identifier") out.push_back(text(n));
    });
  }

  void add(int first, int last, int depth, bool header, std::string kind) {
    stmts.push_back({first, std::max(first, last), depth, header, std::move(kind)});
  }

  std::string text(TSNode n) const {
    return std::string(src_.substr(ts_node_start_byte(n), ts_node_end_byte(n) - ts_node_start_byte(n)));
  }
  static std::string trim_copy(const std::string& s) { return std::string(trim(s)); }

  std::string_view src_;
  Language language_;
  CodeStructure& out_;
};

// Called names per function (Java method invocations, JavaScript calls by name or property): one pass.
void collect_brace_calls(std::string_view src, const TSTree* tree, CodeStructure& out) {
  if (out.functions.empty()) return;
  CallRecorder calls(out);
  const auto record = [&](TSNode n) {
    if (ts_node_is_null(n)) return;
    calls.record(ts_node_start_point(n).row,
                 std::string(src.substr(ts_node_start_byte(n), ts_node_end_byte(n) - ts_node_start_byte(n))));
  };
  for_each_node(ts_tree_root_node(tree), [&](TSNode node) {
    const std::string_view t = ts_node_type(node);
    if (t == "method_invocation") {
      record(field(node, "name"));
    } else if (t == "call_expression") {
      TSNode fn = field(node, "function");
      if (ts_node_is_null(fn)) return;
      const std::string_view ft = ts_node_type(fn);
      if (ft == "identifier")
        record(fn);
      else if (ft == "member_expression")
        record(field(fn, "property"));
    }
  });
}

const TSLanguage* grammar(Language language, bool tsx) {
  switch (language) {
    case Language::java:
      return tree_sitter_java();
    case Language::javascript:
      return tree_sitter_javascript();
    case Language::typescript:
      return tsx ? tree_sitter_tsx() : tree_sitter_typescript();
    default:
      return nullptr;
  }
}

}  // namespace

CodeStructure analyze_brace(std::string_view source, Language language, bool tsx) {
  CodeStructure out;
  out.language = language;
  const TSLanguage* lang = grammar(language, tsx);
  std::unique_ptr<TSParser, TsParserDeleter> parser{ts_parser_new()};
  std::unique_ptr<TSTree, TsTreeDeleter> tree;
  if (lang && ts_parser_set_language(parser.get(), lang) && source.size() <= std::numeric_limits<uint32_t>::max())
    tree.reset(ts_parser_parse_string(parser.get(), nullptr, source.data(), static_cast<uint32_t>(source.size())));
  BraceWalker walker(source, language, out);
  if (tree) {
    const TSNode root = ts_tree_root_node(tree.get());
    if (ts_node_has_error(root)) out.has_syntax_errors = true;
    walker.walk(root, 0, "");
  } else {
    out.has_syntax_errors = true;
  }
  assemble_structure(source, std::move(walker.stmts), walker.comments, out);
  if (tree) collect_brace_calls(source, tree.get(), out);
  return out;
}

}  // namespace spark
