#include "miner/miner.h"

#include <fnmatch.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/names.h"
#include "base/text.h"
#include "code/scope.h"
#include "formats/config.h"
#include "formats/error_message.h"
#include "miner/change_since.h"
#include "miner/project_tests.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

bool is_hex_sha(const std::string& s) {
  if (s.size() < 7 || s.size() > 40) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// Where `path` starts a folder or file: 0 and after each '/'.
std::vector<size_t> part_starts(const std::string& path) {
  std::vector<size_t> out{0};
  for (size_t i = 0; i < path.size(); ++i)
    if (path[i] == '/') out.push_back(i + 1);
  return out;
}

bool glob_matches(const std::string& glob, const std::string& path) {
  if (glob.find('/') == std::string::npos) return ::fnmatch(glob.c_str(), fs::path(path).filename().c_str(), 0) == 0;
  if (glob.ends_with("/**")) {
    // Under a folder (one or more parts) at any depth: some run of whole folder names matches it.
    const std::string dir = glob.substr(0, glob.size() - 3);
    const auto starts = part_starts(path);
    for (size_t a : starts)
      for (size_t b : starts)
        if (b > a && ::fnmatch(dir.c_str(), path.substr(a, b - 1 - a).c_str(), FNM_PATHNAME) == 0) return true;
    return false;
  }
  if (glob.starts_with("**/")) {
    const std::string rest = glob.substr(3);
    for (size_t a : part_starts(path))
      if (::fnmatch(rest.c_str(), path.c_str() + a, FNM_PATHNAME) == 0) return true;
    return false;
  }
  return ::fnmatch(glob.c_str(), path.c_str(), FNM_PATHNAME) == 0;
}

}  // namespace

namespace {

// The comma-separated globs of `text`, trimmed, empty ones left out.
std::vector<std::string> split_globs(const std::string& text) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (auto glob = trim(std::string_view(text).substr(start, comma - start)); !glob.empty()) out.emplace_back(glob);
    start = comma + 1;
  }
  return out;
}

// The registry's default of `mine.test_code`.
std::string default_test_code() {
  for (const auto& k : config_keys())
    if (k.key == "mine.test_code") return k.default_value;
  return "";
}

}  // namespace

TestCodeRule::TestCodeRule() : globs_(split_globs(default_test_code())) {}

Result<TestCodeRule> TestCodeRule::parse(const std::string& globs) {
  TestCodeRule rule;
  rule.globs_ = split_globs(globs);
  for (const auto& glob : rule.globs_)
    if (glob.starts_with("/") || glob == ".." || glob.starts_with("../") || glob.find("/../") != std::string::npos ||
        glob.ends_with("/.."))
      return fail("mine.test_code: \"" + glob + "\" is not a glob of paths inside the repository");
  if (rule.globs_.empty())
    return fail("mine.test_code: no glob given (the default is \"" + default_test_code() + "\")");
  return rule;
}

bool TestCodeRule::matches(const std::string& path) const {
  if (!language_of_path(path)) return false;
  return std::any_of(globs_.begin(), globs_.end(), [&](const std::string& g) { return glob_matches(g, path); });
}

bool TestCodeRule::is_test_data(const std::string& path) const {
  if (language_of_path(path)) return false;
  const std::string name = fs::path(path).filename().string();
  if (name.empty() || name.starts_with(".") || name.ends_with(".pyc") || path.find("__pycache__/") != std::string::npos)
    return false;
  return std::any_of(globs_.begin(), globs_.end(),
                     [&](const std::string& g) { return g.ends_with("/**") && glob_matches(g, path); });
}

TestCodeRule TestCodeRule::with_globs(const std::vector<std::string>& more) const {
  TestCodeRule rule = *this;
  for (const auto& glob : more) {
    if (glob.empty() || glob.starts_with("/") || glob == ".." || glob.starts_with("../") ||
        glob.find("/../") != std::string::npos || glob.ends_with("/.."))
      continue;
    if (std::find(rule.globs_.begin(), rule.globs_.end(), glob) == rule.globs_.end()) rule.globs_.push_back(glob);
  }
  return rule;
}

