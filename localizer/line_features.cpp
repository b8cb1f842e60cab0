#include "localizer/line_features.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "code/structure_cache.h"
#include "formats/junit.h"
#include "localizer/data_flow.h"

namespace spark {

using json = nlohmann::json;

std::string_view feature_name(size_t f) {
  static constexpr std::array<std::string_view, kFeatureCount> names = {"bias",
                                                                        "annotated",
                                                                        "resembles",
                                                                        "traceback_line",
                                                                        "traceback_frame",
                                                                        "not_reached",
                                                                        "near_failure",
                                                                        "own_body",
                                                                        "support",
                                                                        "module_level",
                                                                        "kind_prior",
                                                                        "error_overlap",
                                                                        "slice",
                                                                        "value_match",
                                                                        "name_match",
                                                                        "gate",
                                                                        "named_line",
                                                                        "same_test",
                                                                        "outside_test",
                                                                        "resembles_fix",
                                                                        "changed_since_pass",
                                                                        "uses_product_change"};
  return f < names.size() ? names[f] : "?";
}

std::string_view gate_feature_name(size_t f) {
  static constexpr std::array<std::string_view, kGateCount> names = {
      "bias",        "assertion",      "type_error",      "name_error",        "lookup_error",
      "value_error", "raised_in_test", "stop_value",      "other_value",       "stop_name",
      "other_name",  "stop_annotated", "other_annotated", "stop_is_assertion", "generic_check"};
  return f < names.size() ? names[f] : "?";
}

namespace {

size_t indentation(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i;
}

// The 1-based line span of `def function(` in `lines` (its decorators excluded, its body up to the next line indented
// no deeper than the `def`), or {0, 0} when there is no such definition. The first definition wins.
std::pair<int, int> function_span_by_text(const std::vector<std::string_view>& lines, const std::string& function) {
  if (function.empty()) return {0, 0};
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto t = trim(lines[i]);
    const std::string_view rest = t.starts_with("def ") ? t.substr(4) : t.starts_with("async def ") ? t.substr(10) : "";
    if (!rest.starts_with(function) || rest.size() <= function.size() ||
        (rest[function.size()] != '(' && rest[function.size()] != ' '))
      continue;
    const size_t indent = indentation(lines[i]);
    size_t end = i;
    for (size_t j = i + 1; j < lines.size(); ++j) {
      if (is_blank(lines[j])) continue;
      if (indentation(lines[j]) <= indent) break;
      end = j;
    }
    return {static_cast<int>(i) + 1, static_cast<int>(end) + 1};
  }
  return {0, 0};
}

// The same for Java, JavaScript and TypeScript, by brackets: the first line naming `function` as a method
// (`function(`) or as a test's title (`test('function'`, `it("function"`), to the line where the brackets opened
// on or after it close again. Strings and comments are not told apart: a heuristic, like the Python one.
std::pair<int, int> braced_span_by_text(const std::vector<std::string_view>& lines, const std::string& function) {
  if (function.empty()) return {0, 0};
  const std::string call = function + "(";
  const std::string titles[] = {"'" + function + "'", "\"" + function + "\"", "`" + function + "`"};
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view t = lines[i];
    size_t at = t.find(call);
    const bool method =
        at != std::string_view::npos &&
        (at == 0 || !(std::isalnum(static_cast<unsigned char>(t[at - 1])) || t[at - 1] == '_' || t[at - 1] == '.'));
    const bool title = std::any_of(std::begin(titles), std::end(titles),
                                   [&](const std::string& q) { return t.find(q) != std::string_view::npos; });
    if (!method && !title) continue;
    int depth = 0;
    bool opened = false;
    for (size_t j = i; j < lines.size(); ++j) {
      for (char ch : lines[j]) {
        if (ch == '{') {
          ++depth;
          opened = true;
        } else if (ch == '}') {
          --depth;
        }
      }
      if (opened && depth <= 0) return {static_cast<int>(i) + 1, static_cast<int>(j) + 1};
      if (!opened && j > i + 3) break;  // a call of the function, not its definition
    }
  }
  return {0, 0};
}

}  // namespace

