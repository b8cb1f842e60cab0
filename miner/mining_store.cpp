#include "miner/mining_store.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "code/code_structure.h"
#include "code/scope.h"
#include "formats/error_message.h"
#include "miner/change_since.h"
#include "miner/project_tests.h"
#include "store/database.h"

namespace spark {

using nlohmann::json;

namespace {

json files_json(const std::vector<SourceFile>& files) {
  json a = json::array();
  for (const auto& f : files) a.push_back({{"path", f.path}, {"content", f.content}});
  return a;
}

std::vector<SourceFile> files_from(const std::string& text) {
  std::vector<SourceFile> out;
  auto a = json::parse(text, nullptr, false);
  if (!a.is_array()) return out;
  for (const auto& f : a) out.push_back({f.value("path", ""), f.value("content", "")});
  return out;
}

// Faulty lines as the case format writes them, each with its `fix` when `fixes` knows it.
json lines_json(const std::vector<LineRef>& lines, const std::map<LineRef, std::vector<std::string>>& fixes = {}) {
  json a = json::array();
  for (const auto& l : lines) {
    json line = {{"path", l.path}, {"line", l.line}};
    if (auto it = fixes.find(l); it != fixes.end()) line["fix"] = it->second;
    a.push_back(std::move(line));
  }
  return a;
}

const char* kColumns =
    "commit_sha, test_id, status, time, message, origin, snapshot, fixed_commit, case_id, faulty_count, record, "
    "fixed_files, decided_by, decided_at, reason, kept, duplicate_of";

Result<StoredFailure> read_row(const Statement& st, const std::string& db) {
  StoredFailure f;
  f.commit = st.text(0);
  f.test_id = st.text(1);
  f.status = parse_status(st.text(2)).value_or(FailureStatus::open);
  if (!st.is_null(3)) f.time = st.int64(3);
  f.message = st.text(4);
  f.origin = st.text(5);
  if (!st.is_null(6)) f.snapshot = files_from(st.text(6));
  f.fixed_commit = st.text(7);
  f.case_id = st.text(8);
  if (!st.is_null(9)) f.faulty_count = static_cast<size_t>(st.int64(9));
  if (!st.is_null(10)) {
    auto record = json::parse(st.text(10), nullptr, false);
    if (record.is_discarded()) return fail(db + ": failure " + f.case_id + " has a damaged record");
    if (!st.is_null(15)) {
      auto kept = json::parse(st.text(15), nullptr, false);
      if (kept.is_array()) {
        if (record.contains("faulty_lines") && record["faulty_lines"].is_array())
          for (const auto& l : record["faulty_lines"])
            if (l.is_object()) f.mined_lines.push_back({l.value("path", ""), l.value("line", 0)});
        record["faulty_lines"] = kept;
      }
    }
    auto c = case_from_json(std::move(record));
    if (!c) return fail(db + ": failure " + f.case_id + ": " + c.error().message);
    f.labelled = std::move(*c);
    if (f.mined_lines.empty()) f.mined_lines = f.labelled->faulty_lines;
  }
  if (!st.is_null(11)) f.fixed_files = files_from(st.text(11));
  f.decided_by = st.text(12);
  if (!st.is_null(13)) f.decided_at = st.int64(13);
  f.reason = st.text(14);
  f.duplicate_of = st.text(16);
  return f;
}

Result<std::vector<StoredFailure>> read_rows(Statement& st, const std::string& db) {
  std::vector<StoredFailure> out;
  TRY(st.each_row([&]() -> Status {
    auto f = read_row(st, db);
    if (!f) return std::unexpected(f.error());
    out.push_back(std::move(*f));
    return {};
  }));
  return out;
}

// "('a','b')": the statuses as an SQL list.
std::string status_list(const std::vector<FailureStatus>& statuses) {
  std::string sql = "(";
  for (size_t i = 0; i < statuses.size(); ++i) sql += (i ? ",'" : "'") + status_name(statuses[i]) + "'";
  return sql + ")";
}

// " WHERE status IN ('a','b')", or "" for every status.
std::string status_filter(const std::vector<FailureStatus>& statuses) {
  if (statuses.empty()) return "";
  return " WHERE status IN " + status_list(statuses);
}

// The tests whose outcomes can close a failure besides its own: a Python test's parametrized variants and the
// function itself (`tests/t.py::test_f` and `tests/t.py::test_f[...]`: a fix that changes the failing row also
// changes its id, which then never passes again), a Java parametrized test's other invocations (`…#adds(int)[3]`
// is gone once a fix removes the third row), and a collection error's module's tests (`tests/t.py::...` for
// `tests/t.py`).
struct ClosingKin {
  std::string function;  // the parameterless id ("" when none)
  std::string prefix;    // ids starting with it ("" when none)
};
ClosingKin closing_kin(const std::string& test_id) {
  const Language language = language_of_test_id(test_id);
  if (language == Language::java && test_id.ends_with(']') && test_id.find('[') != std::string::npos) {
    const std::string function = test_id.substr(0, test_id.rfind('['));  // "com.x.T#adds(int)" of "…[3]"
    return {function, function + "["};
  }
  if (language != Language::python) return {};
  if (test_id.find("::") == std::string::npos)
    return language_of_path(test_id) == Language::python ? ClosingKin{"", test_id + "::"} : ClosingKin{};
  const std::string function = test_id.substr(0, test_id.find('['));
  return {function, function + "["};
}

// What a commit says of a failing test: its own outcome there, and whether its kin passed or failed there.
struct CommitOutcomes {
  std::string self;  // "" when it has no outcome there
  bool kin_passed = false, kin_failed = false;
  // The test passed; or it no longer exists and its kin (its function, its module) all passed.
  bool closes() const { return self == "passed" || (self.empty() && kin_passed && !kin_failed); }
};

}  // namespace

std::string failure_id(const StoredFailure& f) { return hex64(fnv1a64(f.commit + "\n" + f.test_id)).substr(0, 12); }

std::optional<std::string> test_gone_at(const GitRepository& repo, const std::string& sha, const std::string& test_id) {
  const TestIdParts parts = parse_test_id(test_id, language_of_test_id(test_id));
  const std::string at = "commit " + sha.substr(0, 10);
  if (auto text_file = doctest_text_file(test_id)) {
    // A doctest of a text file goes with its file.
    auto content = repo.file_at(sha, *text_file);
    if (!content || *content) return std::nullopt;
    return "its doctest file " + *text_file + " is not in " + at;
  }
  if (parts.path.empty()) {
    // A module's id (a collection error's is its file's path) goes with its file; a dotted unittest id names no file
    // to look at, and never expires.
    if (!language_of_path(test_id)) return std::nullopt;
    auto content = repo.file_at(sha, test_id);
    if (!content || *content) return std::nullopt;  // there (an unreadable file is there too)
    return "its test file " + test_id + " is not in " + at;
  }
  std::vector<std::string> unreadable;
  const auto files = failure_files(repo, sha, test_id, "", &unreadable);
  if (!unreadable.empty()) return std::nullopt;  // a file that cannot be read is there
  if (files.empty() || !same_file(parts.path, files.front().path))
    return "its test file " + parts.path + " is not in " + at;
  if (parts.function.empty()) return std::nullopt;
  const SourceFile& file = files.front();
  const CodeStructure structure = analyze_code(file.content, language_for(file.path, ""), file.path);
  // A module's doctest ("pkg/mod.py::pkg.mod.f") names its function after the module's dotted name.
  const std::string function = parts.function.substr(parts.function.rfind('.') + 1);
  if (estimate_scope(structure, test_id).found || file.content.find(function) != std::string::npos)
    return std::nullopt;
  return file.path + " no longer defines " + parts.function + " at " + at;
}

Result<SyncReport> MiningStore::sync(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                                     const SyncOptions& options) {
  SyncReport report;
  report.shallow_boundary = repo.shallow_boundary();
  const int64_t now = now_epoch();
  TRY(record_outcomes(repo, outcomes, options, now, report));
  auto open = failures({FailureStatus::open});
  TRY(open);
  auto settled = label_fixed(repo, *open, options, report);
  TRY(settled);
  TRY(settle(*settled, options, now, report));
  auto st = kb_.database().prepare(
      "SELECT count(*), count(DISTINCT test_id), count(DISTINCT commit_sha) FROM failures WHERE status = 'open'");
  TRY(st);
  TRY(st->step());
  report.still_open = static_cast<size_t>(st->int64(0));
  report.still_open_tests = static_cast<size_t>(st->int64(1));
  report.still_open_commits = static_cast<size_t>(st->int64(2));
  return report;
}

Result<size_t> MiningStore::add_change_since(const GitRepository& repo,
                                             const std::vector<std::pair<std::string, std::string>>& failures,
                                             const SyncOptions& options) {
  if (failures.empty()) return size_t{0};
  Database& db = kb_.database();
  auto history = repo.history(options.first_parent, std::nullopt, std::nullopt, options.tip);
  TRY(history);
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < history->size(); ++i) position[(*history)[i].sha] = i;
  auto row = db.prepare("SELECT record FROM failures WHERE commit_sha = ? AND test_id = ?");
  auto runs = db.prepare("SELECT commit_sha, outcome FROM outcomes WHERE test_id = ?");
  for (auto* st : {&row, &runs})
    if (!*st) return std::unexpected(st->error());
  // First what each record gains, read and computed outside any transaction (git's work holds no write lock).
  struct Gain {
    std::string commit, test_id;
    json record;
  };
  std::vector<Gain> gains;
  for (const auto& [commit, test_id] : failures) {
    row->bind(1, commit).bind(2, test_id);
    auto found = row->step();
    TRY(found);
    const std::string text = *found && !row->is_null(0) ? row->text(0) : "";
    row->reset();
    const auto at = position.find(commit);
    if (text.empty() || at == position.end()) continue;
    json record = json::parse(text, nullptr, false);
    if (!record.is_object() || record.contains("last_pass_commit")) continue;
    // The last pass before the failure, and the first failure after it, on the walked line.
    std::optional<size_t> pass, first_fail;
    std::vector<std::pair<size_t, std::string>> seen;
    runs->bind(1, test_id);
    TRY(runs->each_row([&] {
      if (auto p = position.find(runs->text(0)); p != position.end() && p->second <= at->second)
        seen.emplace_back(p->second, runs->text(1));
    }));
    runs->reset();
    for (const auto& [p, outcome] : seen)
      if (outcome == "passed" && p < at->second && (!pass || p > *pass)) pass = p;
    if (!pass) continue;
    for (const auto& [p, outcome] : seen)
      if ((outcome == "failed" || outcome == "error") && p > *pass && (!first_fail || p < *first_fail)) first_fail = p;
    auto c = case_from_json(record);
    if (!c || !c->faulty_commit) continue;
    std::vector<std::string> commits{*c->faulty_commit};
    if (c->fixed_commit) commits.push_back(*c->fixed_commit);
    const TestCodeRule rule = project_test_code(options.test_code, repo, commits);
    auto change = change_since(repo, (*history)[*pass].sha, *c->faulty_commit,
                               first_fail ? (*history)[*first_fail].sha : std::string(), c->files, {rule});
    if (!change) {
      if (is_read_error(change.error())) return std::unexpected(change.error());
      continue;
    }
    json gained = record;
    put_change(gained, *change);
    if (!case_from_json(gained)) continue;  // a change the reader refuses is no gain
    gains.push_back({commit, test_id, std::move(gained)});
  }
  if (gains.empty()) return size_t{0};
  auto tx = Transaction::begin(db);
  TRY(tx);
  auto state =
      db.prepare("SELECT status, kept FROM failures WHERE commit_sha = ? AND test_id = ? AND record IS NOT NULL");
  auto update = db.prepare("UPDATE failures SET record = ?, updated_at = ? WHERE commit_sha = ? AND test_id = ?");
  for (auto* st : {&state, &update})
    if (!*st) return std::unexpected(st->error());
  std::vector<Case> to_import;
  std::vector<CaseOrigin> origins;
  for (auto& g : gains) {
    state->bind(1, g.commit).bind(2, g.test_id);
    auto found = state->step();
    TRY(found);
    const std::string status = *found ? state->text(0) : "";
    const std::string kept = *found && !state->is_null(1) ? state->text(1) : "";
    state->reset();
    if (!*found) continue;
    update->bind(1, json_text(g.record)).bind(2, now_epoch()).bind(3, g.commit).bind(4, g.test_id);
    TRY(update->run());
    if (!in_corpus(parse_status(status).value_or(FailureStatus::open))) continue;
    json effective = g.record;  // a trimmed case keeps the lines a person kept
    if (!kept.empty())
      if (auto lines = json::parse(kept, nullptr, false); lines.is_array()) effective["faulty_lines"] = lines;
    auto c = case_from_json(std::move(effective));
    if (!c) continue;
    to_import.push_back(std::move(*c));
    origins.push_back({"failure " + g.commit.substr(0, 10) + " " + g.test_id});
  }
  if (!to_import.empty()) TRY(kb_.import_cases(to_import, origins, /*replace=*/true));
  TRY(tx->commit());
  return to_import.size();
}