Result<std::vector<RecordedOutcome>> read_outcomes_jsonl(const fs::path& path) {
  auto text = read_file(path);
  TRY(text);
  std::vector<RecordedOutcome> out;
  size_t line_no = 0;
  for (std::string_view line : split_lines(*text)) {
    ++line_no;
    if (is_blank(line)) continue;
    const std::string where = path.string() + ":" + std::to_string(line_no) + ": ";
    if (auto deep = json_too_deep(line)) return fail(where + json_too_deep_message(*deep));
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail(where + "not a JSON object");
    for (const char* key : {"commit", "test_id", "outcome"})
      if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
        return fail(where + "\"" + key + "\" must be a non-empty string");
    RecordedOutcome o;
    o.commit = j["commit"].get<std::string>();
    if (!is_hex_sha(o.commit)) return fail(where + "commit \"" + o.commit + "\" is not a hex sha");
    o.test_id = bounded_test_id(j["test_id"].get<std::string>());
    auto oc = parse_outcome(j["outcome"].get<std::string>());
    if (!oc) return fail(where + oc.error().message);
    o.outcome = *oc;
    if (j.contains("time") && !j["time"].is_null()) {
      if (!j["time"].is_string()) return fail(where + "\"time\" must be an ISO-8601 string");
      auto t = parse_iso8601(j["time"].get<std::string>());
      if (!t) return fail(where + "time: " + t.error().message);
      o.time = *t;
    }
    if (j.contains("message") && j["message"].is_string()) {
      o.message = j["message"].get<std::string>();
      cap_error_message(o.message);
    }
    o.origin = path.string() + ":" + std::to_string(line_no);
    out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<RecordedOutcome>> read_outcomes_junit(const fs::path& path, const std::string& commit,
                                                         const GitRepository& repo,
                                                         std::vector<std::string>* warnings) {
  std::string sha = commit;
  if (sha.empty()) {
    sha = path.stem().string();
    if (!is_hex_sha(sha))
      return fail(path.string() + ": which commit is this report of? Name the file <sha>.xml or give --commit");
  }
  auto report = read_junit(path, test_files_at(repo, sha));
  TRY(report);
  if (warnings) warnings->insert(warnings->end(), report->warnings.begin(), report->warnings.end());
  // The report's outcomes are moved, not copied: a report of millions of tests is held once.
  std::vector<RecordedOutcome> out;
  out.reserve(report->outcomes.size());
  for (auto& t : report->outcomes) {
    RecordedOutcome o;
    o.commit = sha;
    o.test_id = std::move(t.test_id);
    o.outcome = t.outcome;
    o.message = std::move(t.message);
    o.time = t.time;
    o.origin = path.string() + ":" + std::to_string(t.report_line);
    out.push_back(std::move(o));
    t = TestOutcome();
  }
  return out;
}

TestFiles test_files_at(const GitRepository& repo, const std::string& commit) {
  const auto full = repo.resolve(commit);
  const bool bare = repo.bare();
  const fs::path workdir = repo.workdir();
  std::string name = full ? "commit " + full->substr(0, 10) + " of " + workdir.string() : workdir.string();
  if (full && !bare) name += " (or its work tree)";
  const std::string sha = full ? *full : "";
  // The commit's paths, listed once; the work tree (a file not committed yet), listed once when first needed.
  auto listed = std::make_shared<std::optional<std::vector<std::string>>>();
  const auto list = [&repo, sha, listed]() -> const std::vector<std::string>& {
    if (!*listed) {
      auto paths = sha.empty() ? Result<std::vector<std::string>>(std::vector<std::string>{}) : repo.paths_at(sha);
      listed->emplace(paths ? std::move(*paths) : std::vector<std::string>{});
    }
    return **listed;
  };
  auto tree = std::make_shared<std::optional<TestFiles>>();
  const auto work_tree = [workdir, tree]() -> const TestFiles& {
    if (!*tree) tree->emplace(files_under(workdir));
    return **tree;
  };
  auto committed = holding_over(list, [&repo, sha](const std::string& path) -> std::optional<std::string> {
    auto content = repo.file_at(sha, path);
    return content && *content ? std::optional<std::string>(std::move(**content)) : std::nullopt;
  });
  return {[&repo, sha, bare, workdir](const std::string& relative) {
            const fs::path rel(relative);
            if (relative.empty() || rel.is_absolute()) return false;
            for (const auto& part : rel)
              if (part == "..") return false;
            if (!sha.empty())
              if (auto content = repo.file_at(sha, rel.lexically_normal().generic_string()); content && *content)
                return true;
            // A test file not committed yet (a CI run of a work tree) is found in the work tree.
            return !bare && inside_root(workdir, relative).has_value();
          },
          name,
          [list, work_tree, bare](const std::string& tail) -> std::string {
            if (std::string found = find_by_tail(list(), tail); !found.empty()) return found;
            return bare ? std::string() : work_tree().find(tail);
          },
          [committed, work_tree, bare](const std::vector<std::string>& names) {
            auto out = committed(names);
            if (out.empty() && !bare) return work_tree().holding(names);
            return out;
          }};
}

namespace {

constexpr Named<FailureStatus> kStatusNames[] = {{FailureStatus::open, "open"},
                                                 {FailureStatus::dismissed, "dismissed"},
                                                 {FailureStatus::expired, "expired"},
                                                 {FailureStatus::labelled, "labelled"},
                                                 {FailureStatus::quarantined, "quarantined"},
                                                 {FailureStatus::accepted, "accepted"},
                                                 {FailureStatus::rejected, "rejected"},
                                                 {FailureStatus::trimmed, "trimmed"},
                                                 {FailureStatus::not_test_fault, "not_test_fault"},
                                                 {FailureStatus::only_additions, "only_additions"},
                                                 {FailureStatus::mixed_fix, "mixed_fix"},
                                                 {FailureStatus::missing_file, "missing_file"},
                                                 {FailureStatus::flaky, "flaky"},
                                                 {FailureStatus::duplicate, "duplicate"}};
static_assert(std::size(kStatusNames) == static_cast<size_t>(FailureStatus::duplicate) + 1);

}  // namespace

std::string status_name(FailureStatus s) { return std::string(name_of(kStatusNames, s)); }

std::optional<FailureStatus> parse_status(const std::string& s) { return value_named(kStatusNames, s); }

bool is_mined(FailureStatus s) {
  return s == FailureStatus::labelled || s == FailureStatus::quarantined || s == FailureStatus::accepted ||
         s == FailureStatus::rejected || s == FailureStatus::trimmed;
}

bool in_corpus(FailureStatus s) {
  return s == FailureStatus::labelled || s == FailureStatus::accepted || s == FailureStatus::trimmed;
}

namespace {

// Every status `keep` holds, in the enum's order.
std::vector<FailureStatus> statuses_where(bool (*keep)(FailureStatus)) {
  std::vector<FailureStatus> out;
  for (int i = 0; i <= static_cast<int>(FailureStatus::duplicate); ++i)
    if (keep(static_cast<FailureStatus>(i))) out.push_back(static_cast<FailureStatus>(i));
  return out;
}

}  // namespace

std::vector<FailureStatus> mined_statuses() { return statuses_where(is_mined); }
std::vector<FailureStatus> corpus_statuses() { return statuses_where(in_corpus); }

bool is_test_path(const std::string& path) {
  static const TestCodeRule rule;
  return rule.matches(path);
}

std::vector<std::string> failure_paths(const std::string& test_id, const std::string& message, const TestFiles* files,
                                       const TestCodeRule* rule) {
  const Language language = language_of_test_id(test_id);
  // A path as the id or a frame names it, as the repository has it: Java's package paths and absolute paths found
  // by their tail.
  const auto resolve = [&](std::string p) {
    while (p.starts_with("./")) p.erase(0, 2);
    if (files && files->find && (p.ends_with(".java") || p.starts_with("/"))) {
      if (std::string found = files->find(p); !found.empty()) return found;
    }
    return p;
  };
  std::vector<std::string> paths = {resolve(parse_test_id(test_id, language).path)};
  for (const auto& fr : parse_traceback(failure_text(message))) {
    const std::string p = resolve(fr.path);
    if ((rule ? rule->matches(p) : is_test_path(p)) && std::find(paths.begin(), paths.end(), p) == paths.end())
      paths.push_back(p);
  }
  return paths;
}

namespace {

// "a/b/c.py" → "a/b/"; "c.py" → "".
std::string folder_prefix_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// `folder` ("a/b/") and each folder above it, up to the top ("").
std::vector<std::string> folders_up(std::string folder) {
  std::vector<std::string> out{folder};
  while (!folder.empty()) {
    folder.pop_back();
    folder = folder_prefix_of(folder);
    out.push_back(folder);
  }
  return out;
}

// The modules a Python file imports, as paths without ".py" ("pkg/helpers"), each with how many folders up a
// relative import starts (-1: absolute). `from a import b` gives "a" and "a/b" (b may be a module).
std::vector<std::pair<std::string, int>> python_imports(std::string_view text) {
  std::vector<std::pair<std::string, int>> out;
  const auto dotted = [](std::string_view name) {
    std::string p(trim(name));
    std::replace(p.begin(), p.end(), '.', '/');
    return p;
  };
  const auto names = [](std::string_view list) {  // "x as y, (z," → {"x", "z"}
    std::vector<std::string> found;
    std::string cur;
    for (char c : std::string(list) + ",") {
      if (c == ',') {
        std::string_view n = trim(cur);
        if (auto as = n.find(" as "); as != std::string_view::npos) n = trim(n.substr(0, as));
        if (!n.empty() && n != "*") found.emplace_back(n);
        cur.clear();
      } else if (c != '(' && c != ')' && c != '\\') {
        cur += c;
      }
    }
    return found;
  };
  for (std::string_view line : split_lines(text)) {
    const std::string_view t = trim(line);
    if (t.starts_with("import ")) {
      for (const auto& n : names(t.substr(7))) out.emplace_back(dotted(n), -1);
    } else if (t.starts_with("from ")) {
      const auto imp = t.find(" import ");
      if (imp == std::string_view::npos) continue;
      std::string_view mod = trim(t.substr(5, imp - 5));
      int up = -1;
      if (mod.starts_with('.')) {
        up = 0;
        while (mod.starts_with('.')) {
          ++up;
          mod.remove_prefix(1);
        }
        --up;  // "." is the file's own folder
      }
      const std::string base = dotted(mod);
      if (!base.empty()) out.emplace_back(base, up);
      for (const auto& n : names(t.substr(imp + 8)))
        out.emplace_back(base.empty() ? dotted(n) : base + "/" + dotted(n), up);
    }
  }
  return out;
}

// Java: `import com.x.Helper;` as "com/x/Helper.java", and the class a test extends as "Base.java".
std::vector<std::string> java_imports(std::string_view text, std::vector<std::string>& extended) {
  std::vector<std::string> out;
  for (std::string_view line : split_lines(text)) {
    std::string_view t = trim(line);
    if (t.starts_with("import ") && !t.starts_with("import static ") && t.ends_with(";")) {
      std::string p(trim(t.substr(7, t.size() - 8)));
      if (p.ends_with(".*")) continue;
      std::replace(p.begin(), p.end(), '.', '/');
      out.push_back(p + ".java");
    }
    if (auto ext = t.find(" extends "); ext != std::string_view::npos && t.find("class ") != std::string_view::npos) {
      std::string_view rest = t.substr(ext + 9);
      size_t n = 0;
      while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
      if (n) extended.emplace_back(std::string(rest.substr(0, n)) + ".java");
    }
  }
  return out;
}

// JavaScript/TypeScript: relative module specifiers of `require('./x')`, `import … from './x'`, `import './x'`.
std::vector<std::string> js_imports(std::string_view text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size(); ++at) {
    const char q = text[at];
    if (q != '\'' && q != '"') continue;
    if (at + 1 >= text.size() || text[at + 1] != '.') continue;
    const size_t end = text.find(q, at + 1);
    if (end == std::string_view::npos) break;
    const std::string_view before = trim(text.substr(at >= 12 ? at - 12 : 0, at >= 12 ? 12 : at));
    if (before.ends_with("require(") || before.ends_with("from") || before.ends_with("import") ||
        before.ends_with("import("))
      out.emplace_back(text.substr(at + 1, end - at - 1));
    at = end;
  }
  return out;
}

// "a/b/../c.js" → "a/c.js"; "" when it leaves the top.
std::string normal_path(const std::string& path) {
  const std::string n = fs::path(path).lexically_normal().generic_string();
  return n.starts_with("..") || n.starts_with("/") ? "" : n;
}

}  // namespace

std::vector<std::string> dependency_paths(const std::string& test_path,
                                          const std::function<std::optional<std::string>(const std::string&)>& read,
                                          const TestCodeRule& rule, const TestFiles* files) {
  std::vector<std::string> out;
  const auto add = [&](const std::string& p) {
    if (p.empty() || p == test_path || !rule.matches(p) || std::find(out.begin(), out.end(), p) != out.end())
      return false;
    if (!read(p)) return false;
    out.push_back(p);
    return true;
  };
  const auto text = read(test_path);
  if (!text) return out;
  const auto language = language_of_path(test_path);
  const std::string home = folder_prefix_of(test_path);
  if (language == Language::python) {
    std::vector<std::string> importers{test_path};
    for (const auto& folder : folders_up(home))
      if (add(folder + "conftest.py")) importers.push_back(folder + "conftest.py");
    for (const auto& importer : importers) {
      const auto content = importer == test_path ? text : read(importer);
      if (!content) continue;
      const std::string from = folder_prefix_of(importer);
      for (const auto& [module, up] : python_imports(*content)) {
        std::vector<std::string> bases;
        if (up >= 0) {
          const auto above = folders_up(from);
          if (static_cast<size_t>(up) < above.size()) bases.push_back(above[static_cast<size_t>(up)]);
        } else {
          bases = folders_up(from);  // pytest puts the test's folder (or its package's top) on sys.path
        }
        for (const auto& base : bases)
          if (add(base + module + ".py") || add(base + module + "/__init__.py")) break;
      }
    }
  } else if (language == Language::java) {
    std::vector<std::string> extended;
    for (const auto& tail : java_imports(*text, extended))
      if (files && files->find) add(files->find(tail));
    for (const auto& name : extended) add(home + name);
  } else if (language == Language::javascript || language == Language::typescript) {
    for (const auto& spec : js_imports(*text)) {
      const std::string p = normal_path(home + spec);
      if (p.empty() || add(p)) continue;
      for (const char* ext : {".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", "/index.js", "/index.ts"})
        if (add(p + ext)) break;
    }
  }
  return out;
}

std::vector<SourceFile> failure_files(const GitRepository& repo, const std::string& sha, const std::string& test_id,
                                      const std::string& message, std::vector<std::string>* warnings,
                                      const TestCodeRule* dependencies, size_t* own) {
  std::vector<SourceFile> files;
  const TestFiles at = test_files_at(repo, sha);
  std::vector<std::string> paths = failure_paths(test_id, message, &at, dependencies);
  const size_t own_paths = paths.size();
  if (dependencies) {
    const auto read = [&](const std::string& p) -> std::optional<std::string> {
      auto content = repo.file_at(sha, p);
      return content && *content ? std::optional<std::string>(std::move(**content)) : std::nullopt;
    };
    for (auto& p : dependency_paths(paths.front(), read, *dependencies, &at))
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(std::move(p));
  }
  if (own) *own = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto content = repo.file_at(sha, paths[i]);
    if (!content) {
      if (warnings) warnings->push_back(content.error().message);
      continue;
    }
    if (!*content) continue;
    files.push_back({paths[i], std::move(**content)});
    if (own && i < own_paths) ++*own;
  }
  return files;
}