namespace {

// A label's lines, for case_label and stored_case_label alike.
std::optional<CaseLabel> label_of(CaseLabel label, const std::string& language, const std::vector<LineRef>& faulty,
                                  const LinesOf& lines_of) {
  for (const auto& fl : faulty) {
    const std::vector<std::string_view>* lines = lines_of(fl.path);
    if (!lines || fl.line < 1 || static_cast<size_t>(fl.line) > lines->size()) return std::nullopt;
    const Language lang = language_for(fl.path, language);
    const std::string function = parse_test_id(label.test_id, lang).function;
    CaseLabel::Line line{fl, std::string((*lines)[static_cast<size_t>(fl.line - 1)]), false, {}};
    const auto [first, last] =
        lang == Language::python ? function_span_by_text(*lines, function) : braced_span_by_text(*lines, function);
    line.outside_test = first > 0 && (fl.line < first || fl.line > last);
    // A fix of a few lines is the line's replacement; a hunk rewritten whole (a file, 10,000 lines) is no
    // counterpart of one line, and comparing every query line with it would cost its size per line.
    constexpr size_t kFixLines = 5;
    if (auto fix = label.fixes.find(fl); fix != label.fixes.end() && fix->second.size() <= kFixLines)
      for (const auto& text : fix->second)
        if (!is_blank(text)) line.fixed.push_back(text);
    label.lines.push_back(std::move(line));
  }
  return label;
}

}  // namespace

CaseLabel case_label(const Case& c) {
  std::map<std::string, std::vector<std::string_view>> split;
  const LinesOf lines_of = [&](const std::string& path) -> const std::vector<std::string_view>* {
    const SourceFile* f = c.file(path);
    if (!f) return nullptr;
    auto [at, added] = split.try_emplace(path);
    if (added) at->second = split_lines(f->content);
    return &at->second;
  };
  auto label = label_of({c.id, c.test_id, c.project, c.faulty_commit, c.fixed_commit, {}, c.fixes}, c.language,
                        c.faulty_lines, lines_of);
  return label ? std::move(*label)
               : CaseLabel{c.id, c.test_id, c.project, c.faulty_commit, c.fixed_commit, {}, c.fixes};
}

std::optional<CaseLabel> stored_case_label(std::string_view record, const LinesOf& lines_of) {
  const json r = json::parse(record, nullptr, false);
  if (!r.is_object()) return std::nullopt;
  try {
    CaseLabel label;
    label.id = r.at("id").get<std::string>();
    label.project = r.at("project").get<std::string>();
    label.test_id = r.at("test_id").get<std::string>();
    // As case_from_json reads it.
    if (label.test_id.size() > kTestIdLimit) label.test_id = bounded_test_id(label.test_id);
    const std::string language = r.at("language").get<std::string>();
    for (auto [field, key] : {std::pair{&label.faulty_commit, "faulty_commit"}, {&label.fixed_commit, "fixed_commit"}})
      if (auto it = r.find(key); it != r.end() && !it->is_null()) *field = it->get<std::string>();
    std::vector<LineRef> faulty;
    if (auto it = r.find("faulty_lines"); it != r.end() && it->is_array())
      for (const auto& fl : *it) {
        LineRef at{fl.at("path").get<std::string>(), fl.at("line").get<int>()};
        if (auto fix = fl.find("fix"); fix != fl.end() && !fix->is_null())
          label.fixes[at] = fix->get<std::vector<std::string>>();
        faulty.push_back(std::move(at));
      }
    if (faulty.empty()) return std::nullopt;
    return label_of(std::move(label), language, faulty, lines_of);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string label_to_json(const CaseLabel& label) {
  json j = {{"id", label.id}, {"test_id", label.test_id}, {"project", label.project}};
  if (label.faulty_commit) j["faulty_commit"] = *label.faulty_commit;
  if (label.fixed_commit) j["fixed_commit"] = *label.fixed_commit;
  json lines = json::array();
  for (const auto& l : label.lines)
    lines.push_back({{"path", l.at.path},
                     {"line", l.at.line},
                     {"text", l.text},
                     {"outside_test", l.outside_test},
                     {"fixed", l.fixed}});
  j["lines"] = std::move(lines);
  json fixes = json::array();
  for (const auto& [at, replacement] : label.fixes)
    fixes.push_back({{"path", at.path}, {"line", at.line}, {"lines", replacement}});
  j["fixes"] = std::move(fixes);
  return json_text(j);
}

Result<CaseLabel> label_from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    CaseLabel label;
    label.id = j.at("id").get<std::string>();
    label.test_id = j.at("test_id").get<std::string>();
    label.project = j.at("project").get<std::string>();
    if (j.contains("faulty_commit")) label.faulty_commit = j["faulty_commit"].get<std::string>();
    if (j.contains("fixed_commit")) label.fixed_commit = j["fixed_commit"].get<std::string>();
    for (const auto& l : j.at("lines"))
      label.lines.push_back({{l.at("path").get<std::string>(), l.at("line").get<int>()},
                             l.at("text").get<std::string>(),
                             l.at("outside_test").get<bool>(),
                             l.at("fixed").get<std::vector<std::string>>()});
    for (const auto& f : j.at("fixes"))
      label.fixes[{f.at("path").get<std::string>(), f.at("line").get<int>()}] =
          f.at("lines").get<std::vector<std::string>>();
    return label;
  } catch (const json::exception& e) {
    return fail(std::string("not a case label: ") + e.what());
  }
}