Result<SyncReport> MiningStore::store_outcomes(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                                               const SyncOptions& options) {
  SyncReport report;
  TRY(record_outcomes(repo, outcomes, options, now_epoch(), report));
  return report;
}

Result<std::map<std::string, RecordedOutcome>> MiningStore::outcomes_at(const std::string& sha) {
  auto st = kb_.database().prepare("SELECT test_id, outcome, time, message, origin FROM outcomes WHERE commit_sha = ?");
  TRY(st);
  st->bind(1, sha);
  std::map<std::string, RecordedOutcome> out;
  TRY(st->each_row([&] {
    RecordedOutcome o;
    o.commit = sha;
    o.test_id = st->text(0);
    o.outcome = parse_outcome(st->text(1)).value_or(Outcome::error);
    if (!st->is_null(2)) o.time = st->int64(2);
    o.message = st->text(3);
    o.origin = st->text(4);
    out.emplace(o.test_id, std::move(o));
  }));
  return out;
}

Result<std::optional<TestHistory>> MiningStore::history(
    const std::string& test_id, int64_t now,
    const std::function<std::optional<int64_t>(const std::string&)>& commit_time) {
  struct Run {
    std::string commit;
    bool failed = false;
    int64_t time = 0;
    int64_t at = 0;  // the commit's committer time
  };
  std::vector<Run> runs;
  // The test's own runs, and a pass of its kin (closing_kin) at a commit where it has none: a module whose tests all
  // passed (its collection error fixed), a parametrized row whose function passed with its rows renamed. That pass
  // is what closed its failure; the history counts it as a pass too.
  const ClosingKin kin = closing_kin(test_id);
  std::string upper = kin.prefix;
  if (!upper.empty()) ++upper.back();  // the prefix's range: [prefix, upper)
  auto st = kb_.database().prepare(
      "SELECT commit_sha, test_id, outcome, COALESCE(time, recorded_at) FROM outcomes WHERE (test_id = ? OR test_id = "
      "? OR (test_id >= ? AND test_id < ?)) AND outcome != 'skipped'");
  TRY(st);
  st->bind(1, test_id).bind(2, kin.function.empty() ? test_id : kin.function);
  st->bind(3, kin.prefix.empty() ? test_id : kin.prefix).bind(4, upper.empty() ? test_id : upper);
  std::map<std::string, std::pair<CommitOutcomes, int64_t>> kin_at;  // commits with kin outcomes: theirs, a time
  std::set<std::string> own;
  TRY(st->each_row([&] {
    const std::string outcome = st->text(2);
    const bool failed = outcome == "failed" || outcome == "error";
    if (st->text(1) == test_id) {
      runs.push_back({st->text(0), failed, st->int64(3)});
      own.insert(st->text(0));
      return;
    }
    auto& [c, time] = kin_at.try_emplace(st->text(0), CommitOutcomes{}, st->int64(3)).first->second;
    if (failed)
      c.kin_failed = true;
    else if (outcome == "passed")
      c.kin_passed = true;
    time = std::min(time, st->int64(3));
  }));
  for (const auto& [commit, at] : kin_at)
    if (!own.contains(commit) && at.first.closes()) runs.push_back({commit, false, at.second});
  if (runs.empty()) return std::optional<TestHistory>();
  // Flaky: a failure of this test whose commit also saw it pass (its failure closed as flaky).
  std::set<std::string> flaky_commits;
  auto fl = kb_.database().prepare("SELECT commit_sha FROM failures WHERE test_id = ? AND status = 'flaky'");
  TRY(fl);
  fl->bind(1, test_id);
  TRY(fl->each_row([&] { flaky_commits.insert(fl->text(0)); }));
  // History's order: each run's commit time where the repository knows the commit (a shallow clone lacks the older
  // ones), else the outcome's time; then the outcome's time and the commit (a stable order within one second).
  for (auto& r : runs) {
    const auto at = commit_time && runs.size() > 1 ? commit_time(r.commit) : std::nullopt;  // one run: no order
    r.at = at.value_or(r.time);
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return std::tie(a.at, a.time, a.commit) < std::tie(b.at, b.time, b.commit);
  });
  TestHistory h;
  h.runs = runs.size();
  h.flaky_runs = flaky_commits.size();
  size_t i = runs.size();
  while (i > 0 && runs[i - 1].failed) --i;
  if (i < runs.size()) {
    h.first_failing_commit = runs[i].commit;
    h.failing_runs = runs.size() - i;
    h.age_days = std::max<double>(0.0, static_cast<double>(now - runs[i].time) / 86400.0);
  }
  if (i > 0) h.last_passed_commit = runs[i - 1].commit;
  // Flaky now: a commit of the recent runs (the last kRecentRuns, or the whole failing streak) saw the test fail and
  // pass. A flake long ago does not make every later failure a flake.
  constexpr size_t kRecentRuns = 20;
  for (size_t r = std::min(i, runs.size() > kRecentRuns ? runs.size() - kRecentRuns : 0); r < runs.size(); ++r)
    h.flaky = h.flaky || flaky_commits.contains(runs[r].commit);
  return std::optional<TestHistory>(std::move(h));
}

