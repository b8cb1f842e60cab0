#include "formats/junit.h"

#include <expat.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "base/names.h"
#include "base/text.h"
#include "code/scope.h"
#include "formats/case.h"
#include "formats/error_message.h"

namespace spark {

namespace fs = std::filesystem;

std::string bounded_test_id(std::string_view id) {
  if (id.size() <= kTestIdLimit) return std::string(id);
  // A second hash of the whole id, with another offset basis: 128 bits in all.
  constexpr uint64_t kSecondBasis = 0x84222325cbf29ce4ULL;
  const std::string suffix =
      "…#" + hex64(fnv1a64(id)) + hex64(fnv1a64(id, kSecondBasis)) + (id.ends_with(']') ? "]" : "");
  size_t head = kTestIdLimit - suffix.size();
  while (head > 0 && (static_cast<unsigned char>(id[head]) & 0xC0) == 0x80) --head;
  return std::string(id.substr(0, head)) + suffix;
}

namespace {

constexpr Named<Outcome> kOutcomeNames[] = {
    {Outcome::passed, "passed"}, {Outcome::failed, "failed"}, {Outcome::error, "error"}, {Outcome::skipped, "skipped"}};
static_assert(std::size(kOutcomeNames) == static_cast<size_t>(Outcome::skipped) + 1);

}  // namespace

std::string_view outcome_name(Outcome o) { return name_of(kOutcomeNames, o); }

Result<Outcome> parse_outcome(std::string_view name) {
  if (const auto o = value_named(kOutcomeNames, name)) return *o;
  return fail("outcome \"" + std::string(name) + "\" is not " + names_text(kOutcomeNames));
}

std::optional<fs::path> inside_root(const fs::path& root, const std::string& relative) {
  if (relative.empty()) return std::nullopt;
  const fs::path rel(relative);
  if (rel.is_absolute()) return std::nullopt;
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(root, ec);
  if (ec) return std::nullopt;
  const fs::path full = fs::weakly_canonical(base / rel, ec);
  if (ec) return std::nullopt;
  // Inside: `base` is a prefix of `full`, component by component (also after following symbolic links).
  auto b = base.begin(), f = full.begin();
  for (; b != base.end(); ++b, ++f)
    if (f == full.end() || *b != *f) return std::nullopt;
  if (!fs::is_regular_file(full, ec)) return std::nullopt;
  return full;
}

namespace {

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, size_t from, size_t to, const std::string& sep) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (i > from ? sep : "") + parts[i];
  return out;
}

}  // namespace

bool js_test_path(std::string_view path) {
  const auto language = language_of_path(path);
  if (language != Language::javascript && language != Language::typescript) return false;
  const std::string p = "/" + std::string(path);
  if (p.find("/node_modules/") != std::string::npos) return false;
  if (p.find("/test/") != std::string::npos || p.find("/tests/") != std::string::npos ||
      p.find("/__tests__/") != std::string::npos)
    return true;
  const std::string name = fs::path(std::string(path)).filename().string();
  const std::string stem = name.substr(0, name.find('.'));
  return name.find(".test.") != std::string::npos || name.find(".spec.") != std::string::npos ||
         stem.ends_with("-test") || stem.ends_with("_test") || stem.starts_with("test-") || stem == "test";
}