void append_faulty_lines(const CaseLabel& label, size_t case_index, std::vector<RetrievedFaultyLine>& out) {
  for (const auto& l : label.lines) {
    out.push_back({case_index, l.at.path, l.at.line, l.text, PreparedLine(l.text), label.test_id, l.outside_test, {}});
    for (const auto& text : l.fixed) out.back().fixed.emplace_back(text);
  }
}

void append_faulty_lines(const Case& c, size_t case_index, std::vector<RetrievedFaultyLine>& out) {
  append_faulty_lines(case_label(c), case_index, out);
}

double KindPrior::get(const std::string& kind) const {
  auto it = llr.find(kind);
  return it == llr.end() ? 0.0 : it->second;
}

namespace {

// A Python test's conftest.py files among the query's: the fixtures it asks for (through other fixtures), autouse
// fixtures and pytest's hooks are its set-up (`support`), the module-level code `module`, the other fixtures other
// tests' (`outside`), as conftest_reach says. Left alone when the test's own file or function is not found.
void scope_conftests(QueryView& v) {
  const QueryView::File* own = nullptr;
  std::vector<QueryView::File*> conftests;
  for (auto& f : v.files) {
    if (f.structure->language != Language::python) continue;
    if (f.scope.found && !own)
      own = &f;
    else if (std::filesystem::path(f.source->path).filename() == "conftest.py")
      conftests.push_back(&f);
  }
  if (!own || conftests.empty()) return;
  std::vector<CodeFile> views;
  views.reserve(conftests.size());
  for (const auto* c : conftests) views.push_back({c->source->path, c->source->content});
  const auto reach = conftest_reach(v.test_id, {own->source->path, own->source->content}, views);
  if (!reach) return;
  for (auto* c : conftests) {
    const auto it = reach->find(c->source->path);
    if (it == reach->end()) continue;
    const CodeStructure& s = *c->structure;
    c->scope.found = true;
    c->scope.role.assign(static_cast<size_t>(s.line_count), ScopeRole::outside);
    for (int l = 1; l <= s.line_count; ++l) {
      const auto li = static_cast<size_t>(l - 1);
      c->scope.role[li] = s.function[li] == 0      ? ScopeRole::module
                          : it->second.contains(l) ? ScopeRole::support
                                                   : ScopeRole::outside;
    }
  }
}

// A Python test's other test modules among the query's (helpers it imports, a module its traceback passes through):
// the functions the test reaches by name, from its own function, its set-up and the fixtures it reaches (then from
// those functions, in the module), are its `support`, the module-level code `module`, the other functions other
// tests' (`outside`). Left alone when the test's own function is not found.
void scope_helpers(QueryView& v) {
  const QueryView::File* own = nullptr;
  std::vector<QueryView::File*> helpers;
  for (auto& f : v.files) {
    if (f.structure->language != Language::python) continue;
    if (f.scope.found && f.scope.function_end > 0 && !own)
      own = &f;
    else if (!f.scope.found)
      helpers.push_back(&f);
  }
  if (!own || helpers.empty()) return;
  std::set<std::string> wanted;
  for (const auto& f : v.files)  // the own file's and the conftest files' reached functions
    if (f.scope.found)
      for (const auto& fn : f.structure->functions)
        if (fn.def_line >= 1 && static_cast<size_t>(fn.def_line) <= f.scope.role.size() &&
            f.scope.role[static_cast<size_t>(fn.def_line - 1)] >= ScopeRole::support)
          wanted.insert(fn.calls.begin(), fn.calls.end());
  for (auto* h : helpers) {
    const CodeStructure& s = *h->structure;
    std::set<const FunctionInfo*> reached;
    std::set<std::string> names = wanted;
    for (size_t before = SIZE_MAX; reached.size() != before;) {
      before = reached.size();
      for (const auto& fn : s.functions)
        if ((names.contains(fn.name) || names.contains(fn.class_name)) && reached.insert(&fn).second)
          names.insert(fn.calls.begin(), fn.calls.end());
    }
    h->scope.found = true;
    h->scope.role.assign(static_cast<size_t>(s.line_count), ScopeRole::module);
    for (const auto& fn : s.functions)
      for (int l = fn.start; l <= fn.end && l <= s.line_count; ++l)
        if (h->scope.role[static_cast<size_t>(l - 1)] != ScopeRole::support)
          h->scope.role[static_cast<size_t>(l - 1)] = reached.contains(&fn) ? ScopeRole::support : ScopeRole::outside;
  }
}

}  // namespace