Result<std::vector<MiningStore::ProductFailure>> MiningStore::product_failures(size_t limit) {
  auto st = kb_.database().prepare(
      "SELECT test_id, commit_sha, message FROM failures WHERE status = 'not_test_fault' "
      "ORDER BY updated_at DESC, commit_sha, test_id LIMIT ?");
  TRY(st);
  st->bind(1, static_cast<int64_t>(limit));
  std::vector<ProductFailure> out;
  TRY(st->each_row([&] { out.push_back({st->text(0), st->text(1), st->text(2)}); }));
  return out;
}

Result<bool> MiningStore::has_failure(const std::string& sha, const std::string& test_id) {
  auto st = kb_.database().prepare("SELECT 1 FROM failures WHERE commit_sha = ? AND test_id = ?");
  TRY(st);
  st->bind(1, sha).bind(2, test_id);
  auto row = st->step();
  TRY(row);
  return *row;
}

Status MiningStore::record_outcomes(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                                    const SyncOptions& options, int64_t now, SyncReport& report) {
  Database& db = kb_.database();
  // Commits are stored as full shas; one the repository does not have is named and skipped (in a shallow clone,
  // counted: the summary names the boundary once). One that cannot be read stops the sync before anything is stored.
  struct Resolved {
    const RecordedOutcome* o;
    const std::string& sha;  // in sha_of: not a copy per outcome (a report may hold millions)
    std::optional<std::vector<SourceFile>> snapshot;
    size_t own = 0;
  };
  std::vector<Resolved> resolved;
  std::map<std::string, std::string> sha_of;
  for (const auto& o : outcomes) {
    auto it = sha_of.find(o.commit);
    if (it == sha_of.end()) {
      auto sha = repo.resolve(o.commit);
      if (!sha && is_read_error(sha.error())) return std::unexpected(with_context(o.origin + ": ", sha.error()));
      if (!sha && report.shallow_boundary.empty()) report.warnings.push_back(o.origin + ": " + sha.error().message);
      it = sha_of.emplace(o.commit, sha ? *sha : std::string()).first;
    }
    if (it->second.empty()) {
      report.beyond_boundary += report.shallow_boundary.empty() ? 0 : 1;
      continue;
    }
    Resolved r{&o, it->second, std::nullopt};
    if (options.snapshot && (o.outcome == Outcome::failed || o.outcome == Outcome::error)) {
      std::vector<std::string> unreadable;
      r.snapshot = failure_files(repo, r.sha, o.test_id, o.message, &unreadable, &options.test_code, &r.own);
      for (const auto& w : unreadable) report.warnings.push_back(o.origin + ": " + w);
    }
    resolved.push_back(std::move(r));
  }
  {
    auto tx = Transaction::begin(db);
    TRY(tx);
    auto put = db.prepare(
        "INSERT INTO outcomes(commit_sha, test_id, outcome, time, message, origin, recorded_at) VALUES (?,?,?,?,?,?,?) "
        "ON CONFLICT(commit_sha, test_id) DO UPDATE SET outcome = excluded.outcome, time = excluded.time, "
        "message = excluded.message, origin = excluded.origin, recorded_at = excluded.recorded_at "
        "WHERE outcomes.outcome != excluded.outcome OR outcomes.message != excluded.message");
    auto open = db.prepare(
        "INSERT INTO failures(commit_sha, test_id, status, time, message, origin, snapshot, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING");
    auto flaky = db.prepare(
        "UPDATE failures SET status = 'flaky', updated_at = ? WHERE commit_sha = ? AND test_id = ? AND status = "
        "'open'");
    auto before = db.prepare("SELECT outcome FROM outcomes WHERE commit_sha = ? AND test_id = ?");
    for (auto* st : {&put, &open, &flaky, &before})
      if (!*st) return std::unexpected(st->error());
    for (const auto& r : resolved) {
      const RecordedOutcome& o = *r.o;
      const bool fails = o.outcome == Outcome::failed || o.outcome == Outcome::error;
      // A failure at a commit where the test passed before (outcomes recorded in any order) is flaky from the start.
      bool passed_before = false;
      if (fails && o.opens) {
        before->bind(1, r.sha).bind(2, o.test_id);
        auto row = before->step();
        TRY(row);
        passed_before = *row && before->text(0) == "passed";
        before->reset();
      }
      put->bind(1, r.sha).bind(2, o.test_id).bind(3, outcome_name(o.outcome));
      if (o.time)
        put->bind(4, *o.time);
      else
        put->bind_null(4);
      put->bind(5, o.message).bind(6, o.origin).bind(7, now);
      TRY(put->run());
      report.outcomes += static_cast<size_t>(put->changes());
      if (fails && o.opens) {
        open->bind(1, r.sha).bind(2, o.test_id).bind(3, passed_before ? "flaky" : "open");
        if (o.time)
          open->bind(4, *o.time);
        else
          open->bind_null(4);
        open->bind(5, sanitize_utf8(o.message)).bind(6, o.origin);
        if (r.snapshot)
          open->bind(7, json_text(files_json(*r.snapshot)));
        else
          open->bind_null(7);
        open->bind(8, now);
        TRY(open->run());
        report.opened += passed_before ? 0 : static_cast<size_t>(open->changes());
        report.closed_flaky += passed_before ? static_cast<size_t>(open->changes()) : 0;
      } else if (o.outcome == Outcome::passed) {
        TRY(flaky->bind(1, now).bind(2, r.sha).bind(3, o.test_id).run());
        report.closed_flaky += static_cast<size_t>(flaky->changes());
      }
    }
    TRY(tx->commit());
  }
  for (auto& r : resolved)
    if (r.snapshot)
      report.snapshots.push_back({static_cast<size_t>(r.o - outcomes.data()), r.own, std::move(*r.snapshot)});
  return {};
}

