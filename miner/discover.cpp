#include "base/clock.h"
#include "miner/discover.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "base/files.h"
#include "base/process.h"
#include "base/text.h"
#include "base/work_pool.h"
#include "code/code_structure.h"
#include "code/scope.h"
#include "code/structure_cache.h"
#include "formats/error_message.h"
#include "miner/import_change.h"
#include "miner/project_tests.h"
#include "miner/runner.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

bool is_test_annotation(const std::string& d) {
  return d == "Test" || d == "ParameterizedTest" || d == "RepeatedTest" || d == "TestFactory" || d == "TestTemplate";
}

// Whether another function of `s` holds `f` (a Python test's nested helper is no test).
bool nested(const CodeStructure& s, const FunctionInfo& f) {
  return std::any_of(s.functions.begin(), s.functions.end(), [&](const FunctionInfo& g) {
    return &g != &f && g.start <= f.start && g.end >= f.end && (g.start != f.start || g.end != f.end);
  });
}

std::string file_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::vector<CandidateTest> tests_in_structure(const std::string& path, const std::string& content,
                                              const CodeStructure& s);

// What one scan keeps across commits: most files are the same version from one commit to the next.
struct ScanCache {
  StructureCache structures{512};
  std::unordered_map<uint64_t, std::vector<CandidateTest>> tests;  // by path and content
};

// The candidates of one commit: what its test-code changes can have fixed, read at its parent.
class CandidateFinder {
 public:
  // `limit`: past this many tests the commit is too wide to run (ScanOptions::max_tests), and the search stops.
  CandidateFinder(const GitRepository& repo, const std::string& parent, const TestCodeRule& rule, ScanCache& cache,
                  size_t limit)
      : repo_(repo), parent_(parent), rule_(rule), cache_(cache), limit_(limit ? limit : SIZE_MAX) {}

  bool full() const { return found_.size() > limit_; }

  // The tests the change of `path` (its old version `before`, its new one `after`, `lines` removed or modified) can
  // have fixed.
  void add_for(const std::string& path, const std::string& before, const std::string& after,
               const std::vector<int>& lines) {
    if (full()) return;
    if (rule_.is_test_data(path)) return add_data_readers(path);
    const std::vector<CandidateTest>& tests = tests_of(path, &before);
    if (!tests.empty()) return add_by_scope(path, before, after, tests, lines);
    if (file_name(path) == "conftest.py") return add_conftest_users(path, lines);
    add_importers(path);
  }

  std::vector<CandidateTest> take() { return std::move(found_); }

 private:
  void add(const CandidateTest& t, const std::string& why) {
    if (!seen_.insert(t.test_id).second) return;
    found_.push_back(t);
    found_.back().why = why;
  }

  std::optional<std::string> read(const std::string& path) {
    auto it = content_.find(path);
    if (it != content_.end()) return it->second;
    auto r = repo_.file_at(parent_, path);
    std::optional<std::string> text = r && *r ? std::optional<std::string>(**r) : std::nullopt;
    content_.emplace(path, text);
    return text;
  }

  const std::vector<CandidateTest>& tests_of(const std::string& path, const std::string* content = nullptr) {
    static const std::vector<CandidateTest> kNone;
    std::optional<std::string> text;
    if (!content) {
      text = read(path);
      if (!text) return kNone;
      content = &*text;
    }
    if (!language_of_path(path)) return kNone;
    const uint64_t key = fnv1a64(*content, fnv1a64(path));
    auto it = cache_.tests.find(key);
    if (it != cache_.tests.end()) return it->second;
    const auto s = cache_.structures.get(*content, path);
    return cache_.tests.emplace(key, tests_in_structure(path, *content, *s)).first->second;
  }

  // The parent's test files that hold tests (not `except`).
  std::vector<std::string> test_files(const std::string& except) {
    if (!paths_) {
      auto all = repo_.paths_at(parent_);
      paths_.emplace(all ? std::move(*all) : std::vector<std::string>{});
    }
    std::vector<std::string> out;
    for (const auto& p : *paths_)
      if (p != except && rule_.matches(p) && file_name(p) != "conftest.py") out.push_back(p);
    return out;
  }

  // A test file's own change: the tests whose scope reaches a changed line; a line no test reaches (module-level
  // code) can have broken any of them.
  void add_by_scope(const std::string& path, const std::string& before, const std::string& after,
                    const std::vector<CandidateTest>& tests, const std::vector<int>& lines) {
    // A line in a test's own function is that test's; the others need the scopes (costly in a file of hundreds of
    // tests), unless one of them is module-level code, which any test can reach.
    std::vector<int> others;
    for (const int line : lines) {
      bool own = false;
      for (const auto& t : tests)
        if (line >= t.start && line <= t.end) {
          add(t, "its own lines changed");
          own = true;
        }
      if (!own) others.push_back(line);
    }
    if (others.empty()) return;
    const auto s = cache_.structures.get(before, path);
    // A Python module's changed imports reach the tests that use a name they bind differently, not every test.
    std::set<std::string> names;
    if (s->language == Language::python) {
      const auto imports = python_import_change(before, *s, after, *cache_.structures.get(after, path), others);
      if (!imports.star && !imports.used_at_module_level) {
        std::erase_if(others, [&](int l) { return imports.import_lines.contains(l); });
        names = imports.names;
      }
    }
    const auto module_level = [&](int line) {
      return line < 1 || line > s->line_count || s->function[static_cast<size_t>(line) - 1] == 0;
    };
    bool unknown = std::any_of(others.begin(), others.end(), module_level);
    if (!unknown && (!others.empty() || !names.empty())) {
      std::vector<bool> reached(others.size(), false);
      for (const auto& t : tests) {
        const TestScope scope = estimate_scope(*s, t.test_id, before);
        bool support = false;
        for (size_t i = 0; i < others.size(); ++i) {
          const size_t at = static_cast<size_t>(others[i]) - 1;
          if (at < scope.role.size() && scope.role[at] != ScopeRole::outside && scope.role[at] != ScopeRole::module) {
            support = true;
            reached[i] = true;
          }
        }
        if (support) add(t, "a set-up, fixture or helper it reaches changed");
        if (!names.empty() && uses_names(before, scope, names))
          add(t, "it uses a name whose import changed (" + join_names(names) + ")");
      }
      unknown = std::find(reached.begin(), reached.end(), false) != reached.end();
    }
    if (unknown)
      for (const auto& t : tests) add(t, "a line of its module outside every test changed");
  }