QueryView make_query_view(const Case& query, StructureCache& cache) {
  QueryView v;
  v.test_id = query.test_id;
  if (query.change) v.change = &*query.change;
  for (const auto& f : query.files) {
    QueryView::File file;
    file.source = &f;
    file.lines = split_lines(f.content);
    file.structure = cache.get(f.content, f.path, query.language);
    file.scope = estimate_scope(*file.structure, query.test_id, f.content);
    v.files.push_back(std::move(file));
  }
  scope_conftests(v);
  scope_helpers(v);
  // When the test's function is in none of the files, nothing can be preferred by scope: all `module`.
  v.failure = failure_text(query.error_message);
  v.frames = parse_traceback(v.failure);
  for (const auto& fr : v.frames)
    for (size_t i = 0; i < v.files.size(); ++i)
      if (same_file(fr.path, v.files[i].source->path) && fr.line <= static_cast<int>(v.files[i].lines.size())) {
        v.stop_file = static_cast<int>(i);  // frames are outermost first: the last one in a test file wins
        v.stop_line = fr.line;
      }
  size_t all_lines = 0;
  for (const auto& file : v.files) all_lines += file.lines.size();
  v.lines.reserve(all_lines);  // a QueryLine holds its features: no reallocation while they are added
  for (size_t i = 0; i < v.files.size(); ++i)
    for (size_t l = 0; l < v.files[i].lines.size(); ++l)
      if (!is_blank(v.files[i].lines[l]))
        v.lines.push_back({i, static_cast<int>(l) + 1, v.files[i].lines[l], {}, -1, 1.0});
  return v;
}

namespace {

bool word_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

const std::unordered_set<std::string_view>& python_keywords() {
  static const std::unordered_set<std::string_view> k = {
      "False",    "None",   "True",  "and",  "as",     "assert",   "async",   "await", "break", "class",
      "continue", "def",    "del",   "elif", "else",   "except",   "finally", "for",   "from",  "global",
      "if",       "import", "in",    "is",   "lambda", "nonlocal", "not",     "or",    "pass",  "raise",
      "return",   "try",    "while", "with", "yield",  "self",     "pytest"};
  return k;
}

// Calls fn(word) for each run of word characters of a line's code (up to a `#` comment); with `skip_strings`, the
// words inside string literals are skipped.
template <class F>
void for_each_word(std::string_view line, bool skip_strings, F&& fn) {
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '#') break;
    if (skip_strings && (line[i] == '\'' || line[i] == '"')) {
      const char q = line[i++];
      while (i < line.size() && line[i] != q) i += line[i] == '\\' ? 2 : 1;
      ++i;
      continue;
    }
    if (!word_char(static_cast<unsigned char>(line[i]))) {
      ++i;
      continue;
    }
    const size_t s = i;
    while (i < line.size() && word_char(static_cast<unsigned char>(line[i]))) ++i;
    if (fn(line.substr(s, i - s))) return;
  }
}

// Names (≥ 3 characters, not keywords) and literals of a line.
std::vector<std::string_view> line_tokens(std::string_view line) {
  std::vector<std::string_view> out;
  for_each_word(line, false, [&](std::string_view w) {
    const bool number = std::isdigit(static_cast<unsigned char>(w[0]));
    if ((number || w.size() >= 3) && !python_keywords().contains(w)) out.push_back(w);
    return false;
  });
  return out;
}

// The lines of the message that state the error (pytest prefixes them with "E "), else the last three lines.
std::unordered_set<std::string> error_tokens(std::string_view message) {
  std::unordered_set<std::string> out;
  const auto lines = split_lines(message);
  bool any_e = false;
  for (auto l : lines)
    if (l.starts_with("E ")) {
      any_e = true;
      for (auto t : line_tokens(l.substr(1))) out.emplace(t);
    }
  if (!any_e)
    for (size_t i = lines.size() >= 3 ? lines.size() - 3 : 0; i < lines.size(); ++i)
      for (auto t : line_tokens(lines[i])) out.emplace(t);
  return out;
}