Result<std::vector<MiningStore::Settled>> MiningStore::label_fixed(const GitRepository& repo,
                                                                   const std::vector<StoredFailure>& open,
                                                                   const SyncOptions& options, SyncReport& report) {
  Database& db = kb_.database();
  std::vector<Settled> settled;
  if (open.empty()) return settled;
  auto history = repo.history(options.first_parent, options.since, options.until, options.tip);
  TRY(history);
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < history->size(); ++i) position[(*history)[i].sha] = i;
  const LabelOptions label_options{options.project.empty() ? default_project(repo) : options.project,
                                   options.test_only_fixes, options.test_code};
  // A failure's test and its kin (closing_kin): every outcome of them, to find where each failure was fixed.
  auto kin_outcomes = db.prepare(
      "SELECT commit_sha, test_id, outcome FROM outcomes WHERE test_id = ? OR test_id = ? OR (test_id >= ? AND "
      "test_id < ?)");
  TRY(kin_outcomes);
  std::map<std::string, std::vector<size_t>> fixes_of;  // test id → positions that close its failures, sorted
  std::map<std::string, std::vector<size_t>> fails_of;  // test id → positions where it failed, sorted
  std::map<std::string, std::vector<size_t>> passes_of;  // test id → positions where it passed, sorted
  std::map<std::pair<std::string, std::string>, const StoredFailure*> open_at;  // (commit, test id) → failure
  for (const auto& f : open) open_at[{f.commit, f.test_id}] = &f;
  for (const auto& f : open) {
    auto at = position.find(f.commit);
    if (at == position.end()) {
      ++report.not_on_history;
      continue;
    }
    auto [it, fresh] = fixes_of.try_emplace(f.test_id);
    if (fresh) {
      const ClosingKin kin = closing_kin(f.test_id);
      std::string upper = kin.prefix;
      if (!upper.empty()) ++upper.back();  // the prefix's range: [prefix, upper)
      kin_outcomes->bind(1, f.test_id).bind(2, kin.function.empty() ? f.test_id : kin.function);
      kin_outcomes->bind(3, kin.prefix.empty() ? f.test_id : kin.prefix).bind(4, upper.empty() ? f.test_id : upper);
      std::map<size_t, CommitOutcomes> by_position;
      TRY(kin_outcomes->each_row([&] {
        auto p = position.find(kin_outcomes->text(0));
        if (p == position.end()) return;
        CommitOutcomes& c = by_position[p->second];
        const std::string outcome = kin_outcomes->text(2);
        if (kin_outcomes->text(1) == f.test_id)
          c.self = outcome;
        else if (outcome == "passed")
          c.kin_passed = true;
        else if (outcome == "failed" || outcome == "error")
          c.kin_failed = true;
      }));
      kin_outcomes->reset();
      for (const auto& [pos, c] : by_position) {
        if (c.closes()) it->second.push_back(pos);
        if (c.self == "failed" || c.self == "error") fails_of[f.test_id].push_back(pos);
        if (c.self == "passed") passes_of[f.test_id].push_back(pos);
      }
    }
    auto next = std::upper_bound(it->second.begin(), it->second.end(), at->second);
    if (next == it->second.end()) continue;  // not fixed yet
    // A test that kept failing until its fix is labelled from its last failing commit before it: what the fix changed
    // of the test code as it was then. The diff from an earlier failing commit would also hold what changed between
    // (other rows fixed, other tests' faults), so every failure of the run labels the same lines: one fault, one case.
    const StoredFailure* from = &f;
    size_t faulty_at = at->second;
    const auto& fails = fails_of[f.test_id];
    if (auto last = std::lower_bound(fails.begin(), fails.end(), *next); last != fails.begin() && *--last > faulty_at)
      if (auto later = open_at.find({(*history)[*last].sha, f.test_id}); later != open_at.end()) {
        from = later->second;
        faulty_at = *last;
      }
    FailureInput input{from->test_id, from->message, from->time, from->origin, from->snapshot, {}, {}};
    // The last pass before the failure and the first recorded failure after it: the change between broke the test.
    const auto& passes = passes_of[f.test_id];
    if (auto after = std::lower_bound(passes.begin(), passes.end(), at->second); after != passes.begin()) {
      const size_t last_pass = *--after;
      input.last_pass = (*history)[last_pass].sha;
      if (auto first = std::upper_bound(fails.begin(), fails.end(), last_pass);
          first != fails.end() && *first <= at->second)
        input.break_commit = (*history)[*first].sha;
    }
    auto labelling = label_failure(repo, input, (*history)[faulty_at], (*history)[*next], label_options);
    if (!labelling && is_read_error(labelling.error())) {
      // No fact about the fix: the failure stays open, and a run after the repair labels it.
      report.warnings.push_back(labelling.error().message + "; " + f.test_id + " failing at " + f.commit.substr(0, 10) +
                                " stays open");
      ++report.unreadable;
      continue;
    }
    if (!labelling) {
      report.warnings.push_back(labelling.error().message);
      Labelling missing;
      missing.status = FailureStatus::missing_file;
      missing.detail = labelling.error().message;
      labelling = std::move(missing);
    }
    settled.push_back({&f, (*history)[*next].sha, std::move(*labelling)});
  }
  return settled;
}