std::string normalize_remote_url(std::string url) {
  // scheme://[user@]host[:port]/path, or scp-like [user@]host:path. A local path (git's rule: no "://" and no ':'
  // before the first '/') or a file:// URL names a folder of one machine, not the project: none.
  if (auto scheme = url.find("://"); scheme != std::string::npos) {
    if (url.compare(0, scheme, "file") == 0) return "";
    url = url.substr(scheme + 3);
  } else if (auto colon = url.find(':'); colon != std::string::npos && url.find('/') > colon) {
    url[colon] = '/';
  } else {
    return "";
  }
  if (auto slash = url.find('/'), at = url.find('@'); at != std::string::npos && at < slash) url = url.substr(at + 1);
  if (auto slash = url.find('/'), port = url.find(':'); port != std::string::npos && port < slash)
    url.erase(port, slash - port);  // host:port/path → host/path
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() > 4 && url.compare(url.size() - 4, 4, ".git") == 0) url.resize(url.size() - 4);
  std::transform(url.begin(), url.begin() + static_cast<std::ptrdiff_t>(std::min(url.find('/'), url.size())),
                 url.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return url;
}

std::string default_project(const GitRepository& repo) {
  if (auto url = normalize_remote_url(repo.config_string("remote.origin.url")); !url.empty()) return url;
  if (auto root = repo.root_commit(); !root.empty()) return "git-" + root.substr(0, 12);
  fs::path wd = repo.workdir();  // an empty repository: nothing better than its folder
  if (!wd.has_filename()) wd = wd.parent_path();
  return wd.filename().string();
}