// How much of a line is a value the failure shows: 1 when the line holds a whole compared value (≥ 4 characters,
// canonical form), else the share of its literals (strings, numbers of ≥ 2 characters) found among the values'.
struct ValueMatcher {
  std::vector<std::string> whole;
  std::unordered_set<std::string> literals;
  explicit ValueMatcher(const FailureForm& f) {
    for (const auto& v : f.values) {
      std::string c = ascii_lower(canonical_code(v));
      if (c.empty()) continue;
      for (auto& t : literal_tokens(c)) literals.insert(std::move(t));
      // pytest prints a string's diff lines without quotes: the bare text as a string literal.
      if (c.front() != '\'' && c.front() != '[' && c.front() != '(' && c.front() != '{') literals.insert("'" + c + "'");
      if (c.size() >= 4) whole.push_back(std::move(c));
    }
  }
  double operator()(std::string_view line) const {
    if (whole.empty() && literals.empty()) return 0.0;
    const auto hash = line.find('#');
    const std::string code = ascii_lower(canonical_code(line.substr(0, hash)));
    for (const auto& w : whole)
      if (code.find(w) != std::string::npos) return 1.0;
    const auto lits = literal_tokens(code);
    if (lits.empty()) return 0.0;
    size_t hit = 0;
    for (const auto& l : lits) hit += literals.contains(l) ? 1 : 0;
    return static_cast<double>(hit) / static_cast<double>(lits.size());
  }
};

// 1 when the line uses one of the names the failure quotes (as a name, an attribute or a keyword argument; not
// inside a string literal).
bool uses_name(std::string_view line, const std::vector<std::string>& names) {
  bool found = false;
  if (!names.empty())
    for_each_word(line, true, [&](std::string_view w) {
      found = std::find(names.begin(), names.end(), w) != names.end();
      return found;
    });
  return found;
}

bool is_assertion(std::string_view text) {
  text = trim(text);
  return text.starts_with("assert ") || text.starts_with("assert(") || text.starts_with("self.assert") ||
         text.starts_with("with pytest.raises") || text.starts_with("pytest.raises") || text.starts_with("self.fail");
}

}  // namespace