Status MiningStore::settle(const std::vector<Settled>& settled, const SyncOptions& options, int64_t now,
                           SyncReport& report) {
  Database& db = kb_.database();
  auto tx = Transaction::begin(db);
  TRY(tx);
  auto update = db.prepare(
      "UPDATE failures SET status = ?, fixed_commit = ?, case_id = ?, faulty_count = ?, record = ?, fixed_files = ?, "
      "reason = ?, updated_at = ?, fault_key = ? WHERE commit_sha = ? AND test_id = ? AND status = 'open'");
  TRY(update);
  for (auto& s : settled) {
    const Labelling& l = s.labelling;
    update->bind(1, status_name(l.status)).bind(2, s.fixed);
    if (l.labelled) {
      update->bind(3, l.labelled->id).bind(4, static_cast<int64_t>(l.labelled->faulty_lines.size()));
      update->bind(5, json_text(case_to_json(*l.labelled))).bind(6, json_text(files_json(l.fixed_files)));
    } else {
      update->bind_null(3).bind_null(4).bind_null(5).bind_null(6);
    }
    update->bind(7, l.detail).bind(8, now);
    if (l.labelled)
      update->bind(9, fault_key(*l.labelled));
    else
      update->bind_null(9);
    update->bind(10, s.failure->commit).bind(11, s.failure->test_id);
    TRY(update->run());
    if (update->changes() == 0) continue;  // another process settled it first
    // Labelled ones are counted by the reconciliation, which decides between corpus and quarantine.
    if (l.labelled)
      report.labelled_ids.push_back(l.labelled->id);
    else
      ++report.settled[l.status];
  }
  // One case per fault: failures of the same test with the same test code and fix are counted behind the earliest.
  auto merge = merge_same_faults();
  TRY(merge);
  report.merged = merge->merged;
  if (merge->merged) report.settled[FailureStatus::duplicate] = merge->merged;
  TRY(reconcile(options.sigma, report));
  return tx->commit();
}

