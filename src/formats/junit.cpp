#include "formats/junit.h"

#include <pugixml.hpp>

#include <algorithm>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "base/text.h"
#include "code/test_scope.h"
#include "formats/case.h"
#include "formats/error_message.h"

namespace spark {

namespace fs = std::filesystem;

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::passed:
      return "passed";
    case Outcome::failed:
      return "failed";
    case Outcome::error:
      return "error";
    case Outcome::skipped:
      return "skipped";
  }
  return "passed";
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

// Line numbers of byte offsets, by a binary search over the line starts (one pass over the text): a report of 100k
// test cases asks for 100k lines, which a count from the start each time made quadratic.
class LineIndex {
 public:
  explicit LineIndex(const std::string& text) {
    starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') starts_.push_back(i + 1);
  }
  size_t line_at(ptrdiff_t offset) const {
    if (offset <= 0) return 1;
    // The line holding `offset` is the number of line starts at or before it.
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), static_cast<size_t>(offset)) -
                               starts_.begin());
  }

 private:
  std::vector<size_t> starts_;
};

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
  std::unordered_map<std::string, size_t> first;
  std::vector<TestOutcome> kept;
  kept.reserve(report.outcomes.size());
  for (auto& o : report.outcomes) {
    auto [it, inserted] = first.emplace(o.test_id, kept.size());
    if (inserted) {
      kept.push_back(std::move(o));
      continue;
    }
    TestOutcome& k = kept[it->second];
    if (rank(o.outcome) > rank(k.outcome)) std::swap(k, o);  // o: the one not read
    if (rank(o.outcome) > 0)
      report.warnings.push_back(name + ":" + std::to_string(o.report_line) + ": " + o.test_id + " is reported again (" +
                                (o.outcome == Outcome::failed ? "failed: " : "error: ") +
                                clip(first_line(o.message), 120) + "); the " +
                                (k.outcome == Outcome::failed ? "failure" : "error") + " at line " +
                                std::to_string(k.report_line) + " is read");
  }
  report.outcomes = std::move(kept);
}

}  // namespace

Result<JunitReport> read_junit(const fs::path& report, const fs::path& root) {
  return read_junit(report, files_under(root));
}