std::string project_slug(const std::string& project) {
  auto slash = project.find_last_of('/');
  return slash == std::string::npos ? project : project.substr(slash + 1);
}

namespace {

// A file's failing version, or nullopt when the repository has no such file then.
using FailingVersion = std::function<Result<std::optional<std::string>>(const std::string& path)>;

// A conftest.py's changes count for the fixtures this test runs, not for every fixture it holds: the lines of each
// conftest.py among `paths` that the test reaches (conftest_reach). nullopt for a test that is not Python, or when
// its own file (paths.front()) or every conftest.py is absent.
std::optional<std::map<std::string, std::set<int>>> fixture_reach(const std::string& test_id,
                                                                  const std::vector<std::string>& paths,
                                                                  const FailingVersion& failing_version) {
  if (language_of_path(paths.front()) != Language::python) return std::nullopt;
  std::vector<SourceFile> conftests;
  std::optional<std::string> own;
  for (const auto& p : paths) {
    auto content = failing_version(p);
    if (!content || !*content) continue;
    if (p == paths.front())
      own = std::move(**content);
    else if (fs::path(p).filename() == "conftest.py")
      conftests.push_back({p, std::move(**content)});
  }
  std::vector<CodeFile> views;
  views.reserve(conftests.size());
  for (const auto& c : conftests) views.push_back({c.path, c.content});
  if (!own || conftests.empty()) return std::nullopt;
  return conftest_reach(test_id, {paths.front(), *own}, views);
}

// The mined case's record, in the interchange format: the failing files (the first is the test's) and the lines the
// fix removed or modified.
nlohmann::json mined_record(const FailureInput& failure, const CommitInfo& faulty, const CommitInfo& fixed,
                            const std::string& project, const std::vector<SourceFile>& files,
                            const std::vector<LineRef>& faulty_lines,
                            const std::map<LineRef, std::vector<std::string>>& fixes) {
  nlohmann::json record = {{"id", project_slug(project) + "-" + faulty.sha.substr(0, 10) + "-" +
                                      hex64(fnv1a64(failure.test_id)).substr(0, 8)},
                           {"project", project},
                           {"test_id", failure.test_id},
                           {"language", std::string(language_name(language_for(files.front().path, "")))},
                           {"failure_time", format_iso8601(failure.time.value_or(faulty.time))},
                           {"error_message", sanitize_utf8(failure.message)},
                           {"faulty_commit", faulty.sha},
                           {"fixed_commit", fixed.sha},
                           {"source", "history"}};
  record["files"] = nlohmann::json::array();
  for (const auto& f : files) record["files"].push_back({{"path", f.path}, {"content", f.content}});
  record["faulty_lines"] = nlohmann::json::array();
  for (const auto& fl : faulty_lines) {
    nlohmann::json line = {{"path", fl.path}, {"line", fl.line}};
    if (auto it = fixes.find(fl); it != fixes.end()) {
      line["fix"] = nlohmann::json::array();
      for (const auto& text : it->second) line["fix"].push_back(sanitize_utf8(text));
    }
    record["faulty_lines"].push_back(std::move(line));
  }
  return record;
}

// The lines of the test's own file the failing test cannot reach (another test's body, another row of its
// parameter lists), when its function is found there: a fix that mends this test and deletes or edits another one
// labels only this test's lines. Empty when the function is not found (a collection error's id names none).
std::set<int> unreached_lines(const std::string& test_id, const std::string& path, const std::string& content) {
  std::set<int> out;
  const auto language = language_of_path(path);
  if (!language) return out;
  const CodeStructure s = analyze_code(content, *language, path);
  const TestScope scope = estimate_scope(s, test_id, content);
  if (!scope.found) return out;
  for (size_t i = 0; i < scope.role.size(); ++i)
    if (scope.role[i] == ScopeRole::outside) out.insert(static_cast<int>(i + 1));
  return out;
}

// Where the failure was raised, when that is product code the fix changed: the innermost frame of its traceback
// that is a file of the repository at the failing commit, when that file is not test code and the fix changed it.
// Such a failure was the product's, whatever test code the same fix also changed.
std::optional<std::string> raised_in_changed_product_code(const GitRepository& repo, const std::string& message,
                                                          const CommitInfo& faulty,
                                                          const std::vector<std::string>& changed,
                                                          const TestCodeRule& rule) {
  const auto frames = parse_traceback(failure_text(message));
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    std::string path = it->path;
    while (path.starts_with("./")) path.erase(0, 2);
    if (path.empty() || path.starts_with("/") || path.find("..") != std::string::npos) continue;
    auto content = repo.file_at(faulty.sha, path);
    if (!content || !*content) continue;  // not a file of the repository (the standard library, site-packages)
    if (rule.matches(path)) return std::nullopt;  // raised in test code
    if (std::find(changed.begin(), changed.end(), path) == changed.end()) return std::nullopt;
    return path + ":" + std::to_string(it->line);
  }
  return std::nullopt;
}