namespace {

// A failure of one fault key, as the merge reads it.
struct FaultMember {
  std::string commit, test_id, status, case_id, record, decided_by, reason, kept;
  std::optional<int64_t> time, decided_at;
};

// Every failure of fault key `key` that the merge weighs (mined or duplicate), earliest first.
Result<std::vector<FaultMember>> fault_members(Statement& members, const std::string& key) {
  std::vector<FaultMember> group;
  members.bind(1, key);
  TRY(members.each_row([&] {
    FaultMember m{members.text(0), members.text(1), members.text(2), members.text(4), members.text(5),
                  members.text(6), members.text(8), members.text(9), std::nullopt,    std::nullopt};
    if (!members.is_null(3)) m.time = members.int64(3);
    if (!members.is_null(7)) m.decided_at = members.int64(7);
    if (members.is_null(9)) m.kept.clear();
    group.push_back(std::move(m));
  }));
  members.reset();
  return group;
}

// What the kept failure carries after the merge: the earliest failure keeps the case; the latest decision among the
// group is the group's decision.
struct GroupDecision {
  std::string status, decided_by, reason, kept_lines;
  std::optional<int64_t> decided_at;
};
GroupDecision group_decision(const std::vector<FaultMember>& group) {
  const std::string duplicate = status_name(FailureStatus::duplicate), labelled = status_name(FailureStatus::labelled);
  const FaultMember& kept = group.front();
  const FaultMember* decided = nullptr;
  for (const auto& m : group)
    if (m.decided_at && (!decided || *m.decided_at > *decided->decided_at)) decided = &m;
  GroupDecision d{kept.status == duplicate ? labelled : kept.status, kept.decided_by, kept.reason, kept.kept,
                  kept.decided_at};
  if (decided && decided != &kept) {
    d.status = decided->status == duplicate ? d.status : decided->status;
    d.decided_by = decided->decided_by;
    d.decided_at = decided->decided_at;
    d.reason = decided->reason;
    d.kept_lines = decided->kept;
  }
  if (!is_mined(parse_status(d.status).value_or(FailureStatus::open))) d.status = labelled;
  return d;
}

// Writes the group's meta.occurrences (count, first and last commit and time, every failing commit) and `tests`
// (every test the fault broke, the kept one's first, when more than one did) into the kept record. Returns whether
// they changed.
bool record_occurrences(json& record, const std::vector<FaultMember>& group) {
  // Commits, not failures: one fault of three tests at one commit failed at one commit.
  json commits = json::array();
  for (const auto& m : group)
    if (std::find(commits.begin(), commits.end(), m.commit) == commits.end()) commits.push_back(m.commit);
  json occurrences = {{"count", commits.size()},
                      {"first_commit", group.front().commit},
                      {"last_commit", group.back().commit},
                      {"commits", commits}};
  if (group.front().time) occurrences["first_time"] = format_iso8601(*group.front().time);
  if (group.back().time) occurrences["last_time"] = format_iso8601(*group.back().time);
  if (!record.contains("meta") || !record["meta"].is_object()) record["meta"] = json::object();
  json tests = json::array({group.front().test_id});
  for (const auto& m : group)
    if (std::find(tests.begin(), tests.end(), m.test_id) == tests.end()) tests.push_back(m.test_id);
  const bool changed = record["meta"].value("occurrences", json()) != occurrences ||
                       record.value("tests", json()) != (tests.size() > 1 ? tests : json());
  record["meta"]["occurrences"] = occurrences;
  if (tests.size() > 1)
    record["tests"] = std::move(tests);
  else
    record.erase("tests");
  return changed;
}

}  // namespace

Result<MiningStore::FaultMerge> MiningStore::merge_same_faults() {
  Database& db = kb_.database();
  auto tx = Transaction::begin(db);
  TRY(tx);
  // Only keys with two or more failures not yet merged can change anything.
  const std::string mined = status_list(mined_statuses());
  auto keys = db.prepare("SELECT fault_key FROM failures WHERE fault_key IS NOT NULL AND status IN " + mined +
                         " GROUP BY fault_key HAVING count(*) > 1");
  auto members = db.prepare(
      "SELECT commit_sha, test_id, status, time, case_id, record, decided_by, decided_at, reason, kept "
      "FROM failures WHERE fault_key = ? AND (status IN " +
      mined + " OR status = 'duplicate') ORDER BY coalesce(time, updated_at), commit_sha, test_id");
  auto as_duplicate = db.prepare(
      "UPDATE failures SET status = 'duplicate', duplicate_of = ?, updated_at = ? WHERE commit_sha = ? AND test_id = "
      "?");
  auto as_kept = db.prepare(
      "UPDATE failures SET status = ?, decided_by = ?, decided_at = ?, reason = ?, kept = ?, record = ?, "
      "duplicate_of = NULL, updated_at = ? WHERE commit_sha = ? AND test_id = ?");
  for (auto* st : {&keys, &members, &as_duplicate, &as_kept})
    if (!*st) return std::unexpected(st->error());
  std::vector<std::string> fault_keys;
  TRY(keys->each_row([&] { fault_keys.push_back(keys->text(0)); }));
  FaultMerge out;
  const int64_t now = now_epoch();
  std::vector<std::string> to_remove;
  std::vector<Case> to_import;
  std::vector<CaseOrigin> origins;
  for (const auto& key : fault_keys) {
    auto group = fault_members(*members, key);
    TRY(group);
    if (group->size() < 2) continue;
    const FaultMember& kept = group->front();
    const GroupDecision d = group_decision(*group);
    auto record = json::parse(kept.record, nullptr, false);
    if (!record.is_object()) return fail(kb_.name() + ": failure " + kept.case_id + " has a damaged record");
    const bool changed_occurrences = record_occurrences(record, *group);
    size_t newly_merged = 0;
    for (size_t i = 1; i < group->size(); ++i) {
      const FaultMember& m = (*group)[i];
      // Earlier duplicates are pointed at the kept failure again (it changes when an earlier failure arrives late).
      if (m.status != "duplicate") {
        ++newly_merged;
        if (!m.case_id.empty() && m.case_id != kept.case_id) to_remove.push_back(m.case_id);
      }
      TRY(as_duplicate->bind(1, kept.case_id).bind(2, now).bind(3, m.commit).bind(4, m.test_id).run());
    }
    if (newly_merged == 0 && !changed_occurrences && kept.status == d.status) continue;
    out.merged += newly_merged;
    as_kept->bind(1, d.status).bind(2, d.decided_by);
    if (d.decided_at)
      as_kept->bind(3, *d.decided_at);
    else
      as_kept->bind_null(3);
    as_kept->bind(4, d.reason);
    if (d.kept_lines.empty())
      as_kept->bind_null(5);
    else
      as_kept->bind(5, d.kept_lines);
    as_kept->bind(6, json_text(record)).bind(7, now).bind(8, kept.commit).bind(9, kept.test_id);
    TRY(as_kept->run());
    if (in_corpus(parse_status(d.status).value_or(FailureStatus::open))) {
      json effective = record;
      if (!d.kept_lines.empty())
        if (auto lines = json::parse(d.kept_lines, nullptr, false); lines.is_array()) effective["faulty_lines"] = lines;
      auto c = case_from_json(std::move(effective));
      if (!c) return fail(kb_.name() + ": failure " + kept.case_id + ": " + c.error().message);
      to_import.push_back(std::move(*c));
      origins.push_back({"failure " + kept.commit.substr(0, 10) + " " + kept.test_id});
    } else {
      to_remove.push_back(kept.case_id);
    }
  }
  if (!to_remove.empty()) TRY(kb_.remove_cases(to_remove));
  if (!to_import.empty()) TRY(kb_.import_cases(to_import, origins, /*replace=*/true));
  TRY(tx->commit());
  return out;
}