bool holds_names(std::string_view text, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    bool found = false;
    for (const char quote : {'\'', '"', '`'}) {
      const std::string literal = quote + n + quote;
      if (text.find(literal) != std::string_view::npos) {
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

std::function<std::vector<std::string>(const std::vector<std::string>& names)> holding_over(
    std::function<const std::vector<std::string>&()> list,
    std::function<std::optional<std::string>(const std::string& path)> read) {
  auto texts = std::make_shared<std::optional<std::vector<std::pair<std::string, std::string>>>>();
  return [list = std::move(list), read = std::move(read), texts](const std::vector<std::string>& names) {
    if (!*texts) {
      texts->emplace();
      for (const auto& p : list())
        if (js_test_path(p))
          if (auto text = read(p)) (*texts)->emplace_back(p, std::move(*text));
    }
    std::vector<std::string> out;
    for (const auto& [path, text] : **texts)
      if (holds_names(text, names)) out.push_back(path);
    return out;
  };
}

std::string find_by_tail(const std::vector<std::string>& paths, std::string_view tail) {
  if (tail.empty()) return "";
  const auto under_test_root = [](std::string_view p) {
    return p.starts_with("src/test/") || p.starts_with("test/") || p.starts_with("tests/") ||
           p.find("/src/test/") != std::string_view::npos || p.find("/test/") != std::string_view::npos ||
           p.find("/tests/") != std::string_view::npos || p.find("__tests__/") != std::string_view::npos;
  };
  const std::string* best = nullptr;
  for (const auto& p : paths) {
    if (!same_file(tail, p)) continue;
    if (!best) {
      best = &p;
      continue;
    }
    const bool a = under_test_root(p), b = under_test_root(*best);
    if (a != b ? a : p.size() < best->size()) best = &p;
  }
  return best ? *best : "";
}

TestFiles files_under(const fs::path& root) {
  // The folder's files, listed once on the first `find` or `holding`.
  auto listed = std::make_shared<std::optional<std::vector<std::string>>>();
  const auto list = [root, listed]() -> const std::vector<std::string>& {
    if (!*listed) {
      listed->emplace();
      std::error_code ec;
      fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (it->is_directory(ec)) {
          if (name.starts_with('.') || name == "node_modules" || name == "target" || name == "build")
            it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file(ec) && language_of_path(name))
          (*listed)->push_back(fs::relative(it->path(), root, ec).generic_string());
      }
    }
    return **listed;
  };
  return {[root](const std::string& relative) { return inside_root(root, relative).has_value(); }, root.string(),
          [list](const std::string& tail) -> std::string { return find_by_tail(list(), tail); },
          holding_over(list, [root](const std::string& path) -> std::optional<std::string> {
            auto full = inside_root(root, path);
            if (!full) return std::nullopt;
            auto text = read_file(*full);
            return text ? std::optional<std::string>(std::move(*text)) : std::nullopt;
          })};
}

namespace {

std::string first_line(std::string_view text) { return std::string(trim(text.substr(0, text.find('\n')))); }

// One outcome per test: pytest reports a test whose call failed and whose fixture's tear-down then raised as two
// <testcase>s of one id, a <failure> and an <error> ("failed on teardown with …"). A failure wins over an error, and
// either over a pass or a skip (a pass, then an error in tear-down: the test errs); the first of equals stays.
void merge_repeated_tests(JunitReport& report, const std::string& name) {
  const auto rank = [](Outcome o) { return o == Outcome::failed ? 2 : o == Outcome::error ? 1 : 0; };
  // Each id's first outcome, by a view of its id (report.outcomes stays where it is until the end: no id is copied);
  // kept[k]: the outcome read for the k-th id.
  std::unordered_map<std::string_view, size_t> first;
  std::vector<size_t> kept;
  first.reserve(report.outcomes.size());
  kept.reserve(report.outcomes.size());
  for (size_t i = 0; i < report.outcomes.size(); ++i) {
    auto [it, inserted] = first.emplace(report.outcomes[i].test_id, kept.size());
    if (inserted) {
      kept.push_back(i);
      continue;
    }
    size_t not_read = i;
    if (rank(report.outcomes[i].outcome) > rank(report.outcomes[kept[it->second]].outcome))
      std::swap(kept[it->second], not_read);
    const TestOutcome& o = report.outcomes[not_read];
    const TestOutcome& k = report.outcomes[kept[it->second]];
    if (rank(o.outcome) > 0)
      report.warnings.push_back(name + ":" + std::to_string(o.report_line) + ": " + o.test_id + " is reported again (" +
                                (o.outcome == Outcome::failed ? "failed: " : "error: ") +
                                clip(first_line(o.message), 120) + "); the " +
                                (k.outcome == Outcome::failed ? "failure" : "error") + " at line " +
                                std::to_string(k.report_line) + " is read");
  }
  if (kept.size() == report.outcomes.size()) return;
  first.clear();
  std::vector<TestOutcome> out;
  out.reserve(kept.size());
  for (const size_t i : kept) out.push_back(std::move(report.outcomes[i]));
  report.outcomes = std::move(out);
}

}  // namespace

Result<JunitReport> read_junit(const fs::path& report, const fs::path& root) {
  return read_junit(report, files_under(root));
}

namespace {

// One <testcase> as the stream read it: its attributes, the suite around it, and its first <failure>, <error> and
// <skipped> (the first of each is read, as a DOM reader's child("failure") would).
struct TestcaseRead {
  std::string classname, name, file;
  size_t line = 0;
  std::optional<int64_t> time;
  std::vector<std::string> suite_names;  // node:test's describe blocks (the enclosing <testsuite>s), outermost first
  struct Detail {
    bool seen = false;
    std::string message;  // its message attribute, bounded
    ErrorMessageCap text;  // its text (character data and CDATA sections right inside it), bounded
  };
  Detail failure, error, skipped;
};

// A control character XML 1.0 does not allow, raw (a runner that writes its terminal's colour codes as they are, a
// NUL) or as a character reference (`&#27;`, `&#x1b;`, as some runners escape them), becomes '?' before expat reads
// the text, and is counted: one such character is not worth a report's outcomes. Lines stay where they are (a
// reference is cut to one character within its line). A reference split between two pieces is held back for the next.
struct ControlCharacters {
  size_t count = 0, first_line = 0, newlines = 0;
  std::string carry;  // the start of a reference the piece ended in

  void clean(std::string_view piece, std::string& out) {
    std::string text = std::move(carry);
    carry.clear();
    text.append(piece);
    out.clear();
    for (size_t i = 0; i < text.size(); ++i) {
      const auto u = static_cast<unsigned char>(text[i]);
      if (u == '\n') ++newlines;
      if (u < 0x20 && u != '\t' && u != '\n' && u != '\r') {
        seen();
        out.push_back('?');
        continue;
      }
      if (u == '&' && i + 1 < text.size() && text[i + 1] == '#') {
        const size_t window = std::min<size_t>(text.size() - i, 13);  // "&#x0000001b;" at most
        const size_t semicolon = std::string_view(text).substr(i, window).find(';');
        if (semicolon == std::string_view::npos && window < 13) {  // cut by the piece's end
          carry = text.substr(i);
          return;
        }
        if (semicolon != std::string_view::npos && forbidden(std::string_view(text).substr(i + 2, semicolon - 2))) {
          seen();
          out.push_back('?');
          i += semicolon;
          continue;
        }
      } else if (u == '&' && i + 1 == text.size()) {
        carry = "&";
        return;
      }
      out.push_back(text[i]);
    }
  }
  // The end of the file: what was held back is read as it is.
  void finish(std::string& out) {
    out = std::move(carry);
    carry.clear();
  }

 private:
  void seen() {
    if (count++ == 0) first_line = newlines + 1;
  }
  // "27", "x1b": a character reference's number, when it names a control character XML does not allow.
  static bool forbidden(std::string_view number) {
    const bool hex = !number.empty() && (number[0] == 'x' || number[0] == 'X');
    if (hex) number.remove_prefix(1);
    if (number.empty() || number.size() > 8) return false;
    unsigned long value = 0;
    for (const char c : number) {
      const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                    : hex && std::isxdigit(static_cast<unsigned char>(c))
                        ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                        : -1;
      if (d < 0) return false;
      value = value * (hex ? 16 : 10) + static_cast<unsigned long>(d);
    }
    return value < 0x20 && value != '\t' && value != '\n' && value != '\r';
  }
};

// A JUnit report read as a stream (expat): the document is never held whole, only the <testcase> being read and the
// suites around it, so a report of any size is read in memory that grows with its outcomes alone (and each message is
// bounded: bounded_error_message). <testsuite>s nest to any depth without recursion. A document declaring entities
// is refused: entities are neither expanded (billion laughs) nor fetched (external entities).
class JunitStream {
 public:
  JunitStream(std::string name, const TestFiles& files) : name_(std::move(name)), files_(files) {}

  Result<JunitReport> read(const fs::path& report) {
    const std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> parser(XML_ParserCreate(nullptr),
                                                                              &XML_ParserFree);
    if (!parser) return fail(name_ + ": cannot create an XML parser (out of memory)");
    parser_ = parser.get();
    XML_SetUserData(parser_, this);
    XML_SetElementHandler(parser_, &JunitStream::on_start, &JunitStream::on_end);
    XML_SetCharacterDataHandler(parser_, &JunitStream::on_text);
    XML_SetEntityDeclHandler(parser_, &JunitStream::on_entity);
    bool parsed = true;
    ControlCharacters controls;
    std::string clean;
    auto read = read_file_in_pieces(report, [&](std::string_view piece) {
      controls.clean(piece, clean);
      parsed = XML_Parse(parser_, clean.data(), static_cast<int>(clean.size()), XML_FALSE) == XML_STATUS_OK;
      return parsed;
    });
    TRY(read);
    if (parsed) {
      controls.finish(clean);
      parsed = XML_Parse(parser_, clean.data(), static_cast<int>(clean.size()), XML_TRUE) == XML_STATUS_OK;
    }
    if (controls.count)
      out_.warnings.push_back(name_ + ": " + std::to_string(controls.count) +
                              " control character(s) XML does not allow, the first at line " +
                              std::to_string(controls.first_line) + ", read as '?'");
    if (!stopped_.empty()) return fail(stopped_);
    if (!parsed)
      return fail(name_ + ":" + std::to_string(XML_GetCurrentLineNumber(parser_)) +
                  ": not a readable JUnit report: " + XML_ErrorString(XML_GetErrorCode(parser_)));
    merge_repeated_tests(out_, name_);
    return std::move(out_);
  }

 private:
  // An open element the reader follows: the root and the <testsuite>s under it (suites), the <testcase> in them,
  // and that one's first <failure>, <error> or <skipped>. Other elements are only counted (skipped_depth_).
  enum class Kind { suite, testcase, detail };
  struct Open {
    Kind kind;
    bool testsuite = false;  // a suite element named <testsuite> (the root may be <testsuites>)
    std::string suite_name;
    std::optional<int64_t> time;  // a suite's timestamp
    TestcaseRead::Detail* detail = nullptr;
  };

  static const char* attribute(const XML_Char** atts, std::string_view key) {
    for (; atts[0]; atts += 2)
      if (key == atts[0]) return atts[1];
    return nullptr;
  }
  size_t line() const { return static_cast<size_t>(XML_GetCurrentLineNumber(parser_)); }
  void stop(std::string why) {
    if (stopped_.empty()) stopped_ = std::move(why);
    XML_StopParser(parser_, XML_FALSE);
  }

  static void XMLCALL on_start(void* self, const XML_Char* element, const XML_Char** atts) {
    static_cast<JunitStream*>(self)->start(element, atts);
  }
  static void XMLCALL on_end(void* self, const XML_Char* /*element*/) { static_cast<JunitStream*>(self)->end(); }
  static void XMLCALL on_text(void* self, const XML_Char* text, int length) {
    auto& r = *static_cast<JunitStream*>(self);
    if (r.skipped_depth_ == 0 && !r.open_.empty() && r.open_.back().kind == Kind::detail)
      r.open_.back().detail->text.append(std::string_view(text, static_cast<size_t>(length)));
  }
  static void XMLCALL on_entity(void* self, const XML_Char* entity, int /*parameter*/, const XML_Char* /*value*/,
                                int /*length*/, const XML_Char* /*base*/, const XML_Char* /*system*/,
                                const XML_Char* /*public_id*/, const XML_Char* /*notation*/) {
    auto& r = *static_cast<JunitStream*>(self);
    r.stop(r.name_ + ":" + std::to_string(r.line()) + ": not a readable JUnit report: it declares an entity (" +
           clip(entity, 60) + "); a JUnit report declares none, and spark neither expands nor fetches entities");
  }

  void start(std::string_view element, const XML_Char** atts) {
    if (skipped_depth_ > 0) {
      ++skipped_depth_;
      return;
    }
    if (open_.empty()) {
      if (element != "testsuites" && element != "testsuite")
        return stop(name_ + ":" + std::to_string(line()) + ": not a JUnit report: the root element is <" +
                    std::string(element) + ">, not <testsuites> or <testsuite>");
      return open_suite(element, atts);
    }
    switch (open_.back().kind) {
      case Kind::suite:
        if (element == "testsuite") return open_suite(element, atts);
        if (element == "testcase") return open_testcase(atts);
        break;
      case Kind::testcase: {
        TestcaseRead::Detail* d = element == "failure" ? &testcase_.failure
                                  : element == "error"   ? &testcase_.error
                                  : element == "skipped" ? &testcase_.skipped
                                                         : nullptr;
        if (d && !d->seen) {
          d->seen = true;
          if (const char* m = attribute(atts, "message")) d->message = bounded_error_message(m);
          open_.push_back({Kind::detail, false, {}, {}, d});
          return;
        }
        break;
      }
      case Kind::detail:
        break;
    }
    ++skipped_depth_;
  }

  void open_suite(std::string_view element, const XML_Char** atts) {
    Open s{Kind::suite, element == "testsuite", {}, {}, nullptr};
    if (const char* n = attribute(atts, "name")) s.suite_name = n;
    if (const char* ts = attribute(atts, "timestamp"); ts && *ts) {
      auto t = parse_iso8601(ts);
      if (!t) t = parse_iso8601(std::string(ts) + "Z");  // pytest writes local time without a zone
      if (t) s.time = *t;
    }
    open_.push_back(std::move(s));
  }

  void open_testcase(const XML_Char** atts) {
    testcase_ = TestcaseRead();
    testcase_.line = line();
    testcase_.time = open_.back().time;
    for (auto [field, key] : {std::pair{&testcase_.classname, "classname"}, {&testcase_.name, "name"},
                              {&testcase_.file, "file"}})
      if (const char* v = attribute(atts, key)) *field = v;
    // node:test's describe blocks: the <testsuite>s around it (only its reports need them).
    if (testcase_.classname == "test" && testcase_.file.empty()) {
      for (auto it = open_.rbegin(); it != open_.rend() && it->testsuite; ++it)
        testcase_.suite_names.push_back(it->suite_name);
      std::reverse(testcase_.suite_names.begin(), testcase_.suite_names.end());
    }
    open_.push_back({Kind::testcase, false, {}, {}, nullptr});
  }

  void end() {
    if (skipped_depth_ > 0) {
      --skipped_depth_;
      return;
    }
    if (open_.empty()) return;  // the root the reader refused (the parser stops after it)
    const Kind kind = open_.back().kind;
    open_.pop_back();
    if (kind == Kind::testcase) read_testcase(testcase_);
  }

  bool exists(const std::string& path) {
    auto [it, fresh] = known_.try_emplace(path, false);
    if (fresh) it->second = files_.exists(path);
    return it->second;
  }

  // The <testcase> just closed, as an outcome (or a warning): its test id and file by the runner that wrote it.
  void read_testcase(TestcaseRead& tc);
  // Its outcome (failed, error, skipped, else passed) and message, from its first <failure>, <error> or <skipped>.
  void read_outcome(TestcaseRead& tc, TestOutcome& o, const std::string& where);
  void read_collection_error(const TestcaseRead& tc, TestOutcome o, const std::string& where);
  void read_node_test(const TestcaseRead& tc, TestOutcome o, const std::string& where);
  void read_javascript_test(const TestcaseRead& tc, TestOutcome o, const std::string& where);
  void read_python_or_java_test(const TestcaseRead& tc, TestOutcome o, const std::string& where);

  const std::string name_;
  const TestFiles& files_;
  XML_Parser parser_ = nullptr;
  std::vector<Open> open_;
  size_t skipped_depth_ = 0;
  TestcaseRead testcase_;
  std::string stopped_;  // why the reader stopped the parser
  JunitReport out_;
  // Each path is looked up once (a look-up resolves it on disk or in git objects; 100k test cases name few files).
  std::unordered_map<std::string, bool> known_;
};

// How much of a report's name (a class, a file, a title) a warning quotes: the report may be a stranger's.
constexpr size_t kNameInWarning = 300;

// A JavaScript or TypeScript file, by its extension.
bool is_javascript_file(const std::string& path) {
  const auto l = language_of_path(path);
  return l == Language::javascript || l == Language::typescript;
}

void JunitStream::read_testcase(TestcaseRead& tc) {
  TestOutcome o;
  o.time = tc.time;
  o.report_line = tc.line;
  const std::string where = name_ + ":" + std::to_string(o.report_line) + ": ";
  if (tc.name.empty() && tc.classname.empty()) {
    out_.warnings.push_back(where + "a <testcase> without classname and name; skipped");
    return;
  }
  read_outcome(tc, o, where);
  const size_t read = out_.outcomes.size();
  if (tc.classname.empty()) {
    // pytest's collection error: classname "", name "tests.test_x" (the module), message "collection failure".
    read_collection_error(tc, std::move(o), where);
  } else if (tc.classname == "test" && tc.file.empty() && !exists("test.py")) {
    // node:test's reporter: classname "test", no file; the describe blocks are the enclosing <testsuite>s.
    read_node_test(tc, std::move(o), where);
  } else if (is_javascript_file(tc.file) || (tc.file.empty() && is_javascript_file(tc.classname))) {
    // JavaScript/TypeScript: jest-junit (a `file` attribute; classname the suites when configured as docs/MINER.md
    // says), Vitest (classname the file, name "suite > case").
    read_javascript_test(tc, std::move(o), where);
  } else {
    read_python_or_java_test(tc, std::move(o), where);
  }
  for (size_t i = read; i < out_.outcomes.size(); ++i)
    if (std::string& id = out_.outcomes[i].test_id; id.size() > kTestIdLimit) id = bounded_test_id(id);
}

void JunitStream::read_outcome(TestcaseRead& tc, TestOutcome& o, const std::string& where) {
  TestcaseRead::Detail* detail = nullptr;
  if (tc.failure.seen)
    o.outcome = Outcome::failed, detail = &tc.failure;
  else if (tc.error.seen)
    o.outcome = Outcome::error, detail = &tc.error;
  else if (tc.skipped.seen)
    o.outcome = Outcome::skipped, detail = &tc.skipped;
  if (tc.failure.seen && tc.error.seen)
    out_.warnings.push_back(where + "a <testcase> with both a <failure> and an <error> (" +
                            clip(first_line(tc.error.message), 120) + "); the <failure> is read");
  if (detail) {
    const std::string& message = detail->message;
    std::string body = detail->text.take();
    if (is_blank(body)) body.clear();
    o.message = body.empty() ? message : body;
    if (!message.empty() && !body.empty() && body.find(message) == std::string::npos)
      o.message = message + "\n" + body;
    cap_error_message(o.message);
  }
}

void JunitStream::read_collection_error(const TestcaseRead& tc, TestOutcome o, const std::string& where) {
  const std::string& test_name = tc.name;
  o.collection_error = true;
  const auto parts = split_dots(test_name);
  const std::string path = tc.file.empty() ? join(parts, 0, parts.size(), "/") + ".py" : tc.file;
  if (exists(path))
    o.file = path;
  else
    out_.warnings.push_back(where + "collection error of " + clip(test_name, kNameInWarning) + ": no test file " +
                            clip(path, kNameInWarning) + " in " + files_.name);
  o.test_id = o.file.empty() ? test_name : o.file;
  // An error of one function's collection (parametrize's argnames and values that do not match) names it
  // first, after the message attribute's "collection failure": "tests/test_x.py::test_f: in \"parametrize\" …".
  // It is that function's failure.
  const std::string head = o.file + "::";
  const size_t at = o.message.starts_with(head) ? 0 : o.message.find("\n" + head);
  if (!o.file.empty() && at != std::string::npos) {
    const size_t start = at == 0 ? 0 : at + 1;
    const size_t colon = o.message.find(": ", start + head.size());
    if (colon != std::string::npos && colon < o.message.find('\n', start) &&
        o.message.find_first_of(" [", start + head.size()) >= colon)
      o.test_id = o.message.substr(start, colon - start);
  }
  out_.outcomes.push_back(std::move(o));
}

// The file is the one test file that holds all the names (the describe blocks' and the test's) as string literals.
void JunitStream::read_node_test(const TestcaseRead& tc, TestOutcome o, const std::string& where) {
  std::vector<std::string> names = tc.suite_names;
  names.push_back(tc.name);
  const std::string title = join(names, 0, names.size(), " > ");
  std::vector<std::string> holders = files_.holding ? files_.holding(names) : std::vector<std::string>{};
  std::sort(holders.begin(), holders.end());  // a folder lists its files in no set order
  if (holders.size() == 1) {
    o.file = holders.front();
    o.test_id = o.file + " > " + title;
  } else {
    out_.warnings.push_back(where + "node:test names no file for \"" + clip(title, kNameInWarning) + "\", and " +
                            (holders.empty() ? std::string("no test file in ") + files_.name + " holds"
                                             : std::to_string(holders.size()) + " test files (" + holders[0] + ", " +
                                                   holders[1] + (holders.size() > 2 ? ", …" : "") + ") hold") +
                            " its names; not read");
    o.test_id = title;
  }
  out_.outcomes.push_back(std::move(o));
}

void JunitStream::read_javascript_test(const TestcaseRead& tc, TestOutcome o, const std::string& where) {
  const std::string& classname = tc.classname;
  const std::string& file_attr = tc.file;
  std::string path = file_attr.empty() ? classname : file_attr;
  while (path.starts_with("./")) path.erase(0, 2);
  if (fs::path(path).is_absolute() && files_.find) path = files_.find(path);  // a runner that prints absolute paths
  if (!path.empty() && exists(path)) {
    o.file = path;
  } else {
    out_.warnings.push_back(where + clip(file_attr.empty() ? classname : file_attr, kNameInWarning) +
                            " is not a test file in " + files_.name + "; not read");
    path = file_attr.empty() ? classname : file_attr;
  }
  o.test_id = path;
  if (!file_attr.empty() && !classname.empty() && classname != tc.name) o.test_id += " > " + classname;
  o.test_id += " > " + tc.name;
  out_.outcomes.push_back(std::move(o));
}

// pytest (classname the dotted module and classes, `file` when written) and Java (classname the class, found as a
// file under any source root).
void JunitStream::read_python_or_java_test(const TestcaseRead& tc, TestOutcome o, const std::string& where) {
  const std::string& classname = tc.classname;
  const std::string& test_name = tc.name;
  const std::string& file_attr = tc.file;
  const auto parts = split_dots(classname);
  std::string path;
  size_t module_end = 0;  // parts[0, module_end) name the module
  if (!file_attr.empty()) {
    path = file_attr;
    while (path.starts_with("./")) path.erase(0, 2);
    std::string dotted = path.ends_with(".py") ? path.substr(0, path.size() - 3) : path;
    for (auto& ch : dotted) ch = ch == '/' ? '.' : ch;
    module_end = classname.starts_with(dotted) ? split_dots(dotted).size() : parts.size();
    if (!classname.starts_with(dotted)) {
      // classname may omit the package ("test_a.TestA" for tests/test_a.py): match its module part by file stem.
      const std::string stem = fs::path(path).stem().string();
      module_end = 0;
      for (size_t i = 0; i < parts.size(); ++i)
        if (parts[i] == stem) module_end = i + 1;
      if (module_end == 0) module_end = parts.size();
    }
  } else {
    for (size_t k = parts.size(); k >= 1; --k) {
      const std::string candidate = join(parts, 0, k, "/") + ".py";
      if (exists(candidate)) {
        path = candidate;
        module_end = k;
        break;
      }
    }
  }
  // Java: the class's package path and file, found under any source root.
  std::string java_method;
  if (path.empty() && file_attr.empty() && files_.find) {
    const TestIdParts java = parse_test_id(classname + "#" + test_name, Language::java);
    if (!java.path.empty())
      if (std::string found = files_.find(java.path); !found.empty()) {
        path = found;
        java_method = test_name.ends_with("()") ? test_name.substr(0, test_name.size() - 2) : test_name;
      }
  }
  if (!java_method.empty()) {
    o.file = path;
    o.test_id = classname + "#" + java_method;
    out_.outcomes.push_back(std::move(o));
    return;
  }
  if (!path.empty() && !exists(path)) {
    const bool escapes = fs::path(path).is_absolute() || path.find("..") != std::string::npos;
    out_.warnings.push_back(where + clip(path, kNameInWarning) +
                            (escapes ? " is outside the repository " : " is not in ") + files_.name + "; not read");
    path.clear();
  }
  if (path.empty()) {
    if (file_attr.empty())
      out_.warnings.push_back(where + "no test file for " + clip(classname, kNameInWarning) + " under " + files_.name);
    o.test_id = classname + "::" + test_name;
  } else {
    o.file = path;
    o.test_id = path;
    for (size_t i = module_end; i < parts.size(); ++i) o.test_id += "::" + parts[i];
    o.test_id += "::" + test_name;
  }
  out_.outcomes.push_back(std::move(o));
}

}  // namespace

Result<JunitReport> read_junit(const fs::path& report, const TestFiles& files) {
  JunitStream stream(report.string(), files);
  return stream.read(report);
}

}  // namespace spark