Labelling settled(FailureStatus status, std::string detail) {
  Labelling out;
  out.status = status;
  out.detail = std::move(detail);
  return out;
}

// Each of `lines`' replacement in the fix (line_fixes), kept as text: one holding bytes that are not UTF-8 is left out
// (the line stays labelled).
void keep_fixes(const std::string& path, const std::vector<int>& lines,
                std::map<int, std::vector<std::string>>& replacements,
                std::map<LineRef, std::vector<std::string>>& fixes) {
  for (int l : lines)
    if (auto it = replacements.find(l);
        it != replacements.end() && std::none_of(it->second.begin(), it->second.end(), [](const std::string& t) {
          return find_invalid_utf8(t).has_value();
        }))
      fixes[{path, l}] = std::move(it->second);
}

// What settles a failure before any diff is read: with `test_only_fixes`, a fix range that changed other code than
// test code (`mixed_fix`); a failure raised in product code the fix changed (`not_test_fault`).
std::optional<Labelling> settled_by_the_range(const GitRepository& repo, const FailureInput& failure,
                                              const CommitInfo& faulty, const std::vector<std::string>& changed,
                                              const TestCodeRule& rule, bool test_only_fixes) {
  Labelling out;
  if (test_only_fixes)
    for (const auto& p : changed)
      if (!rule.matches(p) && !rule.is_test_data(p)) {
        out.status = FailureStatus::mixed_fix;
        out.detail = "the fix also changed " + p;
        return out;
      }
  if (auto raised = raised_in_changed_product_code(repo, failure.message, faulty, changed, rule)) {
    out.status = FailureStatus::not_test_fault;
    out.detail = "raised in product code (" + *raised + "), which the fix changed";
    return out;
  }
  return std::nullopt;
}

