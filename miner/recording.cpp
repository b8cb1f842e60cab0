#include "miner/recording.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/files.h"
#include "base/process.h"
#include "base/text.h"
#include "code/scope.h"
#include "miner/runner.h"
#include "store/postgres_db.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHookMarker = "# spark post-commit hook";

std::string hook_script(const std::string& spark) {
  return std::string("#!/bin/sh\n") + kHookMarker +
         " (installed by `spark hooks install`; `spark hooks uninstall` removes it)\n"
         "# Runs the hook that was here before, then re-runs the tests with open failures and records the outcome.\n"
         "hook_dir=$(dirname \"$0\")\n"
         "status=0\n"
         "if [ -x \"$hook_dir/post-commit.spark-chained\" ]; then\n"
         "  \"$hook_dir/post-commit.spark-chained\" \"$@\" || status=$?\n"
         "fi\n"
         "spark=" +
         shell_quote(spark) +
         "\n"
         "[ -x \"$spark\" ] || spark=spark\n"
         "\"$spark\" hooks post-commit || echo \"spark: post-commit hook failed (the commit is made)\" >&2\n"
         "exit $status\n";
}

// What the hook asks the test command to run for an open failure of `test_id`, so that the runner can find it: a
// pytest id by its function (`tests/t.py::test_f` for `tests/t.py::test_f[2-3-7]`: the fix may have changed the
// failing row and its id, and all the rows show whether the function passes), or by its file when the function is
// not defined there any more; a collection error by its file; "" when the file is gone. Other ids as they are.
std::string rerun_target(const std::string& test_id, const fs::path& workdir) {
  if (language_of_test_id(test_id) != Language::python) return test_id;
  const TestIdParts parts = parse_test_id(test_id);
  if (parts.path.empty()) return test_id;  // a dotted unittest id
  auto text = read_file(workdir / parts.path);
  if (!text) return "";
  if (parts.function.empty()) return parts.path;
  const auto lines = split_lines(*text);
  const bool defined = std::any_of(lines.begin(), lines.end(), [&](std::string_view line) {
    const std::string_view t = trim(line);
    return t.starts_with("def " + parts.function + "(") || t.starts_with("async def " + parts.function + "(");
  });
  return defined ? test_id.substr(0, test_id.find('[')) : parts.path;
}

}  // namespace

fs::path spool_dir(const std::string& local_dir) { return fs::path(local_dir) / "spool"; }

std::vector<fs::path> spool_files(const std::string& local_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spool_dir(local_dir), ec))
    if (e.path().extension() == ".jsonl") out.push_back(e.path());
  std::sort(out.begin(), out.end());  // names start with the time
  return out;
}

