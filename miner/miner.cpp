#include "miner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "error_message.h"
#include "test_scope.h"
#include "text.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

Result<Outcome> parse_outcome(const std::string& s) {
  if (s == "passed") return Outcome::passed;
  if (s == "failed") return Outcome::failed;
  if (s == "error") return Outcome::error;
  if (s == "skipped") return Outcome::skipped;
  return fail("outcome \"" + s + "\" is not passed, failed, error or skipped");
}

bool is_hex_sha(const std::string& s) {
  if (s.size() < 7 || s.size() > 40) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

bool looks_like_test_file(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  return name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py") || name == "conftest.py");
}

}  // namespace

Result<std::vector<RecordedOutcome>> read_outcomes_jsonl(const fs::path& path) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  std::vector<RecordedOutcome> out;
  size_t line_no = 0;
  for (std::string_view line : split_lines(*text)) {
    ++line_no;
    if (is_blank(line)) continue;
    const std::string where = path.string() + ":" + std::to_string(line_no) + ": ";
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail(where + "not a JSON object");
    for (const char* key : {"commit", "test_id", "outcome"})
      if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
        return fail(where + "\"" + key + "\" must be a non-empty string");
    RecordedOutcome o;
    o.commit = j["commit"].get<std::string>();
    if (!is_hex_sha(o.commit)) return fail(where + "commit \"" + o.commit + "\" is not a hex sha");
    o.test_id = j["test_id"].get<std::string>();
    auto oc = parse_outcome(j["outcome"].get<std::string>());
    if (!oc) return fail(where + oc.error().message);
    o.outcome = *oc;
    if (j.contains("time") && !j["time"].is_null()) {
      if (!j["time"].is_string()) return fail(where + "\"time\" must be an ISO-8601 string");
      auto t = parse_iso8601(j["time"].get<std::string>());
      if (!t) return fail(where + "time: " + t.error().message);
      o.time = *t;
    }
    if (j.contains("message") && j["message"].is_string()) o.message = j["message"].get<std::string>();
    o.origin = path.string() + ":" + std::to_string(line_no);
    out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<RecordedOutcome>> read_outcomes_junit(const fs::path& path, const std::string& commit,
                                                          const fs::path& repo_root) {
  std::string sha = commit;
  if (sha.empty()) {
    sha = path.stem().string();
    if (!is_hex_sha(sha))
      return fail(path.string() + ": which commit is this report of? Name the file <sha>.xml or give --commit");
  }
  auto report = read_junit(path, repo_root);
  if (!report) return std::unexpected(report.error());
  std::vector<RecordedOutcome> out;
  for (const auto& t : report->outcomes) {
    RecordedOutcome o;
    o.commit = sha;
    o.test_id = t.test_id;
    o.outcome = t.outcome;
    o.message = t.message;
    if (t.time) {
      auto tm = parse_iso8601(*t.time);
      if (!tm) tm = parse_iso8601(*t.time + "Z");
      if (tm) o.time = *tm;
    }
    o.origin = path.string() + ":" + std::to_string(t.report_line);
    out.push_back(std::move(o));
  }
  return out;
}

Result<MineReport> mine(const GitRepository& repo, const std::vector<RecordedOutcome>& outcomes,
                        const MineOptions& options) {
  MineReport report;
  auto history = repo.history(options.first_parent, options.since, options.until);
  if (!history) return std::unexpected(history.error());
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < history->size(); ++i) position[(*history)[i].sha] = i;
  const std::string project = options.project.empty() ? repo.workdir().parent_path().filename().string() : options.project;

  // Each test's outcomes along the history.
  struct At {
    size_t pos;
    const RecordedOutcome* o;
  };
  std::map<std::string, std::vector<At>> by_test;
  for (const auto& o : outcomes) {
    auto sha = repo.resolve(o.commit);
    auto it = sha ? position.find(*sha) : position.end();
    if (it == position.end()) {
      ++report.not_in_history;
      report.warnings.push_back(o.origin + ": commit " + o.commit.substr(0, 12) +
                                (sha ? " is not on the walked history" : ": " + sha.error().message));
      continue;
    }
    by_test[o.test_id].push_back({it->second, &o});
  }
  std::vector<std::pair<Case, size_t>> mined;
  for (auto& [test_id, list] : by_test) {
    std::stable_sort(list.begin(), list.end(), [](const At& a, const At& b) { return a.pos < b.pos; });
    for (size_t i = 0; i < list.size(); ++i) {
      const RecordedOutcome& o = *list[i].o;
      if (o.outcome != Outcome::failed && o.outcome != Outcome::error) continue;
      ++report.failures;
      const At* fix = nullptr;
      for (size_t j = i + 1; j < list.size() && !fix; ++j)
        if (list[j].pos > list[i].pos && list[j].o->outcome == Outcome::passed) fix = &list[j];
      if (!fix) {
        ++report.never_fixed;
        continue;
      }
      const CommitInfo& faulty_commit = (*history)[list[i].pos];
      const CommitInfo& fixed_commit = (*history)[fix->pos];
      // The test's own file, and the repository's test files the traceback names.
      std::vector<std::string> paths = {parse_test_id(test_id).path};
      for (const auto& fr : parse_traceback(o.message)) {
        std::string p = fr.path;
        while (p.starts_with("./")) p.erase(0, 2);
        if (looks_like_test_file(p) && std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
      }
      Case c;
      bool changed = false, have_main = false;
      for (const auto& p : paths) {
        auto before = repo.file_at(faulty_commit.sha, p);
        if (!before) {
          report.warnings.push_back(o.origin + ": " + before.error().message);
          continue;
        }
        if (!*before) continue;  // not a file of the repository at that commit
        if (p == paths.front()) have_main = true;
        auto after = repo.file_at(fixed_commit.sha, p);
        if (!after) return std::unexpected(after.error());
        if (!*after || **after == **before) {
          c.files.push_back({p, **before});
          continue;
        }
        changed = true;
        auto lines = removed_or_modified_lines(**before, **after, p);
        if (!lines) return std::unexpected(lines.error());
        for (int l : *lines) c.faulty_lines.push_back({p, l});
        c.files.push_back({p, **before});
      }
      if (!have_main) {
        ++report.missing_file;
        report.warnings.push_back(o.origin + ": " + paths.front() + " is not in commit " + faulty_commit.sha.substr(0, 10));
        continue;
      }
      if (!changed) {
        ++report.not_test_fault;
        continue;
      }
      if (c.faulty_lines.empty()) {
        ++report.only_additions;
        continue;
      }
      // Through the interchange format's reader: the case is validated like an imported one.
      nlohmann::json record = {
          {"id", project + "-" + faulty_commit.sha.substr(0, 10) + "-" + hex64(fnv1a64(test_id)).substr(0, 8)},
          {"project", project},
          {"test_id", test_id},
          {"language", "python"},
          {"failure_time", format_iso8601(o.time.value_or(faulty_commit.time))},
          {"error_message", o.message},
          {"faulty_commit", faulty_commit.sha},
          {"fixed_commit", fixed_commit.sha},
          {"source", "history"}};
      record["files"] = nlohmann::json::array();
      for (const auto& f : c.files) record["files"].push_back({{"path", f.path}, {"content", f.content}});
      record["faulty_lines"] = nlohmann::json::array();
      for (const auto& fl : c.faulty_lines) record["faulty_lines"].push_back({{"path", fl.path}, {"line", fl.line}});
      auto built = case_from_json(std::move(record));
      if (!built) {
        report.warnings.push_back(o.origin + ": " + built.error().message);
        continue;
      }
      const size_t n = built->faulty_lines.size();
      c = std::move(*built);
      mined.emplace_back(std::move(c), n);
    }
  }
  // The 3-sigma rule over the faulty-line counts of everything mined.
  if (!mined.empty()) {
    double sum = 0;
    for (const auto& [c, n] : mined) sum += static_cast<double>(n);
    report.mean = sum / static_cast<double>(mined.size());
    double var = 0;
    for (const auto& [c, n] : mined) var += std::pow(static_cast<double>(n) - report.mean, 2);
    report.sd = std::sqrt(var / static_cast<double>(mined.size()));
    report.threshold = report.mean + options.sigma * report.sd;
  }
  for (auto& [c, n] : mined) (static_cast<double>(n) > report.threshold && report.sd > 0 ? report.quarantined : report.cases).push_back(std::move(c));
  return report;
}

}  // namespace spark