// The test data among `changed` that one of `readers` (the test's file and the files it depends on) names: data the
// test reads. A data file too large to be a case's file, or not UTF-8, is left out.
std::vector<std::string> data_read_by(const std::vector<std::string>& readers, const std::vector<std::string>& changed,
                                      const TestCodeRule& rule,
                                      const std::function<std::optional<std::string>(const std::string&)>& read) {
  std::vector<std::string> out;
  for (const auto& data : changed) {
    if (!rule.is_test_data(data) || std::find(readers.begin(), readers.end(), data) != readers.end()) continue;
    if (auto text = read(data); !text || !test_file_too_large(*text).empty() || find_invalid_utf8(*text)) continue;
    for (const auto& r : readers)
      if (auto text = read(r); text && refers_to_data(*text, r, data)) {
        out.push_back(data);
        break;
      }
  }
  return out;
}

// The mined case from its record, with what changed since the test's last pass when the failure knows one
// (change_since.h). A change the case reader refuses costs the change, never the case. Fails only for a git object
// that cannot be read (is_read_error) and for a record the reader refuses (the caller names the failure).
Result<Result<Case>> mined_case(const GitRepository& repo, const FailureInput& failure, const std::string& faulty,
                                const TestCodeRule& rule, const std::vector<SourceFile>& files, nlohmann::json record) {
  if (!failure.last_pass.empty()) {
    auto change = change_since(repo, failure.last_pass, faulty, failure.break_commit, files, {rule});
    if (!change && is_read_error(change.error())) return std::unexpected(change.error());
    if (change) {  // else (a last pass off the failing commit's history) the case has none
      nlohmann::json with_change = record;
      put_change(with_change, *change);
      if (auto c = case_from_json(std::move(with_change))) return Result<Case>(std::move(*c));
    }
  }
  return case_from_json(std::move(record));
}

}  // namespace