  // Whether the test's own and support lines use one of `names`.
  static bool uses_names(const std::string& content, const TestScope& scope, const std::set<std::string>& names) {
    for (size_t i = 0; i < scope.role.size(); ++i)
      if ((scope.role[i] == ScopeRole::own || scope.role[i] == ScopeRole::support) &&
          uses_any_name(content, static_cast<int>(i + 1), static_cast<int>(i + 1), names))
        return true;
    return false;
  }

  static std::string join_names(const std::set<std::string>& names) {
    std::string out;
    for (const auto& n : names) {
      if (out.size() > 60) return out + ", ...";
      out += (out.empty() ? "" : ", ") + n;
    }
    return out;
  }

  // A test-data file's change: every test of the test files under the same top folder that name it (its file name,
  // or a folder on the way to it: refers_to_data).
  void add_data_readers(const std::string& path) {
    const std::string top = path.substr(0, path.find('/') + 1);
    for (const auto& file : test_files("")) {
      if (full()) return;
      if (!file.starts_with(top)) continue;
      const auto& tests = tests_of(file);
      if (tests.empty()) continue;
      const auto content = read(file);
      if (!content || !refers_to_data(*content, file, path)) continue;
      for (const auto& t : tests) add(t, "its module reads " + path + ", which changed");
    }
  }

  // A conftest.py's change: the tests under its folder whose fixtures and hooks reach a changed line.
  void add_conftest_users(const std::string& path, const std::vector<int>& lines) {
    const std::string folder = folder_of(path);
    const std::set<int> changed(lines.begin(), lines.end());
    for (const auto& file : test_files(path)) {
      if (full()) return;
      if (!folder.empty() && !file.starts_with(folder + "/")) continue;
      if (language_of_path(file) != Language::python) continue;
      const auto& tests = tests_of(file);
      if (tests.empty()) continue;
      const auto content = read(file);
      const auto conftest = read(path);
      if (!content || !conftest) continue;
      // The conftest.py files on the way from the test file up to the changed one: fixtures ask for fixtures.
      std::vector<std::string> chain_paths;
      for (std::string f = folder_of(file);; f = folder_of(f)) {
        const std::string c = f.empty() ? "conftest.py" : f + "/conftest.py";
        if (c != path && read(c)) chain_paths.push_back(c);
        if (f.size() <= folder.size()) break;
      }
      std::vector<std::shared_ptr<const CodeStructure>> parsed{cache_.structures.get(*conftest, path)};
      for (const auto& c : chain_paths) parsed.push_back(cache_.structures.get(*read(c), c));
      std::vector<ParsedFile> conftests{{path, parsed[0].get()}};
      for (size_t i = 0; i < chain_paths.size(); ++i) conftests.push_back({chain_paths[i], parsed[i + 1].get()});
      const auto own = cache_.structures.get(*content, file);
      for (const auto& t : tests) {
        const auto reach = conftest_reach(t.test_id, *own, conftests);
        bool hit = !reach;
        if (reach)
          if (auto it = reach->find(path); it != reach->end())
            hit = std::any_of(it->second.begin(), it->second.end(), [&](int l) { return changed.count(l) > 0; });
        if (hit) add(t, "a fixture or hook of " + path + " it uses changed");
      }
    }
  }

  // A helper module's (or base class's) change: every test of the test files that import it.
  void add_importers(const std::string& path) {
    const auto reader = [this](const std::string& p) { return read(p); };
    TestFiles files;
    files.find = [this](const std::string& tail) {
      test_files("");
      return find_by_tail(*paths_, tail);
    };
    for (const auto& file : test_files(path)) {
      if (full()) return;
      const auto& tests = tests_of(file);
      if (tests.empty()) continue;
      const auto deps = dependency_paths(file, reader, rule_, &files);
      if (std::find(deps.begin(), deps.end(), path) == deps.end()) continue;
      for (const auto& t : tests) add(t, "its module uses " + path + ", which changed");
    }
  }

  const GitRepository& repo_;
  const std::string& parent_;
  const TestCodeRule& rule_;
  ScanCache& cache_;
  size_t limit_;
  std::map<std::string, std::optional<std::string>> content_;
  std::optional<std::vector<std::string>> paths_;
  std::vector<CandidateTest> found_;
  std::set<std::string> seen_;
};

}  // namespace