Result<std::unique_ptr<KnowledgeBase>> open_knowledge_base(const std::filesystem::path& location, bool create,
                                                           int busy_timeout_ms,
                                                           const std::filesystem::path& local_dir) {
  return KnowledgeBase::open(location, create, busy_timeout_ms, local_dir, [](KnowledgeBase& kb) -> Status {
    auto merged = MiningStore(kb).merge_same_faults();
    TRY(merged);
    return {};
  });
}

Result<std::vector<MiningStore::Mined>> MiningStore::mined() {
  auto st = kb_.database().prepare("SELECT commit_sha, test_id, status, faulty_count, case_id FROM failures" +
                                   status_filter(mined_statuses()) + " ORDER BY commit_sha, test_id");
  TRY(st);
  std::vector<Mined> out;
  TRY(st->each_row([&] {
    out.push_back({st->text(0), st->text(1), parse_status(st->text(2)).value_or(FailureStatus::open),
                   static_cast<size_t>(st->int64(3)), st->text(4)});
  }));
  return out;
}

Status MiningStore::reconcile(double sigma, SyncReport& report) {
  Database& db = kb_.database();
  // Only ids, statuses and counts: the records are read for the cases that enter the knowledge base.
  auto all = mined();
  TRY(all);
  std::vector<size_t> counts;
  for (const auto& m : *all) counts.push_back(m.faulty_count);
  report.rule = outlier_rule(counts, sigma);
  const std::set<std::string> fresh(report.labelled_ids.begin(), report.labelled_ids.end());
  report.labelled_ids.clear();
  auto set_status = db.prepare("UPDATE failures SET status = ?, updated_at = ? WHERE commit_sha = ? AND test_id = ?");
  auto record = db.prepare("SELECT record FROM failures WHERE commit_sha = ? AND test_id = ?");
  for (auto* st : {&set_status, &record})
    if (!*st) return std::unexpected(st->error());
  std::vector<Case> to_import;
  std::vector<CaseOrigin> origins;
  std::vector<std::string> to_remove;
  for (const auto& m : *all) {
    if (m.status != FailureStatus::labelled && m.status != FailureStatus::quarantined) continue;
    const FailureStatus want =
        report.rule.outlier(m.faulty_count) ? FailureStatus::quarantined : FailureStatus::labelled;
    const bool is_fresh = fresh.count(m.case_id) > 0;
    if (want != m.status) {
      set_status->bind(1, status_name(want)).bind(2, now_epoch()).bind(3, m.commit).bind(4, m.test_id);
      if (auto s = set_status->run(); !s) return s;
    }
    if (is_fresh)
      (want == FailureStatus::quarantined ? report.quarantined_ids : report.labelled_ids).push_back(m.case_id);
    else if (want != m.status)
      (want == FailureStatus::quarantined ? report.moved_to_quarantine : report.released).push_back(m.case_id);
    if (want == FailureStatus::quarantined) {
      // A fresh case may have been put in by the fault merge (its occurrences changed): it leaves too.
      if (is_fresh || want != m.status) to_remove.push_back(m.case_id);
    } else if (is_fresh || want != m.status) {
      record->bind(1, m.commit).bind(2, m.test_id);
      auto row = record->step();
      TRY(row);
      auto c = case_from_json(json::parse(record->text(0), nullptr, false));
      record->reset();
      if (!c) return fail(db.name() + ": failure " + m.case_id + ": " + c.error().message);
      to_import.push_back(std::move(*c));
      origins.push_back({"failure " + m.commit.substr(0, 10) + " " + m.test_id});
    }
  }
  if (!report.labelled_ids.empty()) report.settled[FailureStatus::labelled] = report.labelled_ids.size();
  if (!report.quarantined_ids.empty()) report.settled[FailureStatus::quarantined] = report.quarantined_ids.size();
  if (!to_remove.empty()) TRY(kb_.remove_cases(to_remove));
  if (!to_import.empty()) TRY(kb_.import_cases(to_import, origins, /*replace=*/true));
  return {};
}

Result<std::vector<StoredFailure>> MiningStore::failures(const std::vector<FailureStatus>& statuses) {
  Database& db = kb_.database();
  auto st = db.prepare(std::string("SELECT ") + kColumns + " FROM failures" + status_filter(statuses) +
                       " ORDER BY coalesce(time, updated_at), commit_sha, test_id");
  TRY(st);
  return read_rows(*st, db.name());
}

Result<StoredFailure> MiningStore::failure_by_case(const std::string& case_id) {
  Database& db = kb_.database();
  auto st =
      db.prepare(std::string("SELECT ") + kColumns + " FROM failures WHERE case_id = ? OR substr(case_id, 1, ?) = ?");
  TRY(st);
  st->bind(1, case_id).bind(2, static_cast<int64_t>(case_id.size())).bind(3, case_id);
  auto rows = read_rows(*st, db.name());
  TRY(rows);
  // The failures of one fault can share its case id (each labelled from the same failing commit): the kept one, not
  // a duplicate pointing at it, is the case.
  std::vector<StoredFailure> found;
  for (auto& f : *rows) {
    auto same = std::find_if(found.begin(), found.end(), [&](const StoredFailure& g) { return g.case_id == f.case_id; });
    if (same == found.end())
      found.push_back(std::move(f));
    else if (same->status == FailureStatus::duplicate && f.status != FailureStatus::duplicate)
      *same = std::move(f);
  }
  for (auto& f : found)
    if (f.case_id == case_id) return std::move(f);
  if (found.empty()) return fail("no mined case \"" + case_id + "\" in " + kb_.name());
  if (found.size() > 1)
    return fail("\"" + case_id + "\" names " + std::to_string(found.size()) + " mined cases (" + found[0].case_id +
                ", " + found[1].case_id + (found.size() > 2 ? ", …" : "") + "); give more of the id");
  return std::move(found.front());
}

Result<std::map<std::string, size_t>> MiningStore::status_counts() {
  auto st = kb_.database().prepare("SELECT status, count(*) FROM failures GROUP BY status");
  TRY(st);
  std::map<std::string, size_t> out;
  TRY(st->each_row([&] { out[st->text(0)] = static_cast<size_t>(st->int64(1)); }));
  return out;
}

