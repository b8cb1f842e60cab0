// The structure of one test file, whatever its language: the language-neutral layer the localizer, the ranker and
// the evaluation read (they never look at a syntax tree).
//
// Every line of the file (1-based, the file's own numbering) maps to the units the paper localizes at: its AST
// statement, its CFG basic block (per function, split at control flow), its function (methods, nested functions,
// lambdas and test callbacks included; lines outside every function belong to the pseudo-function 0) and the file.
// Unit ids are the first line of the unit, so they read as locations. Blank lines map to no unit (0). A file with
// syntax errors still maps: lines the parser could not place become statements and blocks of their own.
//
// One implementation per language, chosen by the file's extension and else by the case's `language` field
// (language_for): Python (python_structure.h), Java, JavaScript and TypeScript (brace_structure.h), all from
// tree-sitter grammars pinned by scripts/setup.sh (language ABI 14). A file of any other language gets the line-level
// fallback (analyze_lines): each line its own statement and block, no functions; the localizer says so in its notes.
//
// Thread safety: the functions are pure; a CodeStructure is a plain value.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

enum class Language : unsigned char { python, java, javascript, typescript, other };

// "python", "java", "javascript", "typescript", "other": the corpus format's `language` values.
std::string_view language_name(Language language);
// "Python", "Java", "JavaScript", "TypeScript", "plain text": for prompts and messages.
std::string_view language_display_name(Language language);
// The `language` field's value, case-insensitive ("js", "ts" accepted); nullopt for a language spark has no
// structure for.
std::optional<Language> parse_language(std::string_view name);
// By extension: .py/.pyi, .java, .js/.mjs/.cjs/.jsx, .ts/.mts/.cts/.tsx; nullopt for any other.
std::optional<Language> language_of_path(std::string_view path);
// The language of one file of a case: its extension when known, else the case's `language` field when spark knows
// it; else Language::other, except that a file without an extension in a case without a language is Python.
Language language_for(std::string_view path, std::string_view case_language);
// What starts a line comment: "#" for Python, "//" for Java, JavaScript and TypeScript, "#" for other.
std::string_view comment_prefix(Language language);

struct FunctionInfo {
  std::string name;        // JavaScript test callbacks: the test's title; anonymous functions: ""
  std::string class_name;  // enclosing classes (Java "Outer.Inner") or suites ("suite > inner"); "" at top
  int start = 0;           // first line, decorators and annotations included
  int end = 0;             // last line
  int def_line = 0;        // the `def` line, the line of a Java method's name, the line a callback starts on
  std::vector<std::string> params;
  std::vector<std::string> decorators;  // Python decorator text without '@'; Java annotation names; JS "test"
  std::set<std::string> calls;          // names it calls, nested functions included: f(), obj.f(), self.f()
  bool setup = false;  // set-up or tear-down code the framework runs around tests (@BeforeEach, beforeEach(...))
  // Set-up the framework runs: a pytest fixture (a decorator naming "fixture") or `setup`.
  bool is_fixture() const;
};

struct ClassInfo {
  std::string name;  // a class name; a JavaScript `describe` suite's title
  int start = 0;
  int end = 0;
};

struct CodeStructure {
  Language language = Language::python;
  int line_count = 0;
  bool has_syntax_errors = false;
  // Indexed by line - 1. 0 means "no unit" (blank line).
  std::vector<int> statement;
  std::vector<int> block;
  std::vector<int> function;  // def line of the innermost function, 0 outside functions
  // Statement kind: "assert", "assign", "assign_call", "call", "assert_call", "def", "class", "if", "for", "return",
  // "raise", "comment", "brace" (a line of closing brackets), ... Kinds name the same thing alike across languages;
  // the ranker's prior is still learned per language (kind_key).
  std::vector<std::string> kind;
  std::vector<FunctionInfo> functions;
  std::vector<ClassInfo> classes;

  // The innermost function containing `line`, or nullptr.
  const FunctionInfo* function_at(int line) const;
  // Statement span [first, last] of the statement containing `line`.
  std::pair<int, int> statement_span(int line) const;
};

// The key the ranker's kind prior is learned and read under: the kind itself for Python (models saved before other
// languages stay valid), "java:assign" and the like for the others.
std::string kind_key(Language language, std::string_view kind);

// The structure of `source` in `language`; `path` (optional) tells TSX from TypeScript. No incremental reparse (see
// StructureCache for that).
CodeStructure analyze_code(std::string_view source, Language language, std::string_view path = {});
// The line-level fallback for a language spark has no grammar for.
CodeStructure analyze_lines(std::string_view source, Language language = Language::other);

// What a language's walker hands to assemble_structure: one statement (or the header of a compound one).
struct StatementSpan {
  int first = 0;  // 1-based
  int last = 0;
  int depth = 0;  // nesting in compound statements
  bool header = false;
  std::string kind;
};
// Fills `out`'s per-line arrays from a walker's statements (`stmts`: parents before the statements nested in them;
// a line ends up with its innermost statement), comment rows and `out.functions`: statements, kinds, functions, and
// CFG basic blocks per function. `out.language`, `line_count` is set from `source`. Shared by every language, so a
// block means the same everywhere: it starts at a function's first statement, at a loop or clause header (for,
// while, do, elif, else, except, catch, finally, case), at the first statement of a branch or loop body, where the
// nesting depth falls (a join) and after return/raise/break/continue. Comments and closing-bracket lines join a
// neighbouring block.
void assemble_structure(std::string_view source, std::vector<StatementSpan> stmts, const std::vector<int>& comment_rows,
                        CodeStructure& out);

// Records called names for the walkers: a name called on a row goes to the innermost function holding that row and
// to every function around it (FunctionInfo::calls). Needs `s.function` filled (assemble_structure).
class CallRecorder {
 public:
  explicit CallRecorder(CodeStructure& s);
  void record(size_t row, const std::string& name);  // `row` 0-based

 private:
  CodeStructure& s_;
  std::vector<long> parent_;                    // each function's enclosing function, -1 for none
  std::vector<std::pair<int, size_t>> by_def_;  // def line → function, sorted
};

// Unit granularity names used by `--level`.
enum class Level { line, statement, block, function };
std::string_view level_name(Level level);
bool parse_level(std::string_view text, Level& out);
// Every level's name, finest first.
std::vector<std::string> level_names();
// The unit id of `line` at `level` (the line itself at line level).
int unit_of(const CodeStructure& s, Level level, int line);

}  // namespace spark