unsigned shard_of(const std::string& sha, unsigned shards) {
  if (shards <= 1) return 0;
  return static_cast<unsigned>(std::stoul(sha.substr(0, 8), nullptr, 16) % shards);
}

std::vector<CandidateTest> tests_in_file(const std::string& path, const std::string& content) {
  const auto language = language_of_path(path);
  if (!language) return {};
  return tests_in_structure(path, content, analyze_code(content, *language, path));
}

namespace {

std::vector<CandidateTest> tests_in_structure(const std::string& path, const std::string& content,
                                              const CodeStructure& s) {
  std::vector<CandidateTest> out;
  const auto language = language_of_path(path);
  if (!language) return out;
  // pytest collects classes named Test* and, whatever their name, unittest's TestCase classes.
  std::set<std::string> unittest_classes;
  if (*language == Language::python) {
    const auto lines = split_lines(content);
    for (const auto& c : s.classes)
      if (c.start >= 1 && static_cast<size_t>(c.start) <= lines.size() &&
          lines[static_cast<size_t>(c.start) - 1].find("TestCase") != std::string_view::npos)
        unittest_classes.insert(c.name);
  }
  std::set<std::string> ids;
  for (const auto& f : s.functions) {
    if (f.name.empty()) continue;
    CandidateTest t;
    t.file = path;
    t.function = f.name;
    t.start = f.start;
    t.end = f.end;
    if (*language == Language::python) {
      if (!f.name.starts_with("test") || nested(s, f)) continue;
      std::string classes = f.class_name;
      bool test_classes = true;
      for (size_t from = 0; from <= classes.size() && !classes.empty();) {
        const size_t dot = std::min(classes.find('.', from), classes.size());
        const std::string name = classes.substr(from, dot - from);
        test_classes &= name.starts_with("Test") || unittest_classes.count(name) > 0;
        from = dot + 1;
      }
      if (!test_classes) continue;
      size_t at;
      while ((at = classes.find('.')) != std::string::npos) classes.replace(at, 1, "::");
      t.klass = classes;
      t.test_id = path + (classes.empty() ? "" : "::" + classes) + "::" + f.name;
    } else if (*language == Language::java) {
      if (std::none_of(f.decorators.begin(), f.decorators.end(), is_test_annotation)) continue;
      t.test_id = test_id_at(s, content, path, f.def_line);
      t.klass = t.test_id.substr(0, t.test_id.find('#'));
    } else {
      if (std::find(f.decorators.begin(), f.decorators.end(), "test") == f.decorators.end()) continue;
      t.test_id = test_id_at(s, content, path, f.def_line);
      t.klass = f.class_name;
    }
    if (ids.insert(t.test_id).second) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

namespace {

// What the scan found at one commit: a candidate, or why it is none (the counts of ScanReport, for this commit).
struct CommitScan {
  std::optional<FixCandidate> candidate;
  bool test_changing = false, mixed = false, additions_only = false, merge = false;
  std::vector<std::string> unreadable;
  std::string too_wide;
};

CommitScan scan_commit(const GitRepository& repo, const CommitInfo& c, const ScanOptions& options, ScanCache& cache) {
  CommitScan out;
  if (cache.tests.size() > 4096) cache.tests.clear();  // bounded; no reference into it outlives a commit
  const std::string at = c.sha.substr(0, 10) + " (" + c.summary + ")";
  auto parents = repo.parents(c.sha);
  if (!parents) {
    out.unreadable.push_back(at + ": " + parents.error().message);
    return out;
  }
  if (parents->empty()) return out;  // the root commit: no parent to run at
  if (parents->size() > 1 && !options.first_parent) {
    out.merge = true;
    return out;
  }
  const std::string& parent = parents->front();
  auto changed = repo.changed_paths(parent, c.sha);
  if (!changed) {
    out.unreadable.push_back(at + ": " + changed.error().message);
    return out;
  }
  // Test code as the setting says and as the project's pytest configuration says, at the parent and the commit.
  const TestCodeRule rule = project_test_code(options.test_code, repo, {parent, c.sha});
  std::vector<std::string> test_paths;
  for (const auto& p : *changed)
    if (rule.matches(p) || rule.is_test_data(p)) test_paths.push_back(p);
  if (test_paths.empty()) return out;
  out.test_changing = true;
  if (options.test_only_fixes && test_paths.size() != changed->size()) {
    out.mixed = true;
    return out;
  }
  CandidateFinder finder(repo, parent, rule, cache, options.max_tests);
  bool removed_any = false;
  for (const auto& path : test_paths) {
    if (finder.full()) break;
    auto before = repo.file_at(parent, path);
    auto after = repo.file_at(c.sha, path);
    if (!before || !after) {
      const Error& e = before ? after.error() : before.error();
      if (is_read_error(e)) out.unreadable.push_back(at + ": " + e.message);
      continue;  // a binary file is no test code to label
    }
    if (!*before || !*after) continue;  // added (nothing to have failed) or removed (nothing to pass)
    auto lines = removed_or_modified_lines(**before, **after, path);
    if (!lines || lines->empty()) continue;
    removed_any = true;
    finder.add_for(path, **before, **after, *lines);
  }
  if (!removed_any) {
    out.additions_only = true;
    return out;
  }
  FixCandidate candidate{c, parent, finder.take()};
  if (options.max_tests && candidate.tests.size() > options.max_tests)
    out.too_wide = at + ": more than " + std::to_string(options.max_tests) + " tests";
  else if (!candidate.tests.empty())
    out.candidate = std::move(candidate);
  return out;
}

}  // namespace

Result<std::vector<FixCandidate>> scan_fix_candidates(const GitRepository& repo, const ScanOptions& options,
                                                      ScanReport& report) {
  const auto start = std::chrono::steady_clock::now();
  report.shallow_boundary = repo.shallow_boundary();
  auto history = repo.history(options.first_parent, options.since, options.until);
  TRY(history);
  std::vector<const CommitInfo*> mine;
  for (const CommitInfo& c : *history)
    if (shard_of(c.sha, options.shards) == options.shard) mine.push_back(&c);
  report.commits = mine.size();
  if (options.first_parent) {
    // What a first-parent walk leaves out: the side branches of its merges.
    auto all = repo.history(false, options.since, options.until);
    TRY(all);
    std::set<std::string> line;
    for (const CommitInfo& c : *history) line.insert(c.sha);
    for (const CommitInfo& c : *all)
      if (!line.count(c.sha) && shard_of(c.sha, options.shards) == options.shard) ++report.side_commits;
    for (const CommitInfo* c : mine)
      if (auto parents = repo.parents(c->sha); parents && parents->size() > 1) ++report.merges_on_line;
  }
  // Blocks of neighbouring commits per worker: a file's versions repeat from one commit to the next, and the worker's
  // cache keeps them parsed. Each worker reads git through its own handle.
  constexpr size_t kBlock = 32;
  const size_t blocks = (mine.size() + kBlock - 1) / kBlock;
  const unsigned threads = std::max(1u, std::min(options.threads, static_cast<unsigned>(blocks)));
  std::vector<CommitScan> scans(mine.size());
  std::vector<std::unique_ptr<GitRepository>> repos(threads);
  std::vector<std::unique_ptr<ScanCache>> caches(threads);
  std::atomic<bool> failed{false};
  Error open_error;
  std::mutex mu;
  parallel_for(blocks, threads, [&](unsigned worker, size_t block) {
    if (!caches[worker]) caches[worker] = std::make_unique<ScanCache>();
    const GitRepository* handle = &repo;
    if (threads > 1) {
      if (!repos[worker]) {
        auto opened = GitRepository::open(repo.workdir());
        if (!opened) {
          std::lock_guard lock(mu);
          open_error = opened.error();
          failed = true;
          return;
        }
        repos[worker] = std::move(*opened);
      }
      handle = repos[worker].get();
    }
    for (size_t i = block * kBlock; i < std::min(mine.size(), (block + 1) * kBlock); ++i)
      scans[i] = scan_commit(*handle, *mine[i], options, *caches[worker]);
  });
  if (failed) return std::unexpected(open_error);
  std::vector<FixCandidate> out;
  for (auto& scan : scans) {
    report.test_changing += scan.test_changing;
    report.mixed_skipped += scan.mixed;
    report.additions_only += scan.additions_only;
    report.merges_skipped += scan.merge;
    for (auto& u : scan.unreadable) report.unreadable.push_back(std::move(u));
    if (!scan.too_wide.empty()) report.too_wide.push_back(std::move(scan.too_wide));
    if (scan.candidate) out.push_back(std::move(*scan.candidate));
  }
  report.seconds = seconds_since(start);
  return out;
}

std::string all_parents_hint(const ScanReport& report) {
  if (report.side_commits == 0 || report.side_commits * 3 < report.commits) return "";
  return "the first-parent line has " + std::to_string(report.merges_on_line) + " merge" +
         (report.merges_on_line == 1 ? "" : "s") + "; " + std::to_string(report.side_commits) +
         " commits of their side branches are not walked, and a test broken and fixed on a side branch is found "
         "only there: --all-parents walks them";
}

bool names_a_test(const std::string& command) {
  return command.find("{test_id}") != std::string::npos || command.find("{file}") != std::string::npos;
}

std::string expand_test_command(const std::string& command, const CandidateTest& test) {
  const std::pair<std::string_view, const std::string*> places[] = {
      {"{test_id}", &test.test_id}, {"{file}", &test.file}, {"{function}", &test.function}, {"{class}", &test.klass}};
  std::string out;
  for (size_t i = 0; i < command.size();) {
    bool replaced = false;
    for (const auto& [name, value] : places)
      if (command.compare(i, name.size(), name) == 0) {
        out += shell_quote(*value);
        i += name.size();
        replaced = true;
        break;
      }
    if (!replaced) out += command[i++];
  }
  return out;
}

namespace {

// One run's result, as discovery reads it.
struct RunOutcome {
  RunVerdict verdict = RunVerdict::failed;
  std::string message;  // the failure's output (failed), or why it could not run (environment)
  bool fresh = false;   // run now (not read from the store)
  bool shared = false;  // run now by another worker
};

// A could-not-run reason that says the test is not there (removed, renamed, deselected): at the commit after a
// failure at the parent, the commit took the test away; nothing it fixed.
bool test_not_there(const std::string& reason) {
  return reason.starts_with("the test runner did not find the test") || reason.starts_with("pytest collected no test");
}

// What a stored outcome says, or nullopt when it must run (none stored, or a could-not-run to retry: asked to, or
// stored by a discovery with another command than `mark` names).
std::optional<RunOutcome> from_store(const std::map<std::string, RecordedOutcome>& stored, const std::string& test,
                                     bool retry_unrunnable, const std::string& mark) {
  auto it = stored.find(test);
  if (it == stored.end()) return std::nullopt;
  const RecordedOutcome& o = it->second;
  switch (o.outcome) {
    case Outcome::passed:
      return RunOutcome{RunVerdict::passed, "", false};
    case Outcome::failed:
    case Outcome::error:
      return RunOutcome{RunVerdict::failed, o.message, false};
    case Outcome::skipped:
      if (o.origin.starts_with(kDiscoverOrigin) && (retry_unrunnable || !o.message.ends_with(mark)))
        return std::nullopt;
      return RunOutcome{RunVerdict::environment,
                        o.message.starts_with(kUnrunnablePrefix) ? unrunnable_reason(o.message)
                                                                 : "skipped by the test runner",
                        false};
  }
  return std::nullopt;
}

// This discovery's runs, shared by its workers: a commit is one candidate's parent and the one before's commit, so
// two workers can need the same (commit, test) at once; the second waits for the first's result instead of running
// it again. The one who claims a key always fulfils it, and waits for nothing in between: no deadlock.
class RunMemo {
 public:
  // The result when another worker has it or is running it (waits for it); nullopt when the caller must run it and
  // fulfil `key`.
  std::optional<RunOutcome> claim(const std::string& key) {
    std::unique_lock lock(mu_);
    auto [it, fresh] = runs_.try_emplace(key);
    if (fresh) return std::nullopt;
    const std::optional<RunOutcome>* slot = &it->second;  // an element's address survives a rehash; `it` need not
    done_.wait(lock, [&] { return slot->has_value(); });
    RunOutcome o = **slot;
    o.fresh = false;  // its runner stores it
    o.shared = true;
    return o;
  }
  void fulfil(const std::string& key, const RunOutcome& o) {
    {
      std::lock_guard lock(mu_);
      runs_[key] = o;
    }
    done_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::unordered_map<std::string, std::optional<RunOutcome>> runs_;  // by sha + "\n" + test id
};

// Whether any run could run its test yet, and the could-not-run results before one could: when these reach
// DiscoverOptions::give_up_after, the command or the environment cannot run this project's tests at all, and the
// discovery stops saying why instead of running every pair.
class GiveUp {
 public:
  explicit GiveUp(size_t after) : after_(after) {}

  // A result (from a run now or from the store); `example` is "sha test".
  void saw(const RunOutcome& o, const std::string& example) {
    std::lock_guard lock(mu_);
    if (ran_ || given_up_) return;
    if (o.verdict != RunVerdict::environment) {
      ran_ = true;
      return;
    }
    seen_.emplace_back(o.message, example);
    known_ += o.fresh ? 0 : 1;
    if (after_ && seen_.size() >= after_) given_up_ = true;
  }
  bool given_up() const { return given_up_; }

  // Why: each reason once with its count and an example, and what to do.
  std::string reason() const {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::string, std::pair<size_t, std::string>>> reasons;  // in order of first sight
    for (const auto& [why, example] : seen_) {
      auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == why; });
      if (it == reasons.end())
        reasons.push_back({why, {1, example}});
      else
        ++it->second.first;
    }
    std::string out = "discover: gave up: the first " + std::to_string(seen_.size()) +
                      " runs could not run their test, and none could: ";
    for (size_t i = 0; i < reasons.size(); ++i)
      out += (i ? "; " : "") + reasons[i].first + " (" + std::to_string(reasons[i].second.first) + "×, e.g. " +
             reasons[i].second.second + ")";
    out += ". Nothing is labelled from such runs: fix the command (--run) or the environment and run again (another "
           "command runs them again";
    if (known_)
      out += "; " + std::to_string(known_) + " of them were stored by an earlier discovery with this command: "
             "--retry-unrunnable runs them again";
    return out + ")";
  }

 private:
  mutable std::mutex mu_;
  size_t after_;
  bool ran_ = false;
  std::atomic<bool> given_up_{false};
  size_t known_ = 0;                                       // of seen_, read from the store
  std::vector<std::pair<std::string, std::string>> seen_;  // (reason, "sha test")
};

// A worker: its repository handle and its two work trees, emptied and filled again per candidate.
class Worker {
 public:
  Worker(const fs::path& repo_path, const fs::path& root, RunMemo& memo, GiveUp& give_up)
      : repo_path_(repo_path), root_(root), memo_(memo), give_up_(give_up) {}

  // Runs a candidate's tests; after each test `flush` stores what it ran (and empties r.outcomes); it returns false
  // when the discovery stops.
  CandidateRuns run(const FixCandidate& c, const DiscoverOptions& options, const DiscoverStore& store,
                    const std::function<bool(CandidateRuns&)>& flush) {
    CandidateRuns r;
    r.candidate = &c;
    auto at_parent = store.stored(c.parent);
    auto at_commit = store.stored(c.commit.sha);
    if (!at_parent || !at_commit) {
      r.store_error = (at_parent ? at_commit.error() : at_parent.error()).message;
      return r;
    }
    trees_[0] = trees_[1] = trees_[2] = "";
    mark_ = unrunnable_command_mark(options.command);
    for (const auto& test : c.tests) {
      if (give_up_.given_up() || stop_signal_caught()) break;
      if (!run_test(r, c, test, *at_parent, *at_commit, options, store)) break;
      if (!flush(r)) break;
    }
    return r;
  }

 private:
  // One test at the parent, then (failed there) at the commit. False when a work tree could not be made.
  bool run_test(CandidateRuns& r, const FixCandidate& c, const CandidateTest& test,
                const std::map<std::string, RecordedOutcome>& at_parent,
                const std::map<std::string, RecordedOutcome>& at_commit, const DiscoverOptions& options,
                const DiscoverStore& store) {
    auto p = outcome(r, c, 0, test, at_parent, options);
    if (!p) return false;
    if (p->verdict == RunVerdict::passed) {
      ++r.pass_at_parent;
      keep(r, c.parent, test, *p, false);
      return true;
    }
    if (p->verdict == RunVerdict::environment) {
      unrunnable(r, c.parent, test, *p, mark_);
      return true;
    }
    auto n = outcome(r, c, 1, test, at_commit, options);
    if (!n) return false;
    if (n->verdict == RunVerdict::environment) {
      keep(r, c.parent, test, *p, false);
      if (test_not_there(n->message)) {
        ++r.gone_at_commit;  // the commit removed (or renamed) the test: nothing it fixed
        store_unrunnable(r, c.commit.sha, test, *n, mark_);
      } else {
        unrunnable(r, c.commit.sha, test, *n, mark_);
      }
      return true;
    }
    if (n->verdict == RunVerdict::failed) {
      ++r.fail_at_commit;
      keep(r, c.parent, test, *p, false);
      keep(r, c.commit.sha, test, *n, false);
      return true;
    }
    // Failed at the parent, passed at the commit: a fix if the parent fails `confirm` times more, in a work tree made
    // anew (what the earlier runs wrote is gone), unless an earlier discovery confirmed it (its failure is stored).
    auto confirmed = store.confirmed ? store.confirmed(c.parent, test.test_id) : Result<bool>(false);
    if (!confirmed) {
      r.store_error = confirmed.error().message;
      return false;
    }
    std::optional<RunOutcome> again;
    if (!*confirmed) trees_[0].clear();
    for (unsigned i = 0; i < options.confirm && !*confirmed; ++i) {
      auto a = outcome(r, c, 0, test, {}, options, /*again=*/true);
      if (!a) return false;
      if (a->verdict == RunVerdict::environment) {
        // Not confirmed: kept as runs (a later discovery confirms again), never a case.
        keep(r, c.parent, test, *p, false);
        keep(r, c.commit.sha, test, *n, false);
        r.unrunnable.emplace_back("a run to confirm the failure at the parent could not run: " + a->message,
                                  c.parent.substr(0, 10) + " " + test.test_id);
        return true;
      }
      if (a->verdict == RunVerdict::passed) {
        again = a;
        break;
      }
    }
    keep(r, c.parent, test, *p, true);
    if (again) {
      ++r.flaky;  // the pass at the same commit closes the failure as flaky
      keep(r, c.parent, test, *again, false);
    } else {
      ++r.fixes;
    }
    keep(r, c.commit.sha, test, *n, false);
    if (!again && options.break_search) return search_break(r, c, test, options, store);
    return true;
  }

  // The fix's test failed at the parent: runs it further back on the first-parent line (the 1st, 2nd, 4th, ...
  // ancestor of the parent, up to options.break_search) until it passes, then bisects between that pass and the
  // nearest failure, so the last pass and the first failure after it are stored side by side. Every run is kept as an
  // outcome that opens nothing. False when a work tree could not be made or the store could not be read.
  bool search_break(CandidateRuns& r, const FixCandidate& c, const CandidateTest& test, const DiscoverOptions& options,
                    const DiscoverStore& store) {
    if (!repo_) {
      auto repo = GitRepository::open(repo_path_);
      if (!repo) {
        r.checkout_error = repo.error().message;
        return false;
      }
      repo_ = std::move(*repo);
    }
    std::vector<std::string> line{c.parent};  // line[k]: the parent's k-th first-parent ancestor
    const auto ancestor = [&](size_t k) -> std::optional<std::string> {
      while (line.size() <= k) {
        auto parents = repo_->parents(line.back());
        if (!parents || parents->empty()) return std::nullopt;
        line.push_back(parents->front());
      }
      return line[k];
    };
    // The verdict at the k-th ancestor: passed, failed, or nullopt (could not run, no such commit, stopped).
    enum class At { passed, failed, unknown, stop };
    const auto at = [&](size_t k) -> At {
      const auto sha = ancestor(k);
      if (!sha) return At::unknown;
      auto stored = store.stored(*sha);
      if (!stored) {
        r.store_error = stored.error().message;
        return At::stop;
      }
      std::optional<RunOutcome> o = from_store(*stored, test.test_id, options.retry_unrunnable, mark_);
      if (o) {
        ++r.reused;
      } else {
        const std::string key = *sha + "\n" + test.test_id;
        o = memo_.claim(key);
        if (o) {
          ++r.reused;
        } else {
          o = run_at(r, *sha, 2, test, options);
          memo_.fulfil(key,
                       o ? *o : RunOutcome{RunVerdict::environment, r.stopped ? "stopped" : r.checkout_error, false});
          if (!o && r.stopped) return At::stop;
          if (!o) {  // an old commit that does not check out ends the search, not the candidate
            r.checkout_error.clear();
            return At::unknown;
          }
          ++r.break_runs;
        }
      }
      if (o->verdict == RunVerdict::environment) {
        store_unrunnable(r, *sha, test, *o, mark_);
        return At::unknown;
      }
      if (o->fresh) keep(r, *sha, test, *o, false);
      return o->verdict == RunVerdict::passed ? At::passed : At::failed;
    };
    size_t failed = 0, passed = 0;  // the nearest known failure, the pass found
    for (size_t k = 1;; k = std::min(k * 2, options.break_search)) {
      const At v = at(k);
      if (v == At::stop) return false;
      if (v == At::unknown) {
        ++r.breaks_unknown;  // the test was not there yet, or that commit cannot run it
        return true;
      }
      if (v == At::passed) {
        passed = k;
        break;
      }
      failed = k;
      if (k >= options.break_search) {
        ++r.breaks_not_found;
        return true;
      }
    }
    while (passed - failed > 1) {
      const size_t mid = failed + (passed - failed) / 2;
      const At v = at(mid);
      if (v == At::stop) return false;
      if (v == At::unknown) break;  // the pass found and the failures known still bound the change
      (v == At::passed ? passed : failed) = mid;
    }
    ++r.breaks_found;
    r.passes_found.emplace_back(c.parent, test.test_id);
    return true;
  }

  // The test's outcome at the parent (side 0) or the commit (side 1): stored, else run. nullopt when the work tree
  // could not be made (r.checkout_error says why).
  // `again`: a confirming run, made however often the test ran there before.
  std::optional<RunOutcome> outcome(CandidateRuns& r, const FixCandidate& c, int side, const CandidateTest& test,
                                    const std::map<std::string, RecordedOutcome>& stored,
                                    const DiscoverOptions& options, bool again = false) {
    const std::string& sha = side == 0 ? c.parent : c.commit.sha;
    // What says the environment cannot run tests: any result but a test the commit took away (after a failure).
    const auto watch = [&](const RunOutcome& o) {
      if (side == 0 || !test_not_there(o.message)) give_up_.saw(o, sha.substr(0, 10) + " " + test.test_id);
    };
    if (auto known = from_store(stored, test.test_id, options.retry_unrunnable, mark_)) {
      ++r.reused;
      watch(*known);
      return known;
    }
    const std::string key = sha + "\n" + test.test_id;
    if (!again)
      if (auto known = memo_.claim(key)) {
        ++r.reused;
        return known;
      }
    auto result = run_at(r, sha, side, test, options);
    if (!again)
      memo_.fulfil(key, result ? *result
                               : RunOutcome{RunVerdict::environment, r.stopped ? "stopped" : r.checkout_error, false});
    if (result) watch(*result);
    return result;
  }

  std::optional<RunOutcome> run_at(CandidateRuns& r, const std::string& sha, int side, const CandidateTest& test,
                                   const DiscoverOptions& options) {
    const fs::path dir = root_ / (side == 0 ? "parent" : side == 1 ? "commit" : "probe");
    if (trees_[side] != sha) {
      const auto start = std::chrono::steady_clock::now();
      if (auto s = prepare(sha, dir); !s) {
        r.checkout_error = "commit " + sha.substr(0, 10) + " does not check out: " + s.error().message;
        return std::nullopt;
      }
      trees_[side] = sha;
      ++r.setups;
      r.setup_seconds += seconds_since(start);
    }
    auto run = run_command(expand_test_command(options.command, test), dir, options.timeout, options.max_output);
    if (run && run->stopped) {
      r.stopped = true;  // says nothing about the test: not stored, and the discovery ends
      return std::nullopt;
    }
    ++r.runs;
    if (!run) return RunOutcome{RunVerdict::environment, run.error().message, true};
    r.run_seconds += run->seconds;
    if (run->timed_out) return RunOutcome{RunVerdict::environment, run->describe(), true};
    const RunClassification verdict = classify_run(*run, test.test_id, dir);
    if (verdict.verdict == RunVerdict::environment) return RunOutcome{RunVerdict::environment, verdict.reason, true};
    std::string message;
    if (verdict.verdict == RunVerdict::failed) {
      message = failure_section(run->output) + (run->signal ? "\n[spark: " + run->describe() + "]\n" : std::string());
      // Paths in the work tree, as the repository names them (node and Java print absolute ones).
      const std::string prefix = dir.string() + "/";
      for (size_t at; (at = message.find(prefix)) != std::string::npos;) message.erase(at, prefix.size());
      cap_error_message(message);
    }
    return RunOutcome{verdict.verdict, message, true};
  }

  Status prepare(const std::string& sha, const fs::path& dir) {
    if (!repo_) {
      auto repo = GitRepository::open(repo_path_);
      TRY(repo);
      repo_ = std::move(*repo);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) return fail(dir.string() + ": cannot empty: " + ec.message());
    return repo_->materialize(sha, dir);
  }

  static void keep(CandidateRuns& r, const std::string& sha, const CandidateTest& test, const RunOutcome& o,
                   bool opens) {
    RecordedOutcome out;
    out.commit = sha;
    out.test_id = test.test_id;
    out.outcome = o.verdict == RunVerdict::passed ? Outcome::passed : Outcome::failed;
    out.message = o.message;
    out.origin = std::string(kDiscoverOrigin) + " at " + sha.substr(0, 10);
    out.opens = opens;
    if (sha == r.candidate->commit.sha) out.time = r.candidate->commit.time;
    r.outcomes.push_back(std::move(out));
  }

  static void unrunnable(CandidateRuns& r, const std::string& sha, const CandidateTest& test, const RunOutcome& o,
                         const std::string& mark) {
    r.unrunnable.emplace_back(o.message, sha.substr(0, 10) + " " + test.test_id);
    r.unrunnable_known += o.fresh || o.shared ? 0 : 1;
    store_unrunnable(r, sha, test, o, mark);
  }

  static void store_unrunnable(CandidateRuns& r, const std::string& sha, const CandidateTest& test,
                               const RunOutcome& o, const std::string& mark) {
    if (!o.fresh) return;
    RecordedOutcome out;
    out.commit = sha;
    out.test_id = test.test_id;
    out.outcome = Outcome::skipped;
    out.message = std::string(kUnrunnablePrefix) + o.message + "\n" + mark;
    out.origin = std::string(kDiscoverOrigin) + " at " + sha.substr(0, 10);
    out.opens = false;
    r.outcomes.push_back(std::move(out));
  }

  fs::path repo_path_, root_;
  RunMemo& memo_;
  GiveUp& give_up_;
  std::string mark_;  // this command's mark on the could-not-run outcomes it stores
  std::unique_ptr<GitRepository> repo_;
  std::string trees_[3];  // the commit each work tree holds: the parent's, the commit's, a break search's
};

}  // namespace

Status discover_fixes(const fs::path& repo_path, const std::vector<FixCandidate>& candidates,
                      const DiscoverOptions& options, const DiscoverStore& store) {
  if (candidates.empty()) return {};
  auto dir = make_temp_dir("spark-discover");
  TRY(dir);
  std::error_code canonical_error;
  fs::path root = fs::canonical(*dir, canonical_error);  // the path Python and node print (a linked TMPDIR resolved)
  if (canonical_error) root = *dir;
  const unsigned jobs = static_cast<unsigned>(std::min<size_t>(std::max(1u, options.jobs), candidates.size()));
  RunMemo memo;
  GiveUp give_up(options.give_up_after);
  // Orphans of the runs (a setsid'd server, a daemon) come back to spark, so each run's clean-up finds them; what is
  // left when the runs are over is killed when `reaper` goes, before the work trees are removed.
  auto reaper = std::make_unique<ChildSubreaper>();
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned w = 0; w < jobs; ++w)
    workers.push_back(std::make_unique<Worker>(repo_path, root / ("w" + std::to_string(w)), memo, give_up));
  std::mutex mu;  // the store: one thread at a time
  Status result;
  std::atomic<bool> stop{false};
  DiscoverStore locked;  // the store's reads, one thread at a time
  locked.stored = [&](const std::string& sha) {
    std::lock_guard lock(mu);
    return store.stored(sha);
  };
  if (store.confirmed)
    locked.confirmed = [&](const std::string& sha, const std::string& test) {
      std::lock_guard lock(mu);
      return store.confirmed(sha, test);
    };
  // Each test's runs are stored as soon as it is decided: a kill loses at most the tests being run.
  const auto flush = [&](CandidateRuns& runs, bool test_done) {
    std::lock_guard lock(mu);
    if (stop) return false;
    if (!runs.outcomes.empty())
      if (auto s = store.store(runs); !s) {
        result = s;
        stop = true;
        return false;
      }
    runs.outcomes.clear();
    if (test_done && store.tested) store.tested(runs);
    return true;
  };
  parallel_for(candidates.size(), jobs, [&](unsigned worker, size_t i) {
    if (stop || give_up.given_up() || stop_signal_caught()) return;
    CandidateRuns runs = workers[worker]->run(candidates[i], options, locked,
                                              [&](CandidateRuns& r) { return flush(r, true); });
    if (!runs.store_error.empty()) {
      std::lock_guard lock(mu);
      result = fail("the knowledge base could not be read: " + runs.store_error);
      stop = true;
      return;
    }
    if (!flush(runs, false) || runs.stopped) return;
    std::lock_guard lock(mu);
    if (store.done) store.done(runs);
  });
  workers.clear();
  reaper.reset();
  std::error_code ec;
  fs::remove_all(root, ec);
  if (const int signal = stop_signal_caught())
    return fail("discover: stopped by " + signal_name(signal) +
                ": the runs under way were ended, with everything they started, and their work trees removed");
  if (result && give_up.given_up()) return fail(give_up.reason());
  return result;
}

std::string unrunnable_command_mark(const std::string& command) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(command)));
  return "[--run " + std::string(hex) + "]";
}

std::string unrunnable_reason(const std::string& message) {
  std::string reason = message.starts_with(kUnrunnablePrefix) ? message.substr(kUnrunnablePrefix.size()) : message;
  if (const size_t at = reason.rfind("\n[--run "); at != std::string::npos && reason.ends_with("]")) reason.erase(at);
  return reason;
}

}  // namespace spark