Result<Labelling> label_failure(const GitRepository& repo, const FailureInput& failure, const CommitInfo& faulty,
                                const CommitInfo& fixed, const LabelOptions& options) {
  Labelling out;
  // Test code as the setting says, and as the project's own configuration says at either commit.
  const TestCodeRule rule = project_test_code(options.test_code, repo, {faulty.sha, fixed.sha});
  const TestFiles at = test_files_at(repo, faulty.sha);
  std::vector<std::string> paths = failure_paths(failure.test_id, failure.message, &at, &rule);
  if (auto text_file = doctest_text_file(failure.test_id)) paths.front() = *text_file;  // a doctest's own file
  auto changed_files = repo.changed_paths(faulty.sha, fixed.sha);
  TRY(changed_files);
  if (auto settled = settled_by_the_range(repo, failure, faulty, *changed_files, rule, options.test_only_fixes))
    return *settled;
  std::vector<SourceFile> files;
  std::vector<LineRef> faulty_lines;
  std::map<LineRef, std::vector<std::string>> fixes;  // each faulty line's replacement in the fix
  bool changed = false, have_main = false;
  std::string others_only;  // the test's file, when the fix changed only other tests' lines of it
  // The failing version of a file: the recorded snapshot's, else (a file the snapshot does not hold, or no snapshot)
  // from git objects at the failing commit.
  const FailingVersion failing_version = [&](const std::string& p) -> Result<std::optional<std::string>> {
    if (failure.snapshot)
      for (const auto& f : *failure.snapshot)
        if (f.path == p) return std::optional<std::string>(f.content);
    return repo.file_at(faulty.sha, p);
  };
  // The test code the failure depends on that no traceback names (conftest.py, imported helpers) belongs to the case
  // when the fix changed it.
  std::vector<std::string> dependencies;
  {
    std::optional<Error> unreadable;  // a dependency that cannot be read: no case without it
    const auto read = [&](const std::string& p) -> std::optional<std::string> {
      auto content = failing_version(p);
      if (!content && is_read_error(content.error())) unreadable = content.error();
      return content && *content ? std::move(*content) : std::nullopt;
    };
    for (auto& p : dependency_paths(paths.front(), read, rule, &at))
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) dependencies.push_back(std::move(p));
    if (unreadable) return std::unexpected(with_context(failure.origin + ": ", *unreadable));
    std::vector<std::string> readers = paths;
    readers.insert(readers.end(), dependencies.begin(), dependencies.end());
    for (auto& data : data_read_by(readers, *changed_files, rule, read)) dependencies.push_back(std::move(data));
    if (unreadable) return std::unexpected(with_context(failure.origin + ": ", *unreadable));
  }
  std::vector<std::string> all = paths;
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  const auto reach = fixture_reach(failure.test_id, all, failing_version);
  for (const auto& p : all) {
    const bool dependency = std::find(dependencies.begin(), dependencies.end(), p) != dependencies.end();
    auto b = failing_version(p);
    if (!b) {
      if (p == paths.front() || is_read_error(b.error()))
        return std::unexpected(with_context(failure.origin + ": ", b.error()));
      continue;  // a helper that is no text (binary): not part of the case
    }
    std::optional<std::string> before = std::move(*b);
    if (!before) continue;  // not a file of the repository at that commit
    if (p == paths.front()) have_main = true;
    auto after = repo.file_at(fixed.sha, p);
    TRY(after);
    if (dependency && *after && **after == *before) continue;  // unchanged: not what the fix mended
    if (*after && **after != *before) {
      auto lines = removed_or_modified_lines(*before, **after, p);
      TRY(lines);
      const std::set<int>* reached = nullptr;
      if (reach)
        if (auto it = reach->find(p); it != reach->end()) reached = &it->second;
      if (reached && !lines->empty()) {
        std::erase_if(*lines, [&](int l) { return !reached->contains(l); });
        // A dependency whose changed lines this test cannot run is not part of its case.
        if (dependency && lines->empty()) continue;
      }
      if (p == paths.front() && !lines->empty()) {
        const std::set<int> unreached = unreached_lines(failure.test_id, p, *before);
        std::erase_if(*lines, [&](int l) { return unreached.contains(l); });
        if (lines->empty()) {  // the fix changed only other tests' lines of this file: not this test's code
          others_only = p;
          files.push_back({p, std::move(*before)});
          continue;
        }
      }
      changed = true;
      auto replacements = line_fixes(*before, **after, p);
      TRY(replacements);
      for (int l : *lines) faulty_lines.push_back({p, l});
      keep_fixes(p, *lines, *replacements, fixes);
      out.fixed_files.push_back({p, **after});
    } else if (!*after) {
      // The fix deleted the file: every line of it was removed (of the test's own file, the lines it reaches).
      changed = true;
      const auto lines = split_lines(*before);
      const std::set<int> unreached =
          p == paths.front() ? unreached_lines(failure.test_id, p, *before) : std::set<int>{};
      for (size_t i = 0; i < lines.size(); ++i)
        if (!is_blank(lines[i]) && !unreached.contains(static_cast<int>(i + 1))) {
          faulty_lines.push_back({p, static_cast<int>(i + 1)});
          fixes[{p, static_cast<int>(i + 1)}] = {};  // deleted with its file
        }
      out.fixed_files.push_back({p, ""});
    }
    files.push_back({p, std::move(*before)});
  }
  if (!have_main)
    return settled(FailureStatus::missing_file, paths.front() + " is not in commit " + faulty.sha.substr(0, 10));
  if (!changed)
    return settled(FailureStatus::not_test_fault,
                   others_only.empty()
                       ? "no test file changed between " + faulty.sha.substr(0, 10) + " and " + fixed.sha.substr(0, 10)
                       : "the fix changed only other tests' lines of " + others_only);
  if (faulty_lines.empty()) return settled(FailureStatus::only_additions, "the fix only added lines");
  auto record = mined_record(failure, faulty, fixed, options.project, files, faulty_lines, fixes);
  auto mined = mined_case(repo, failure, faulty.sha, rule, files, std::move(record));
  TRY(mined);
  Result<Case>& built = *mined;
  if (!built) return std::unexpected(Error{failure.origin + ": " + built.error().message});
  out.status = FailureStatus::labelled;
  out.labelled = std::move(*built);
  return out;
}