Result<JunitReport> read_junit(const fs::path& report, const TestFiles& files) {
  auto text = read_file(report);
  if (!text) return std::unexpected(text.error());
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed =
      doc.load_buffer(text->data(), text->size(), pugi::parse_default | pugi::parse_ws_pcdata_single);
  const std::string name = report.string();
  const LineIndex lines(*text);
  if (!parsed)
    return fail(name + ":" + std::to_string(lines.line_at(parsed.offset)) +
                ": not a readable JUnit report: " + parsed.description());
  // Element offsets, to name the line of each <testcase>.
  const auto line_of = [&](const pugi::xml_node& n) { return lines.line_at(n.offset_debug()); };
  const pugi::xml_node top = doc.document_element();
  const std::string top_name = top.name();
  if (top_name != "testsuites" && top_name != "testsuite")
    return fail(name + ":" + std::to_string(line_of(top)) + ": not a JUnit report: the root element is <" + top_name +
                ">, not <testsuites> or <testsuite>");
  JunitReport out;
  // Each path is looked up once (a look-up resolves it on disk or in git objects; 100k test cases name few files).
  std::unordered_map<std::string, bool> known;
  const auto exists = [&](const std::string& path) {
    auto [it, fresh] = known.try_emplace(path, false);
    if (fresh) it->second = files.exists(path);
    return it->second;
  };
  std::vector<pugi::xml_node> suites;
  // A <testsuite> root, or a <testsuites> root holding test cases itself (node:test's top-level tests).
  if (top_name == "testsuite" || top.child("testcase")) suites.push_back(top);
  // Suites may nest (some runners); walk them all, depth first in document order, without recursion (a report nested
  // 50,000 suites deep overflowed the stack).
  std::vector<pugi::xml_node> pending;
  for (pugi::xml_node s = top.last_child(); s; s = s.previous_sibling())
    if (std::string_view(s.name()) == "testsuite") pending.push_back(s);
  while (!pending.empty()) {
    const pugi::xml_node s = pending.back();
    pending.pop_back();
    suites.push_back(s);
    for (pugi::xml_node c = s.last_child(); c; c = c.previous_sibling())
      if (std::string_view(c.name()) == "testsuite") pending.push_back(c);
  }
  for (const pugi::xml_node& suite : suites) {
    std::optional<int64_t> time;
    if (const char* ts = suite.attribute("timestamp").as_string(nullptr); ts && *ts) {
      auto t = parse_iso8601(ts);
      if (!t) t = parse_iso8601(std::string(ts) + "Z");  // pytest writes local time without a zone
      if (t) time = *t;
    }
    for (pugi::xml_node tc : suite.children("testcase")) {
      TestOutcome o;
      o.time = time;
      o.report_line = line_of(tc);
      const std::string where = name + ":" + std::to_string(o.report_line) + ": ";
      const std::string classname = tc.attribute("classname").as_string();
      const std::string test_name = tc.attribute("name").as_string();
      const std::string file_attr = tc.attribute("file").as_string();
      if (test_name.empty() && classname.empty()) {
        out.warnings.push_back(where + "a <testcase> without classname and name; skipped");
        continue;
      }
      const pugi::xml_node failure = tc.child("failure"), error = tc.child("error"), skipped = tc.child("skipped");
      pugi::xml_node detail;
      if (failure)
        o.outcome = Outcome::failed, detail = failure;
      else if (error)
        o.outcome = Outcome::error, detail = error;
      else if (skipped)
        o.outcome = Outcome::skipped, detail = skipped;
      if (failure && error)
        out.warnings.push_back(where + "a <testcase> with both a <failure> and an <error> (" +
                               clip(first_line(error.attribute("message").as_string()), 120) +
                               "); the <failure> is read");
      if (detail) {
        const std::string message = detail.attribute("message").as_string();
        const std::string body = detail.text().as_string();
        o.message = body.empty() ? message : body;
        if (!message.empty() && !body.empty() && body.find(message) == std::string::npos)
          o.message = message + "\n" + body;
      }
      // pytest's collection error: classname "", name "tests.test_x" (the module), message "collection failure".
      if (classname.empty()) {
        o.collection_error = true;
        const auto parts = split_dots(test_name);
        const std::string path = file_attr.empty() ? join(parts, 0, parts.size(), "/") + ".py" : file_attr;
        if (exists(path))
          o.file = path;
        else
          out.warnings.push_back(where + "collection error of " + test_name + ": no test file " + path + " in " +
                                 files.name);
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
        out.outcomes.push_back(std::move(o));
        continue;
      }
      // node:test's reporter: classname "test", no file; the describe blocks are the enclosing <testsuite>s. The file
      // is the one test file that holds all those names as string literals.
      if (classname == "test" && file_attr.empty() && !exists("test.py")) {
        std::vector<std::string> names;
        for (pugi::xml_node p = tc.parent(); p && std::string_view(p.name()) == "testsuite"; p = p.parent())
          names.emplace_back(p.attribute("name").as_string());
        std::reverse(names.begin(), names.end());
        names.push_back(test_name);
        const std::string title = join(names, 0, names.size(), " > ");
        std::vector<std::string> holders = files.holding ? files.holding(names) : std::vector<std::string>{};
        std::sort(holders.begin(), holders.end());  // a folder lists its files in no set order
        if (holders.size() == 1) {
          o.file = holders.front();
          o.test_id = o.file + " > " + title;
        } else {
          out.warnings.push_back(where + "node:test names no file for \"" + title + "\", and " +
                                 (holders.empty() ? std::string("no test file in ") + files.name + " holds"
                                                  : std::to_string(holders.size()) + " test files (" + holders[0] +
                                                        ", " + holders[1] + (holders.size() > 2 ? ", …" : "") +
                                                        ") hold") +
                                 " its names; not read");
          o.test_id = title;
        }
        out.outcomes.push_back(std::move(o));
        continue;
      }
      // JavaScript/TypeScript: jest-junit (a `file` attribute; classname the suites when configured as docs/MINER.md
      // says), Vitest (classname the file, name "suite > case").
      const auto js_file = [](const std::string& p) {
        const auto l = language_of_path(p);
        return l == Language::javascript || l == Language::typescript;
      };
      if (js_file(file_attr) || (file_attr.empty() && js_file(classname))) {
        std::string path = file_attr.empty() ? classname : file_attr;
        while (path.starts_with("./")) path.erase(0, 2);
        if (fs::path(path).is_absolute() && files.find) path = files.find(path);  // a runner that prints absolute paths
        if (!path.empty() && exists(path)) {
          o.file = path;
        } else {
          out.warnings.push_back(where + (file_attr.empty() ? classname : file_attr) + " is not a test file in " +
                                 files.name + "; not read");
          path = file_attr.empty() ? classname : file_attr;
        }
        o.test_id = path;
        if (!file_attr.empty() && !classname.empty() && classname != test_name) o.test_id += " > " + classname;
        o.test_id += " > " + test_name;
        out.outcomes.push_back(std::move(o));
        continue;
      }
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
      if (path.empty() && file_attr.empty() && files.find) {
        const TestIdParts java = parse_test_id(classname + "#" + test_name, Language::java);
        if (!java.path.empty())
          if (std::string found = files.find(java.path); !found.empty()) {
            path = found;
            java_method = test_name.ends_with("()") ? test_name.substr(0, test_name.size() - 2) : test_name;
          }
      }
      if (!java_method.empty()) {
        o.file = path;
        o.test_id = classname + "#" + java_method;
        out.outcomes.push_back(std::move(o));
        continue;
      }
      if (!path.empty() && !exists(path)) {
        const bool escapes = fs::path(path).is_absolute() || path.find("..") != std::string::npos;
        out.warnings.push_back(where + path + (escapes ? " is outside the repository " : " is not in ") + files.name +
                               "; not read");
        path.clear();
      }
      if (path.empty()) {
        if (file_attr.empty()) out.warnings.push_back(where + "no test file for " + classname + " under " + files.name);
        o.test_id = classname + "::" + test_name;
      } else {
        o.file = path;
        o.test_id = path;
        for (size_t i = module_end; i < parts.size(); ++i) o.test_id += "::" + parts[i];
        o.test_id += "::" + test_name;
      }
      out.outcomes.push_back(std::move(o));
    }
  }
  merge_repeated_tests(out, name);
  return out;
}

}  // namespace spark
