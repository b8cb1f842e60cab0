#include "miner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "code/test_scope.h"
#include "formats/error_message.h"

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
    if (auto deep = json_too_deep(line)) return fail(where + json_too_deep_message(*deep));
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
                                                         const GitRepository& repo,
                                                         std::vector<std::string>* warnings) {
  std::string sha = commit;
  if (sha.empty()) {
    sha = path.stem().string();
    if (!is_hex_sha(sha))
      return fail(path.string() + ": which commit is this report of? Name the file <sha>.xml or give --commit");
  }
  auto report = read_junit(path, test_files_at(repo, sha));
  if (!report) return std::unexpected(report.error());
  if (warnings) warnings->insert(warnings->end(), report->warnings.begin(), report->warnings.end());
  std::vector<RecordedOutcome> out;
  for (const auto& t : report->outcomes) {
    RecordedOutcome o;
    o.commit = sha;
    o.test_id = t.test_id;
    o.outcome = t.outcome;
    o.message = t.message;
    o.time = t.time;
    o.origin = path.string() + ":" + std::to_string(t.report_line);
    out.push_back(std::move(o));
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

std::string status_name(FailureStatus s) {
  switch (s) {
    case FailureStatus::open:
      return "open";
    case FailureStatus::dismissed:
      return "dismissed";
    case FailureStatus::expired:
      return "expired";
    case FailureStatus::labelled:
      return "labelled";
    case FailureStatus::quarantined:
      return "quarantined";
    case FailureStatus::accepted:
      return "accepted";
    case FailureStatus::rejected:
      return "rejected";
    case FailureStatus::trimmed:
      return "trimmed";
    case FailureStatus::not_test_fault:
      return "not_test_fault";
    case FailureStatus::only_additions:
      return "only_additions";
    case FailureStatus::mixed_fix:
      return "mixed_fix";
    case FailureStatus::missing_file:
      return "missing_file";
    case FailureStatus::flaky:
      return "flaky";
    case FailureStatus::duplicate:
      return "duplicate";
  }
  return "open";
}

std::optional<FailureStatus> parse_status(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(FailureStatus::duplicate); ++i)
    if (status_name(static_cast<FailureStatus>(i)) == s) return static_cast<FailureStatus>(i);
  return std::nullopt;
}

bool is_mined(FailureStatus s) {
  return s == FailureStatus::labelled || s == FailureStatus::quarantined || s == FailureStatus::accepted ||
         s == FailureStatus::rejected || s == FailureStatus::trimmed;
}

std::vector<FailureStatus> mined_statuses() {
  std::vector<FailureStatus> out;
  for (int i = 0; i <= static_cast<int>(FailureStatus::duplicate); ++i)
    if (is_mined(static_cast<FailureStatus>(i))) out.push_back(static_cast<FailureStatus>(i));
  return out;
}

bool is_test_path(const std::string& path) {
  const auto language = language_of_path(path);
  if (!language) return false;
  if (looks_like_test_file(path)) return true;
  const std::string name = fs::path(path).filename().string();
  if (*language == Language::java && (name.ends_with("Test.java") || name.ends_with("Tests.java") ||
                                      name.ends_with("IT.java") || name.starts_with("Test")))
    return true;
  if ((*language == Language::javascript || *language == Language::typescript) &&
      (name.find(".test.") != std::string::npos || name.find(".spec.") != std::string::npos ||
       path.find("__tests__/") != std::string::npos))
    return true;
  if (path.starts_with("src/test/") || path.find("/src/test/") != std::string::npos) return true;
  return path.starts_with("test/") || path.starts_with("tests/") || path.find("/test/") != std::string::npos ||
         path.find("/tests/") != std::string::npos;
}

std::vector<std::string> failure_paths(const std::string& test_id, const std::string& message, const TestFiles* files) {
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
  for (const auto& fr : parse_traceback(message)) {
    const std::string p = resolve(fr.path);
    if (is_test_path(p) && std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
  }
  return paths;
}

std::vector<SourceFile> failure_files(const GitRepository& repo, const std::string& sha, const std::string& test_id,
                                      const std::string& message, std::vector<std::string>* warnings) {
  std::vector<SourceFile> files;
  const TestFiles at = test_files_at(repo, sha);
  for (const auto& p : failure_paths(test_id, message, &at)) {
    auto content = repo.file_at(sha, p);
    if (!content) {
      if (warnings) warnings->push_back(content.error().message);
      continue;
    }
    if (*content) files.push_back({p, std::move(**content)});
  }
  return files;
}

std::string normalize_remote_url(std::string url) {
  // scheme://[user@]host[:port]/path, or scp-like [user@]host:path; a local path stays a path.
  if (auto scheme = url.find("://"); scheme != std::string::npos)
    url = url.substr(scheme + 3);
  else if (auto colon = url.find(':'); colon != std::string::npos && url.find('/') > colon)
    url[colon] = '/';
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

Result<Labelling> label_failure(const GitRepository& repo, const FailureInput& failure, const CommitInfo& faulty,
                                const CommitInfo& fixed, const LabelOptions& options) {
  Labelling out;
  const TestFiles at = test_files_at(repo, faulty.sha);
  const std::vector<std::string> paths = failure_paths(failure.test_id, failure.message, &at);
  if (options.test_only_fixes) {
    auto changed = repo.changed_paths(faulty.sha, fixed.sha);
    if (!changed) return std::unexpected(changed.error());
    for (const auto& p : *changed)
      if (!is_test_path(p)) {
        out.status = FailureStatus::mixed_fix;
        out.detail = "the fix also changed " + p;
        return out;
      }
  }
  std::vector<SourceFile> files;
  std::vector<LineRef> faulty_lines;
  bool changed = false, have_main = false;
  for (const auto& p : paths) {
    std::optional<std::string> before;
    if (failure.snapshot) {
      for (const auto& f : *failure.snapshot)
        if (f.path == p) before = f.content;
    } else {
      auto b = repo.file_at(faulty.sha, p);
      if (!b) {
        if (p == paths.front()) return std::unexpected(Error{failure.origin + ": " + b.error().message});
        continue;  // a helper the traceback names that cannot be read (binary): not part of the case
      }
      before = std::move(*b);
    }
    if (!before) continue;  // not a file of the repository at that commit
    if (p == paths.front()) have_main = true;
    auto after = repo.file_at(fixed.sha, p);
    if (!after) return std::unexpected(after.error());
    if (*after && **after != *before) {
      changed = true;
      auto lines = removed_or_modified_lines(*before, **after, p);
      if (!lines) return std::unexpected(lines.error());
      for (int l : *lines) faulty_lines.push_back({p, l});
      out.fixed_files.push_back({p, **after});
    } else if (!*after) {
      // The fix deleted the file: every line of it was removed.
      changed = true;
      const auto lines = split_lines(*before);
      for (size_t i = 0; i < lines.size(); ++i)
        if (!is_blank(lines[i])) faulty_lines.push_back({p, static_cast<int>(i + 1)});
      out.fixed_files.push_back({p, ""});
    }
    files.push_back({p, std::move(*before)});
  }
  if (!have_main) {
    out.status = FailureStatus::missing_file;
    out.detail = paths.front() + " is not in commit " + faulty.sha.substr(0, 10);
    return out;
  }
  if (!changed) {
    out.status = FailureStatus::not_test_fault;
    out.detail = "no test file changed between " + faulty.sha.substr(0, 10) + " and " + fixed.sha.substr(0, 10);
    return out;
  }
  if (faulty_lines.empty()) {
    out.status = FailureStatus::only_additions;
    out.detail = "the fix only added lines";
    return out;
  }
  // Through the interchange format's reader: the case is validated like an imported one.
  nlohmann::json record = {{"id", project_slug(options.project) + "-" + faulty.sha.substr(0, 10) + "-" +
                                      hex64(fnv1a64(failure.test_id)).substr(0, 8)},
                           {"project", options.project},
                           {"test_id", failure.test_id},
                           {"language", std::string(language_name(language_for(paths.front(), "")))},
                           {"failure_time", format_iso8601(failure.time.value_or(faulty.time))},
                           {"error_message", sanitize_utf8(failure.message)},
                           {"faulty_commit", faulty.sha},
                           {"fixed_commit", fixed.sha},
                           {"source", "history"}};
  record["files"] = nlohmann::json::array();
  for (const auto& f : files) record["files"].push_back({{"path", f.path}, {"content", f.content}});
  record["faulty_lines"] = nlohmann::json::array();
  for (const auto& fl : faulty_lines) record["faulty_lines"].push_back({{"path", fl.path}, {"line", fl.line}});
  auto built = case_from_json(std::move(record));
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

}  // namespace spark