Result<size_t> MiningStore::outcome_count() {
  auto st = kb_.database().prepare("SELECT count(*) FROM outcomes");
  TRY(st);
  TRY(st->step());
  return static_cast<size_t>(st->int64(0));
}

Result<OutlierRule> MiningStore::rule(double sigma) {
  auto all = mined();
  TRY(all);
  std::vector<size_t> counts;
  for (const auto& m : *all) counts.push_back(m.faulty_count);
  return outlier_rule(counts, sigma);
}

Result<size_t> MiningStore::close_open(const std::vector<StoredFailure>& failures, FailureStatus status,
                                       const std::string& by, const std::string& reason) {
  Database& db = kb_.database();
  auto tx = Transaction::begin(db);
  TRY(tx);
  auto close = db.prepare(
      "UPDATE failures SET status = ?, decided_by = ?, decided_at = ?, reason = ?, updated_at = ? "
      "WHERE commit_sha = ? AND test_id = ? AND status = 'open'");
  TRY(close);
  const int64_t now = now_epoch();
  size_t closed = 0;
  for (const auto& f : failures) {
    close->bind(1, status_name(status)).bind(2, by).bind(3, now).bind(4, reason).bind(5, now);
    TRY(close->bind(6, f.commit).bind(7, f.test_id).run());
    closed += static_cast<size_t>(close->changes());
  }
  TRY(tx->commit());
  return closed;
}

std::string decision_state(const StoredFailure& f) {
  return status_name(f.status) + (f.decided_at ? "@" + std::to_string(*f.decided_at) : "");
}

Result<StoredFailure> MiningStore::decide(const std::string& case_id, Decision decision, const std::string& author,
                                          const std::string& reason, const std::vector<LineRef>& keep,
                                          const std::string& seen) {
  Database& db = kb_.database();
  auto tx = Transaction::begin(db);
  TRY(tx);
  auto found = failure_by_case(case_id);
  TRY(found);
  StoredFailure f = std::move(*found);
  if (!seen.empty() && decision_state(f) != seen)
    return fail(f.case_id + " was " +
                (f.decided_at ? status_name(f.status) + " by " + f.decided_by + " at " + format_iso8601(*f.decided_at)
                              : "changed to " + status_name(f.status)) +
                " since it was shown: nothing was changed");
  if (!is_mined(f.status) || !f.labelled)
    return fail(f.case_id + " is " + status_name(f.status) + ": only mined cases can be audited");
  // The case as mined: the stored record without any earlier trim.
  auto original = db.prepare("SELECT record FROM failures WHERE commit_sha = ? AND test_id = ?");
  TRY(original);
  original->bind(1, f.commit).bind(2, f.test_id);
  TRY(original->step());
  auto mined = case_from_json(json::parse(original->text(0)));
  TRY(mined);
  FailureStatus status = FailureStatus::accepted;
  std::optional<std::string> kept;
  Case effective = *mined;
  if (decision == Decision::reject) status = FailureStatus::rejected;
  if (decision == Decision::trim) {
    status = FailureStatus::trimmed;
    if (keep.empty()) return fail("trim: give the lines to keep (--keep)");
    std::vector<LineRef> lines;
    for (const auto& k : keep) {
      if (std::find(mined->faulty_lines.begin(), mined->faulty_lines.end(), k) == mined->faulty_lines.end())
        return fail("trim: " + k.path + ":" + std::to_string(k.line) + " is not one of " + f.case_id +
                    "'s mined faulty lines");
      if (std::find(lines.begin(), lines.end(), k) == lines.end()) lines.push_back(k);
    }
    std::sort(lines.begin(), lines.end());
    effective.faulty_lines = lines;
    effective.record["faulty_lines"] = lines_json(lines, mined->fixes);
    kept = json_text(lines_json(lines, mined->fixes));
  }
  auto set = db.prepare(
      "UPDATE failures SET status = ?, decided_by = ?, decided_at = ?, reason = ?, kept = ?, updated_at = ? "
      "WHERE commit_sha = ? AND test_id = ?");
  TRY(set);
  const int64_t now = now_epoch();
  set->bind(1, status_name(status)).bind(2, author).bind(3, now).bind(4, reason);
  if (kept)
    set->bind(5, *kept);
  else
    set->bind_null(5);
  set->bind(6, now).bind(7, f.commit).bind(8, f.test_id);
  TRY(set->run());
  if (in_corpus(status)) {
    auto r = kb_.import_cases({effective}, {{"audit of " + f.case_id}}, /*replace=*/true);
    TRY(r);
  } else if (auto r = kb_.remove_cases({f.case_id}); !r) {
    return std::unexpected(r.error());
  }
  TRY(tx->commit());
  f.status = status;
  f.decided_by = author;
  f.decided_at = now;
  f.reason = reason;
  f.labelled = std::move(effective);
  return f;
}

void history_from_config(const Config& config, HistorySettings& h) {
  h.sigma = config.number("mine.sigma");
  h.test_only_fixes = config.boolean("mine.test_only_fixes");
  h.test_code = config.str("mine.test_code");
  h.project = config.str("project");
}

Result<SyncOptions> sync_options(const HistorySettings& h) {
  SyncOptions o;
  o.first_parent = !h.all_parents;
  o.sigma = h.sigma;
  o.project = h.project;
  o.test_only_fixes = h.test_only_fixes;
  if (!h.test_code.empty()) {
    auto rule = TestCodeRule::parse(h.test_code);
    TRY(rule);
    o.test_code = std::move(*rule);
  }
  for (const auto& [text, slot] : {std::pair{h.since, &o.since}, std::pair{h.until, &o.until}}) {
    if (text.empty()) continue;
    // A date alone is its midnight, UTC.
    const bool date_only = text.size() == 10 && text[4] == '-' && text[7] == '-';
    auto t = parse_iso8601(date_only ? text + "T00:00:00Z" : text);
    if (!t)
      return fail("--since/--until \"" + text + "\" is neither a date (2023-01-01) nor an ISO-8601 time " +
                  "(2023-01-01T12:00:00Z)");
    *slot = *t;
  }
  return o;
}

Result<std::string> MiningStore::cases_jsonl(const std::vector<FailureStatus>& statuses) {
  auto failures = this->failures(statuses);
  TRY(failures);
  std::string out;
  for (const auto& f : *failures)
    if (f.labelled) out += json_text(case_to_json(*f.labelled)) + "\n";
  return out;
}

}  // namespace spark