namespace {

// What the error message says about where execution went, read once per query.
struct FailurePath {
  std::set<std::pair<size_t, int>> frame_lines;  // (file, line) of every frame inside the test files
  std::vector<std::vector<int>> ordinal;         // statement ordinal per line, per file
  int stop_stmt_first = 0;                       // first line of the failing statement
  std::map<int, int> slice;  // statement first line → hops back from the failing statement, in the stopping file
  // In each function a frame passes through, the frame's line is where execution was when the test failed: lines
  // after it never ran, lines before it ran most recently. Keyed by (file, function def line) -> frame line.
  std::map<std::pair<size_t, int>, int> frame_in_function;
};

FailurePath failure_path(const QueryView& v) {
  FailurePath p;
  for (const auto& fr : v.frames)
    for (size_t i = 0; i < v.files.size(); ++i)
      if (same_file(fr.path, v.files[i].source->path)) p.frame_lines.insert({i, fr.line});
  p.ordinal.resize(v.files.size());
  for (size_t i = 0; i < v.files.size(); ++i) {
    const auto& s = *v.files[i].structure;
    p.ordinal[i].assign(static_cast<size_t>(s.line_count) + 1, 0);
    int n = 0, prev = -1;
    for (int l = 1; l <= s.line_count; ++l) {
      const int st = s.statement[static_cast<size_t>(l - 1)];
      if (st != 0 && st != prev && s.kind[static_cast<size_t>(l - 1)] != "comment") ++n;
      if (st != 0) prev = st;
      p.ordinal[i][static_cast<size_t>(l)] = n;
    }
  }
  if (v.stop_file >= 0) {
    const auto& stop = v.files[static_cast<size_t>(v.stop_file)];
    p.stop_stmt_first = stop.structure->statement_span(v.stop_line).first;
    p.slice = backward_slice(*stop.structure, stop.lines, v.stop_line,
                             stop.scope.found ? stop.scope.role : std::vector<ScopeRole>{});
  }
  for (const auto& [file, line] : p.frame_lines) {
    const auto& s = *v.files[file].structure;
    if (line < 1 || line > s.line_count) continue;
    const int fn = s.function[static_cast<size_t>(line - 1)];
    if (fn == 0) continue;
    auto [it, inserted] = p.frame_in_function.emplace(std::make_pair(file, fn), line);
    if (!inserted) it->second = std::max(it->second, line);
  }
  return p;
}

// The paper's annotation: w(l) = min over the retrieved faulty lines of the normalized Levenshtein distance, and the
// ε test (annotated when w(l) ≤ ε); beside it the graded resemblance the ranker weighs, each weighted by the
// similarity of the case the faulty line comes from. Fix-aware: a faulty line whose fix the query line resembles
// more closely than the faulty line itself is no match for it (the query line is already the corrected form, as
// in another test the past fix corrected); its resemblance to the fix is kResemblesFix instead.
// Returns false when `past_deadline` stopped it before every faulty line was compared.
bool annotation_features(QueryLine& ql, const std::vector<RetrievedFaultyLine>& faulty,
                         const std::vector<double>& case_similarity, double epsilon, const std::string& test_id,
                         const std::function<bool()>& past_deadline) {
  FeatureVector& x = ql.x;
  const PreparedLine me(ql.text);
  // One comparison costs O(the two lines' lengths) (levenshtein.h caps the rest): the clock is read once this many
  // code points have been compared, so a line of megabytes against many faulty lines cannot outlast the deadline.
  constexpr size_t kCodePointsBetweenChecks = size_t{1} << 20;
  size_t since_check = 0;
  for (size_t j = 0; j < faulty.size(); ++j) {
    since_check += me.text.size() + faulty[j].prepared.text.size();
    for (const auto& f : faulty[j].fixed) since_check += me.text.size() + f.text.size();
    if (since_check >= kCodePointsBetweenChecks) {
      since_check = 0;
      if (past_deadline && past_deadline()) return false;
    }
    const double d = normalized_levenshtein_bounded(me, faulty[j].prepared, kResemblanceRadius);
    double to_fix = 2.0;
    for (const auto& f : faulty[j].fixed)
      to_fix = std::min(to_fix, normalized_levenshtein_bounded(me, f, std::min(d, kResemblanceRadius)));
    if (to_fix < d && to_fix <= kResemblanceRadius) {
      const double sim = std::max(0.0, case_similarity[faulty[j].case_index]);
      x[kResemblesFix] = std::max(x[kResemblesFix], sim * (1.0 - to_fix / kResemblanceRadius));
      if (to_fix < ql.fix_distance) {
        ql.fix_distance = to_fix;
        ql.fix_match = static_cast<int>(j);
      }
      continue;
    }
    if (d < ql.best_distance) {
      ql.best_distance = d;
      ql.best_match = static_cast<int>(j);
    }
    const double sim = std::max(0.0, case_similarity[faulty[j].case_index]);
    if (d <= epsilon) x[kAnnotated] = std::max(x[kAnnotated], sim);
    if (d > kResemblanceRadius) continue;
    const double resemblance = sim * (1.0 - d / kResemblanceRadius);
    x[kResembles] = std::max(x[kResembles], resemblance);
    if (!test_id.empty() && faulty[j].test_id == test_id) x[kSameTest] = std::max(x[kSameTest], resemblance);
    if (faulty[j].outside_test) x[kOutsideTest] = std::max(x[kOutsideTest], resemblance);
  }
  return true;
}

// Where the line stands against the traceback: the failing statement, another frame, not reached, or shortly before.
void traceback_features(QueryLine& ql, const QueryView& v, const FailurePath& p) {
  FeatureVector& x = ql.x;
  const auto& s = *v.files[ql.file].structure;
  const auto li = static_cast<size_t>(ql.line - 1);
  const bool at_stop =
      v.stop_file == static_cast<int>(ql.file) && s.statement[li] != 0 && s.statement[li] == p.stop_stmt_first;
  const bool named = p.frame_lines.contains({ql.file, ql.line});
  if (named) x[kNamedLine] = 1.0;
  if (at_stop)
    x[kTracebackLine] = 1.0;
  else if (named)
    x[kTracebackFrame] = 1.0;
  if (auto it = p.frame_in_function.find({ql.file, s.function[li]});
      it != p.frame_in_function.end() && s.statement[li] != 0) {
    const int frame_line = it->second;
    const auto [first, last] = s.statement_span(frame_line);
    if (ql.line > last) {
      x[kNotReached] = 1.0;
    } else if (ql.line < first) {
      const int delta =
          p.ordinal[ql.file][static_cast<size_t>(frame_line)] - p.ordinal[ql.file][static_cast<size_t>(ql.line)];
      x[kNearFailure] = std::exp(-std::max(0, delta) / kNearFailureDecay);
    }
  }
  if (v.stop_file == static_cast<int>(ql.file) && s.statement[li] != 0)
    if (auto it = p.slice.find(s.statement[li]); it != p.slice.end()) x[kSlice] = 1.0 / it->second;
}

// The line's place in the failing test's static scope, its statement kind, and what it shares with the error's text.
void scope_and_text_features(QueryLine& ql, const QueryView& v, const KindPrior& prior, const ValueMatcher& value_match,
                             const std::unordered_set<std::string>& err_tokens) {
  FeatureVector& x = ql.x;
  const auto& file = v.files[ql.file];
  const auto& s = *file.structure;
  const auto li = static_cast<size_t>(ql.line - 1);
  const ScopeRole role = file.scope.found ? file.scope.role[li] : ScopeRole::module;
  x[kOwnBody] = role == ScopeRole::own ? 1.0 : 0.0;
  x[kSupport] = role == ScopeRole::support ? 1.0 : 0.0;
  x[kModuleLevel] = role == ScopeRole::module ? 1.0 : 0.0;
  x[kKindPrior] = prior.get(kind_key(s.language, s.kind[li]));
  x[kValueMatch] = value_match(ql.text);
  x[kNameMatch] = uses_name(ql.text, v.form.names) ? 1.0 : 0.0;
  const auto toks = line_tokens(ql.text);
  if (!toks.empty() && !err_tokens.empty()) {
    size_t hit = 0;
    for (auto t : toks) hit += err_tokens.contains(std::string(t)) ? 1 : 0;
    x[kErrorOverlap] = static_cast<double>(hit) / static_cast<double>(toks.size());
  }
}

// What the change since the last pass says of each line: where the changed lines are, and the product's changed names
// and old literals (each to its first entry in change->product).
struct ChangeLookup {
  std::map<std::pair<size_t, int>, int> lines;  // (file, line) → index into change->lines
  std::unordered_map<std::string, int> names, literals;
  ChangeLookup(const QueryView& v) {
    if (!v.change) return;
    for (size_t i = 0; i < v.change->lines.size(); ++i)
      for (size_t f = 0; f < v.files.size(); ++f)
        if (v.files[f].source->path == v.change->lines[i].at.path)
          lines.emplace(std::pair{f, v.change->lines[i].at.line}, static_cast<int>(i));
    for (size_t i = 0; i < v.change->product.size(); ++i) {
      const auto& p = v.change->product[i];
      (p.literal ? literals : names).emplace(p.literal ? ascii_lower(p.token) : p.token, static_cast<int>(i));
    }
  }
  bool empty() const { return lines.empty() && names.empty() && literals.empty(); }
};

// Whether the failing test reaches the line (its scope, when found, does not put it outside: not another test's).
bool reached_by_test(const QueryLine& ql, const QueryView& v) {
  const auto& file = v.files[ql.file];
  const auto li = static_cast<size_t>(ql.line - 1);
  return !(file.scope.found && li < file.scope.role.size() && file.scope.role[li] == ScopeRole::outside);
}

// kChangedSincePass and kUsesProductChange, for a line the failing test reaches (not another test's lines).
void change_features(QueryLine& ql, const QueryView& v, const ChangeLookup& change) {
  if (!reached_by_test(ql, v)) return;
  if (auto it = change.lines.find({ql.file, ql.line}); it != change.lines.end()) {
    ql.x[kChangedSincePass] = 1.0;
    ql.change_line = it->second;
  }
  int found = -1;
  if (!change.names.empty())
    for_each_word(ql.text, true, [&](std::string_view w) {
      if (auto it = change.names.find(std::string(w)); it != change.names.end()) found = it->second;
      return found >= 0;
    });
  if (found < 0 && !change.literals.empty()) {
    const auto hash = ql.text.find('#');
    for (const auto& l : literal_tokens(ascii_lower(canonical_code(ql.text.substr(0, hash)))))
      if (auto it = change.literals.find(l); it != change.literals.end()) {
        found = it->second;
        break;
      }
  }
  if (found >= 0) {
    ql.x[kUsesProductChange] = 1.0;
    ql.change_product = found;
  }
}

// A change that touched most of what the test reaches says little of any one line (a reformatted file, a merge of
// hundreds of product names): each change feature is scaled by the share of the test's lines it leaves alone, 1 for a
// line or two among many, 0 when every line it reaches changed.
void weigh_change_by_specificity(QueryView& v) {
  size_t reached = 0, changed = 0, uses = 0;
  for (const auto& ql : v.lines) {
    if (!reached_by_test(ql, v)) continue;
    ++reached;
    changed += ql.x[kChangedSincePass] > 0 ? 1 : 0;
    uses += ql.x[kUsesProductChange] > 0 ? 1 : 0;
  }
  if (reached == 0) return;
  const double keep_changed = 1.0 - static_cast<double>(changed) / static_cast<double>(reached);
  const double keep_uses = 1.0 - static_cast<double>(uses) / static_cast<double>(reached);
  for (auto& ql : v.lines) {
    ql.x[kChangedSincePass] *= keep_changed;
    ql.x[kUsesProductChange] *= keep_uses;
  }
}

// The gate's inputs: the failure's form, and the evidence on the failing statement against the best elsewhere.
void gate_inputs(QueryView& v) {
  v.gate.fill(0.0);
  v.has_stop = false;
  for (const auto& ql : v.lines) v.has_stop = v.has_stop || ql.x[kTracebackLine] > 0;
  if (!v.has_stop) return;
  GateVector& g = v.gate;
  g[kGateBias] = 1.0;
  switch (v.form.group) {
    case ExceptionGroup::assertion:
      g[kGateAssertion] = 1.0;
      break;
    case ExceptionGroup::type:
      g[kGateType] = 1.0;
      break;
    case ExceptionGroup::name:
      g[kGateName] = 1.0;
      break;
    case ExceptionGroup::lookup:
      g[kGateLookup] = 1.0;
      break;
    case ExceptionGroup::value:
      g[kGateValue] = 1.0;
      break;
    default:
      break;
  }
  g[kGateRaisedInTest] = v.raised_in_test ? 1.0 : 0.0;
  g[kGateGenericCheck] = v.form.generic_check ? 1.0 : 0.0;
  for (const auto& ql : v.lines) {
    const auto& file = v.files[ql.file];
    const auto li = static_cast<size_t>(ql.line - 1);
    const bool reach =
        !file.scope.found || file.scope.role[li] == ScopeRole::own || file.scope.role[li] == ScopeRole::support;
    const double resemble = std::max(ql.x[kAnnotated], ql.x[kResembles]);
    if (ql.x[kTracebackLine] > 0) {
      g[kGateStopValue] = std::max(g[kGateStopValue], ql.x[kValueMatch]);
      g[kGateStopName] = std::max(g[kGateStopName], ql.x[kNameMatch]);
      g[kGateStopAnnotated] = std::max(g[kGateStopAnnotated], resemble);
      g[kGateStopIsAssert] = std::max(g[kGateStopIsAssert], is_assertion(ql.text) ? 1.0 : 0.0);
    } else if (reach && ql.x[kNotReached] == 0) {
      g[kGateOtherValue] = std::max(g[kGateOtherValue], ql.x[kValueMatch]);
      g[kGateOtherName] = std::max(g[kGateOtherName], ql.x[kNameMatch]);
      g[kGateOtherAnnotated] = std::max(g[kGateOtherAnnotated], resemble);
    }
  }
}

}  // namespace