OutlierRule outlier_rule(const std::vector<size_t>& counts, double sigma) {
  OutlierRule rule;
  rule.sigma = sigma;
  rule.n = counts.size();
  if (counts.empty()) return rule;
  double sum = 0;
  for (size_t n : counts) sum += static_cast<double>(n);
  rule.mean = sum / static_cast<double>(counts.size());
  double var = 0;
  for (size_t n : counts) var += std::pow(static_cast<double>(n) - rule.mean, 2);
  rule.sd = std::sqrt(var / static_cast<double>(counts.size()));
  rule.threshold = rule.mean + sigma * rule.sd;
  return rule;
}

std::string OutlierRule::describe() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "mean %.2f + %.1f x sd %.2f = %.2f faulty lines (over %zu mined case%s)", mean, sigma,
                sd, threshold, n, n == 1 ? "" : "s");
  return buf;
}

Result<std::vector<RecordedOutcome>> read_outcome_files(const std::vector<std::string>& files,
                                                        const std::string& commit, const GitRepository& repo,
                                                        std::vector<std::string>& notes) {
  std::vector<RecordedOutcome> outcomes;
  for (const auto& file : files) {
    auto read = file.ends_with(".xml") ? read_outcomes_junit(file, commit, repo, &notes) : read_outcomes_jsonl(file);
    TRY(read);
    for (auto& o : *read) outcomes.push_back(std::move(o));
  }
  return outcomes;
}

}  // namespace spark