Result<fs::path> spool_outcomes(const std::string& local_dir, const std::vector<RecordedOutcome>& outcomes) {
  std::string text;
  for (const auto& o : outcomes) {
    nlohmann::json j = {{"commit", o.commit}, {"test_id", o.test_id}, {"outcome", outcome_name(o.outcome)}};
    if (o.time) j["time"] = format_iso8601(*o.time);
    if (!o.message.empty()) j["message"] = o.message;
    text += json_text(j) + "\n";
  }
  const fs::path dir = spool_dir(local_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  std::random_device rd;
  char name[96];
  std::snprintf(name, sizeof name, "%lld-%d-%08x.jsonl", static_cast<long long>(now_epoch()),
                static_cast<int>(::getpid()), rd());
  const fs::path path = dir / name;
  TRY(write_file_atomic(path, text));
  return path;
}

Result<StoredReport> store_report(const RecordingStore& where, const GitRepository& repo,
                                  const std::vector<RecordedOutcome>& outcomes, const SyncOptions& options,
                                  const NoteSink& note) {
  std::vector<RecordedOutcome> all;
  std::vector<fs::path> spooled;
  if (where.server) {
    for (const auto& file : spool_files(where.local_dir)) {
      auto read = read_outcomes_jsonl(file);
      if (!read) {
        note("a spooled report is unreadable and stays where it is: " + read.error().message);
        continue;
      }
      spooled.push_back(file);
      all.insert(all.end(), read->begin(), read->end());
    }
  }
  const size_t from_spool = all.size();
  // The report's outcomes are not copied unless spooled ones go with them (a report may hold millions).
  if (from_spool > 0) all.insert(all.end(), outcomes.begin(), outcomes.end());
  const std::vector<RecordedOutcome>& to_store = from_spool > 0 ? all : outcomes;
  const auto t0 = std::chrono::steady_clock::now();
  double delay = 0.5;
  Error error;
  for (int attempt = 1;; ++attempt) {
    bool transient = false;
    auto kb = where.open();
    if (kb) {
      MiningStore store(**kb);
      auto report = store.sync(repo, to_store, options);
      if (report) {
        StoredReport stored;
        stored.sync = std::move(*report);
        // What the sync read of this report's failures (the spooled outcomes come first in what it stored).
        std::vector<FailureSnapshot> own;
        for (auto& snap : stored.sync.snapshots)
          if (snap.outcome >= from_spool) {
            snap.outcome -= from_spool;
            own.push_back(std::move(snap));
          }
        stored.sync.snapshots = std::move(own);
        std::error_code ec;
        for (const auto& f : spooled) fs::remove(f, ec);
        stored.spooled_reports = spooled.size();
        stored.spooled_outcomes = from_spool;
        stored.attempts = attempt;
        return stored;
      }
      error = report.error();
      transient = (*kb)->connection_lost();
    } else {
      error = kb.error();
      transient = where.server && is_transient_connect_error(error.message);
    }
    const double elapsed = seconds_since(t0);
    if (!transient || elapsed + delay > where.retry_seconds) break;
    note(error.message + "; trying again in " + std::to_string(delay).substr(0, 3) + " s");
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay = std::min(delay * 2, 4.0);
  }
  if (where.server && !outcomes.empty()) {
    auto kept = spool_outcomes(where.local_dir, outcomes);
    if (kept)
      note("kept this report's " + std::to_string(outcomes.size()) + " outcome(s) in " + kept->string() +
           "; the next `spark record` that reaches the server stores them");
    else
      note("could not spool the report either: " + kept.error().message);
  }
  return std::unexpected(error);
}

Result<std::vector<std::string>> work_tree_changes(const GitRepository& repo, const std::string& head,
                                                   const std::vector<RecordedOutcome>& outcomes) {
  auto changed = repo.changed_in_work_tree(head);
  TRY(changed);
  std::set<std::string> paths;
  for (auto& p : *changed)
    if (p != ".spark.toml" && !p.ends_with("/.spark.toml")) paths.insert(std::move(p));
  std::set<std::string> asked;
  for (const auto& o : outcomes) {
    const std::string path = parse_test_id(o.test_id, language_of_test_id(o.test_id)).path;
    if (path.empty() || paths.contains(path) || !asked.insert(path).second) continue;
    auto at_head = repo.file_at(head, path);
    if (at_head && !*at_head && path_exists(repo.workdir() / path)) paths.insert(path);
  }
  return std::vector<std::string>(paths.begin(), paths.end());
}

std::vector<OpenTest> group_by_test(const std::vector<StoredFailure>& open) {
  std::vector<OpenTest> out;
  std::map<std::string, size_t> slot;
  for (const auto& f : open) {
    auto [it, fresh] = slot.try_emplace(f.test_id, out.size());
    if (fresh) out.emplace_back();
    out[it->second].failures.push_back(f);
  }
  return out;
}

Result<TipHistory> tip_history(const GitRepository& repo, const std::string& tip) {
  TipHistory h;
  auto head = repo.resolve(tip);
  TRY(head);
  h.head = *head;
  auto commits = repo.history(/*first_parent=*/false, std::nullopt, std::nullopt, h.head);
  TRY(commits);
  h.commits = std::move(*commits);
  for (size_t i = 0; i < h.commits.size(); ++i) h.position[h.commits[i].sha] = i;
  return h;
}

Result<std::vector<std::string>> expire_gone_failures(KnowledgeBase& kb, const GitRepository& repo,
                                                      const std::string& commit) {
  MiningStore store(kb);
  auto open = store.failures({FailureStatus::open});
  TRY(open);
  std::vector<std::string> notes;
  if (open->empty()) return notes;
  auto history = tip_history(repo, commit);
  TRY(history);
  for (const auto& test : group_by_test(*open)) {
    std::vector<StoredFailure> mine;
    for (const auto& f : test.failures)
      if (history->has(f.commit)) mine.push_back(f);
    if (mine.empty()) continue;
    const auto why = test_gone_at(repo, history->head, test.first().test_id);
    if (!why) continue;
    auto closed = store.close_open(mine, FailureStatus::expired, "spark", *why);
    TRY(closed);
    if (*closed)
      notes.push_back("expired " + std::to_string(*closed) + " open failure(s) of " + test.first().test_id + ": " +
                      *why);
  }
  return notes;
}

Result<std::vector<std::string>> rerun_targets(KnowledgeBase& kb, const fs::path& workdir,
                                               std::vector<std::string>& notes) {
  MiningStore store(kb);
  auto open = store.failures({FailureStatus::open});
  TRY(open);
  std::vector<std::string> tests;
  std::set<std::string> seen;
  for (const auto& f : *open) {
    const std::string target = rerun_target(f.test_id, workdir);
    if (target.empty())
      notes.push_back(f.test_id + ": its test file is not in the work tree; not re-run");
    else if (seen.insert(target).second)
      tests.push_back(target);
  }
  return tests;
}

std::vector<std::string> sync_notes(const SyncReport& r, const std::string& verb) {
  std::vector<std::string> notes;
  const auto note = [&](std::string n) { notes.push_back(std::move(n)); };
  for (const auto& w : r.warnings) note(w);
  if (!verb.empty())
    note(verb + " " + plural(r.outcomes, "outcome") + " (new or changed); opened " + plural(r.opened, "failure") +
       (r.closed_flaky ? "; " + plural(r.closed_flaky, "failure") + " closed as flaky (passed at the same commit)"
                       : ""));
  const std::pair<FailureStatus, const char*> order[] = {
      {FailureStatus::labelled, "labelled into the knowledge base"},
      {FailureStatus::quarantined, "quarantined for audit"},
      {FailureStatus::not_test_fault, "fixed outside the test code"},
      {FailureStatus::only_additions, "fixed by additions only"},
      {FailureStatus::mixed_fix, "fixed together with non-test code (--test-only-fixes)"},
      {FailureStatus::missing_file, "without their test file"},
      {FailureStatus::duplicate,
       "the same fault as an earlier failure (the same faulty lines of the same test code, the same fix: counted behind its case)"}};
  std::string settled;
  size_t total = 0;
  for (const auto& [status, text] : order)
    if (auto it = r.settled.find(status); it != r.settled.end() && it->second) {
      settled += (settled.empty() ? "" : ", ") + std::to_string(it->second) + " " + text;
      total += it->second;
    }
  // Open failures are counted by test (one test failing at three commits is one test still failing), with the
  // failures behind them when they are more.
  const bool by_test = r.still_open == r.still_open_tests;
  const std::string of_them = by_test ? " of them" : " of the failures";
  note("settled " + plural(total, "failure") + (settled.empty() ? "" : ": " + settled) + "; " +
       plural(r.still_open_tests, "test") + " still open (" +
       (by_test ? "" : plural(r.still_open, "failure") + " at " + plural(r.still_open_commits, "commit") + "; ") +
       "not fixed yet)" +
       (r.not_on_history ? ", " + std::to_string(r.not_on_history) + of_them + " not on the walked history" : "") +
       (r.unreadable ? ", " + std::to_string(r.unreadable) + of_them +
                           " fixed but left open because a git object could not be read (above: repair the "
                           "repository and run again to label them)"
                     : ""));
  if (!r.shallow_boundary.empty() && (r.beyond_boundary || r.not_on_history)) {
    std::string boundary;
    for (const auto& sha : r.shallow_boundary) boundary += (boundary.empty() ? "" : ", ") + sha.substr(0, 10);
    note("this is a shallow clone: its history starts at " + boundary + "; " +
         (r.beyond_boundary ? plural(r.beyond_boundary, "outcome") + " at commits it does not have were skipped" : "") +
         (r.beyond_boundary && r.not_on_history ? " and " : "") +
         (r.not_on_history ? plural(r.not_on_history, "open failure") + " are at commits it does not walk" : "") +
         ": `git fetch --deepen N` (N commits more) or `git fetch --unshallow` (all of it), then run again");
  }
  if (r.rule.n < 2 || r.rule.sd <= 0) {
    // OutlierRule::outlier quarantines nothing then: "above 0.00 faulty lines" would read as if it took every case.
    note("outlier rule: none yet (" + plural(r.rule.n, "mined case") +
         (r.rule.n < 2 ? "; it needs two or more" : ", all with the same count of faulty lines") +
         "): no case is quarantined for its size");
  } else {
    note("outlier rule: quarantine above " + r.rule.describe());
    if (r.rule.n <= 10 && r.rule.sigma >= 3)
      note("  (with 10 or fewer mined cases no count can lie 3 sd above the mean: the rule starts to bite later)");
  }
  for (const auto& id : r.moved_to_quarantine) note("  moved to quarantine by the recomputed rule: " + id);
  for (const auto& id : r.released) note("  back in the knowledge base by the recomputed rule: " + id);
  if (!r.quarantined_ids.empty() || !r.moved_to_quarantine.empty()) note("review the quarantine with `spark audit`");
  return notes;
}

Status install_post_commit_hook(const GitRepository& repo, const std::string& spark_path, const NoteSink& note) {
  const fs::path dir = repo.hooks_dir();
  const fs::path hook = dir / "post-commit", chained = dir / "post-commit.spark-chained";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (path_exists(hook)) {
    auto text = read_file(hook);
    if (!text) return std::unexpected(text.error());
    if (text->find(kHookMarker) != std::string::npos) {
      // Installed already: rewrite (the spark path may have changed), keep what is chained.
      TRY(write_file_atomic(hook, hook_script(spark_path)));
      ::chmod(hook.c_str(), 0755);
      note("post-commit hook already installed in " + dir.string() + " (refreshed)");
      return {};
    }
    if (path_exists(chained))
      return fail(chained.string() + " exists already and " + hook.string() +
                  " is not spark's: move one of them away first");
    fs::rename(hook, chained, ec);
    if (ec) return fail(hook.string() + ": cannot move to " + chained.string() + ": " + ec.message());
    note("kept your post-commit hook as " + chained.string() + "; spark's hook runs it first");
  }
  TRY(write_file_atomic(hook, hook_script(spark_path)));
  ::chmod(hook.c_str(), 0755);
  note("installed " + hook.string());
  return {};
}

Status uninstall_post_commit_hook(const GitRepository& repo, const NoteSink& note) {
  const fs::path dir = repo.hooks_dir();
  const fs::path hook = dir / "post-commit", chained = dir / "post-commit.spark-chained";
  auto text = read_file(hook);
  if (!text || text->find(kHookMarker) == std::string::npos) {
    note("no spark post-commit hook in " + dir.string());
    return {};
  }
  std::error_code ec;
  fs::remove(hook, ec);
  if (path_exists(chained)) fs::rename(chained, hook, ec);
  if (ec) return fail(hook.string() + ": " + ec.message());
  note("removed spark's post-commit hook" + std::string(path_exists(hook) ? "; your earlier hook is back" : ""));
  return {};
}

Status rerun_tests(const std::string& command, const std::vector<std::string>& tests,
                   const std::filesystem::path& workdir, const std::filesystem::path& junit, double timeout) {
  auto run = run_command(expand_command(command, tests, junit.string()), workdir, timeout);
  TRY(run);
  if (path_exists(junit)) return {};
  const std::string& output = run->output;
  return fail("record.test_command wrote no JUnit report to {junit} (" + run->describe() + "):\n" +
              output.substr(output.size() > 2000 ? output.size() - 2000 : 0));
}

std::string work_tree_note(const std::string& head, const std::vector<std::string>& changed, bool localizing) {
  std::string named;
  for (size_t i = 0; i < changed.size() && i < 3; ++i) named += (i ? ", " : "") + changed[i];
  if (changed.size() > 3) named += " and " + std::to_string(changed.size() - 3) + " more";
  return "recorded nothing: the work tree differs from HEAD " + head.substr(0, 10) + " (" + named +
         "), so these outcomes are not HEAD's; commit, then run the tests again to record them" +
         (localizing ? " (the failures are localized as the work tree has them)" : "");
}

double record_retry_seconds() {
  return std::max(0.0, std::atof(environment_setting("SPARK_KB_RETRY_SECONDS").c_str()));
}

std::vector<std::string> stored_notes(const StoredReport& stored) {
  std::vector<std::string> notes;
  if (stored.spooled_reports > 0)
    notes.push_back("stored " + std::to_string(stored.spooled_reports) + " spooled report(s) (" +
                    std::to_string(stored.spooled_outcomes) + " outcome(s)) with this one");
  if (stored.attempts > 1) notes.push_back("stored after " + std::to_string(stored.attempts) + " attempts");
  return notes;
}

std::string hook_does_text(const std::string& test_command) {
  if (test_command.empty())
    return "record.test_command is not set: after each commit the hook only counts the tests with open failures; it "
           "re-runs and records nothing until SPARK_TEST_COMMAND, ~/.config/spark/config.toml or a .spark.toml you "
           "trusted (`spark trust`) sets it (e.g. [record] test_command = \"python3 -m pytest --junitxml={junit} "
           "{tests}\")";
  return "after each commit the hook re-runs the tests with open failures (" + terminal_line(test_command) +
         ") and records their outcomes at the new commit (not when the work tree differs from it)";
}

std::string hook_needs_command_text(size_t tests) {
  return plural(tests, "test") +
         " with open failures; set record.test_command (SPARK_TEST_COMMAND, ~/.config/spark/config.toml, or a "
         ".spark.toml you trusted with `spark trust`; e.g. \"python3 -m pytest --junitxml={junit} {tests}\") to "
         "re-run them after each commit";
}

}  // namespace spark