AnnotationProgress compute_features(QueryView& v, const std::vector<RetrievedFaultyLine>& faulty,
                                    const std::vector<double>& case_similarity, double epsilon,
                                    const KindPrior& prior, std::string_view full_error_message,
                                    const std::function<bool()>& past_deadline) {
  const std::string error_message = v.failure.empty() ? failure_text(full_error_message) : v.failure;
  const auto err_tokens = error_tokens(error_message);
  v.form = parse_failure_form(error_message);
  const ValueMatcher value_match(v.form);
  if (!v.frames.empty())
    for (const auto& f : v.files)
      v.raised_in_test = v.raised_in_test || same_file(v.frames.back().path, f.source->path);
  const FailurePath path = failure_path(v);
  const ChangeLookup change(v);
  AnnotationProgress progress;
  progress.lines = v.lines.size();
  for (auto& ql : v.lines) {
    ql.x.fill(0.0);
    ql.x[kBias] = 1.0;
    if (!progress.stopped && !faulty.empty()) {
      progress.stopped = past_deadline && past_deadline();
      if (!progress.stopped) {
        progress.stopped = !annotation_features(ql, faulty, case_similarity, epsilon, v.test_id, past_deadline);
        if (!progress.stopped) ++progress.compared;
      }
    }
    traceback_features(ql, v, path);
    scope_and_text_features(ql, v, prior, value_match, err_tokens);
    if (!change.empty()) change_features(ql, v, change);
  }
  if (!change.empty()) weigh_change_by_specificity(v);
  if (faulty.empty()) progress.compared = progress.lines;
  gate_inputs(v);
  return progress;
}

}  // namespace spark
