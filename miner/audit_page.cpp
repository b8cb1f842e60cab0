#include "miner/audit_page.h"

#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/text.h"
#include "code/scope.h"
#include "formats/error_message.h"
#include "miner/git_history.h"

namespace spark::audit {

using nlohmann::json;

std::vector<DiffFile> diff_files(const StoredFailure& f) {
  std::vector<DiffFile> out;
  if (!f.labelled) return out;
  for (const auto& fixed : f.fixed_files) {
    const SourceFile* before = f.labelled->file(fixed.path);
    if (before) out.push_back({fixed.path, before->content, fixed.content, fixed.content.empty()});
  }
  return out;
}

std::string date_text(std::optional<int64_t> t) { return t ? format_iso8601(*t) : "-"; }

// Every failing commit behind a mined case: meta.occurrences when the fault merge put it there, else the one failure.
json occurrences_of(const StoredFailure& f) {
  if (f.labelled) {
    const json& meta = f.labelled->record.contains("meta") ? f.labelled->record["meta"] : json();
    if (meta.is_object() && meta.contains("occurrences")) return meta["occurrences"];
  }
  json o = {{"count", 1}, {"first_commit", f.commit}, {"last_commit", f.commit}, {"commits", json::array({f.commit})}};
  if (f.time) o["first_time"] = o["last_time"] = format_iso8601(*f.time);
  return o;
}

json failure_json(const StoredFailure& f) {
  json j = {{"id", f.case_id},
            {"status", status_name(f.status)},
            {"test_id", f.test_id},
            {"faulty_commit", f.commit},
            {"fixed_commit", f.fixed_commit},
            {"faulty_lines_mined", f.faulty_count ? json(*f.faulty_count) : json()},
            {"faulty_lines", json::array()},
            {"occurrences", occurrences_of(f)}};
  if (f.labelled)
    for (const auto& l : f.labelled->faulty_lines) {
      json line = {{"path", l.path}, {"line", l.line}};
      if (auto it = f.labelled->fixes.find(l); it != f.labelled->fixes.end()) line["fix"] = it->second;
      j["faulty_lines"].push_back(std::move(line));
    }
  if (f.decided_at) {
    j["decided_by"] = f.decided_by;
    j["decided_at"] = format_iso8601(*f.decided_at);
    j["reason"] = f.reason;
  }
  return j;
}

const char* const kStyle =
    "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.4em}"
    "section{border-top:1px solid #ccc;margin-top:2em;padding-top:1em}"
    ".meta td{padding:0 1em 0 0}.badge{padding:1px 6px;border-radius:3px;background:#eee}"
    ".quarantined{background:#fde2b8}.accepted,.labelled{background:#d4f4d4}.rejected{background:#f8d0d0}"
    ".trimmed{background:#d8e4fb}table.diff{border-collapse:collapse;width:100%;font:12px/1.35 monospace;"
    "table-layout:fixed;margin:.5em 0}table.diff caption{text-align:left;font-weight:bold;padding:.3em 0}"
    "table.diff td{padding:0 .4em;white-space:pre-wrap;word-break:break-all;vertical-align:top}"
    "col.n{width:3.5em}td.n{color:#888;text-align:right}td.del{background:#fdd}td.add{background:#dfd}"
    "td.faulty{outline:2px solid #c00}td.empty{background:#f4f4f4}tr.hunk td{background:#eef;color:#446}"
    "pre.cmd{background:#f6f6f6;padding:.5em}";

// One side-by-side table per file: the fix's hunks (3 lines of context), removed lines left, added lines right.
std::string side_by_side_html(const DiffFile& d, const std::set<int>& faulty, const std::string& trim_form,
                              const std::set<int>& choosable, const std::set<int>& ticked) {
  auto patch = unified_diff(d.before, d.after, d.path, 3);
  if (!patch) return "<p class=err>" + html_escape(patch.error().message) + "</p>";
  std::string out = "<table class=diff><caption>" + html_escape(d.path) + (d.deleted ? " (deleted by the fix)" : "") +
                    "</caption><colgroup><col class=n><col><col class=n><col></colgroup>";
  std::vector<std::pair<int, std::string>> minus, plus;
  const auto flush = [&] {
    const size_t n = std::max(minus.size(), plus.size());
    for (size_t i = 0; i < n; ++i) {
      out += "<tr>";
      if (i < minus.size()) {
        const int line = minus[i].first;
        const bool f = faulty.count(line) > 0;
        std::string box;
        if (!trim_form.empty() && choosable.count(line))
          box = "<input type=checkbox name=keep form='" + html_escape(trim_form) + "' value='" +
                html_escape(d.path + ":" + std::to_string(line)) + "'" + (ticked.count(line) ? " checked" : "") +
                " title='keep line " + std::to_string(line) + " as faulty'> ";
        out += "<td class=n>" + box + std::to_string(line) + "</td><td class='del" + (f ? " faulty" : "") + "'>" +
               html_escape(minus[i].second) + "</td>";
      } else {
        out += "<td class=n></td><td class=empty></td>";
      }
      if (i < plus.size())
        out += "<td class=n>" + std::to_string(plus[i].first) + "</td><td class=add>" + html_escape(plus[i].second) +
               "</td>";
      else
        out += "<td class=n></td><td class=empty></td>";
      out += "</tr>";
    }
    minus.clear();
    plus.clear();
  };
  int old_line = 0, new_line = 0;
  for (std::string_view line : split_lines(*patch)) {
    if (line.starts_with("---") || line.starts_with("+++") || line.starts_with("diff ") || line.starts_with("index "))
      continue;
    if (line.starts_with("@@")) {
      flush();
      std::sscanf(std::string(line).c_str(), "@@ -%d%*[^+]+%d", &old_line, &new_line);
      out += "<tr class=hunk><td colspan=4>" + html_escape(std::string(line)) + "</td></tr>";
      continue;
    }
    if (line.starts_with("\\")) continue;  // "\ No newline at end of file"
    const std::string text = line.empty() ? "" : std::string(line.substr(1));
    if (line.starts_with("-")) {
      minus.emplace_back(old_line++, text);
    } else if (line.starts_with("+")) {
      plus.emplace_back(new_line++, text);
    } else {
      flush();
      out += "<tr><td class=n>" + std::to_string(old_line++) + "</td><td>" + html_escape(text) + "</td><td class=n>" +
             std::to_string(new_line++) + "</td><td>" + html_escape(text) + "</td></tr>";
    }
  }
  flush();
  return out + "</table>";
}

std::string audit_html(const std::vector<StoredFailure>& failures, const OutlierRule& rule, const std::string& kb) {
  std::string out =
      std::string("<!doctype html><html lang=en><head><meta charset=utf-8><title>spark audit</title><style>") + kStyle +
      "</style></head><body><h1>spark audit: " + std::to_string(failures.size()) +
      " mined case(s)</h1><p>Knowledge base <code>" + html_escape(kb) + "</code>. Outlier rule: quarantine above " +
      html_escape(rule.describe()) +
      ". Lines outlined in red are the mined faulty lines (removed or modified by the fix).</p>";
  for (const auto& f : failures) {
    out += "<section id='" + html_escape(f.case_id) + "'><h2>" + html_escape(f.case_id) + " <span class='badge " +
           status_name(f.status) + "'>" + status_name(f.status) + "</span></h2><table class=meta>";
    out += "<tr><td>test</td><td><code>" + html_escape(f.test_id) + "</code></td></tr>";
    out += "<tr><td>failing commit</td><td><code>" + f.commit + "</code></td></tr>";
    out += "<tr><td>fix</td><td><code>" + f.fixed_commit + "</code></td></tr>";
    out += "<tr><td>faulty lines</td><td>" + (f.faulty_count ? std::to_string(*f.faulty_count) : "-") + " mined" +
           (f.status == FailureStatus::trimmed && f.labelled
                ? ", " + std::to_string(f.labelled->faulty_lines.size()) + " kept"
                : "") +
           "</td></tr>";
    if (f.decided_at)
      out += "<tr><td>decision</td><td>" + html_escape(f.decided_by) + ", " + date_text(f.decided_at) +
             (f.reason.empty() ? "" : ": " + html_escape(f.reason)) + "</td></tr>";
    out += "</table>";
    if (!f.message.empty())
      out += "<details><summary>error message</summary><pre>" + html_escape(f.message.substr(0, 20000)) +
             "</pre></details>";
    for (const auto& d : diff_files(f)) {
      std::set<int> faulty;
      if (f.labelled)
        for (const auto& l : f.labelled->faulty_lines)
          if (l.path == d.path) faulty.insert(l.line);
      out += side_by_side_html(d, faulty);
    }
    out += "<pre class=cmd>spark audit accept " + html_escape(f.case_id) + "\nspark audit reject " +
           html_escape(f.case_id) + " --reason \"…\"\nspark audit trim " + html_escape(f.case_id) +
           " --keep LINE[,LINE…]</pre></section>";
  }
  return out + "</body></html>\n";
}

// "12", "12-14", "path:12", "path:12-14" → line refs (a bare number is in the test's own file).
Result<std::vector<LineRef>> parse_keep(const std::vector<std::string>& specs, const std::string& default_path) {
  std::vector<LineRef> out;
  for (const auto& spec : specs) {
    std::string path = default_path, range = spec;
    if (auto colon = spec.rfind(':'); colon != std::string::npos) {
      path = spec.substr(0, colon);
      range = spec.substr(colon + 1);
    }
    int a = 0, b = 0;
    char tail = 0;
    const int n = std::sscanf(range.c_str(), "%d-%d%c", &a, &b, &tail);
    if (n == 1) b = a;
    if (n < 1 || n > 2 || a < 1 || b < a)
      return fail("--keep \"" + spec + "\": not a line or range (12, 12-14, path:12)");
    for (int l = a; l <= b; ++l) out.push_back({path, l});
  }
  return out;
}

std::string test_file_of(const StoredFailure& f) {
  return f.labelled && !f.labelled->files.empty() ? f.labelled->files.front().path
                                                  : parse_test_id(f.test_id, language_of_test_id(f.test_id)).path;
}

namespace {

std::string colorize(const std::string& patch, bool color) {
  if (!color) return patch;
  std::string out;
  for (std::string_view line : split_lines(patch)) {
    const char* c = line.starts_with("@@")                               ? "\033[36m"
                    : line.starts_with("---") || line.starts_with("+++") ? "\033[1m"
                    : line.starts_with("-")                              ? "\033[31m"
                    : line.starts_with("+")                              ? "\033[32m"
                                                                         : nullptr;
    out += c ? std::string(c) + std::string(line) + "\033[0m\n" : std::string(line) + "\n";
  }
  return out;
}

// "tests/test_a.py: 3, 7-9; tests/helpers.py: 2"
std::string lines_text(const std::vector<LineRef>& lines) {
  std::string out, path;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].path != path) {
      path = lines[i].path;
      out += (out.empty() ? "" : "; ") + path + ": ";
    } else {
      out += ", ";
    }
    size_t j = i;
    while (j + 1 < lines.size() && lines[j + 1].path == path && lines[j + 1].line == lines[j].line + 1) ++j;
    out += std::to_string(lines[i].line) + (j > i ? "-" + std::to_string(lines[j].line) : "");
    i = j;
  }
  return out;
}

}  // namespace

json list_json(const std::vector<StoredFailure>& list, const OutlierRule& rule) {
  json j = {{"schema", "spark.audit/1"},
            {"rule",
             {{"n", rule.n}, {"mean", rule.mean}, {"sd", rule.sd}, {"sigma", rule.sigma}, {"threshold", rule.threshold}}},
            {"cases", json::array()}};
  for (const auto& f : list) j["cases"].push_back(failure_json(f));
  return j;
}

std::string list_text(const std::vector<StoredFailure>& list, const OutlierRule& rule, bool all) {
  std::string out = "outlier rule: quarantine above " + rule.describe() + "\n";
  if (list.empty()) out += all ? "no mined cases\n" : "the quarantine is empty\n";
  for (const auto& f : list) {
    char line[512];
    std::snprintf(line, sizeof line, "%-34s %-11s %4s lines  %s  %.10s..%.10s", f.case_id.c_str(),
                  status_name(f.status).c_str(), f.faulty_count ? std::to_string(*f.faulty_count).c_str() : "-",
                  f.test_id.c_str(), f.commit.c_str(), f.fixed_commit.c_str());
    out += line;
    if (f.decided_at) out += "  [" + f.decided_by + ", " + date_text(f.decided_at) + "]";
    if (const size_t n = occurrences_of(f).value("count", size_t{1}); n > 1)
      out += "  (failed at " + std::to_string(n) + " commits)";
    out += "\n";
  }
  return out;
}

Result<std::string> show_text(const StoredFailure& f, bool color) {
  std::string out = f.case_id + "  " + status_name(f.status) + "\n  test:     " + f.test_id +
                    "\n  failing:  " + f.commit + "\n  fix:      " + f.fixed_commit + "\n  faulty lines: ";
  if (f.labelled) out += lines_text(f.labelled->faulty_lines);
  out += "\n";
  if (const json o = occurrences_of(f); o.value("count", 1) > 1)
    out += "  failed at " + std::to_string(o.value("count", 1)) + " commits, " +
           o.value("first_commit", "").substr(0, 10) + " (" + o.value("first_time", "?") + ") to " +
           o.value("last_commit", "").substr(0, 10) + " (" + o.value("last_time", "?") + ")\n";
  if (f.decided_at)
    out += "  decided:  " + f.decided_by + ", " + date_text(f.decided_at) +
           (f.reason.empty() ? "" : ": " + f.reason) + "\n";
  out = terminal_lines(out) + "\n";
  for (const auto& d : diff_files(f)) {
    auto patch = unified_diff(d.before, d.after, d.path, 3);
    TRY(patch);
    out += colorize(terminal_lines(*patch), color);
  }
  return out;
}

std::string shared_audit_html(const std::vector<StoredFailure>& failures, const OutlierRule& rule,
                              const std::string& kb, const Redactor* redactor, std::vector<std::string>& notes) {
  if (!redactor) return audit_html(failures, rule, kb);
  const auto redact_failure = [](StoredFailure& f, const Redactor& r, std::map<std::string, size_t>& counts) {
    size_t n = r.redact(f.message, counts);
    if (f.labelled) n += redact_case(*f.labelled, r, counts);
    for (auto& file : f.fixed_files) n += r.redact(file.content, counts);
    return n;
  };
  return audit_html(redacted_copies(failures, *redactor, redact_failure, "the HTML report", notes), rule, kb);
}

std::string decided_text(const StoredFailure& decided) {
  return decided.case_id + ": " + status_name(decided.status) + " by " + decided.decided_by +
         (decided.status == FailureStatus::rejected || !decided.labelled
              ? " (kept out of the knowledge base)"
              : " (in the knowledge base with " + plural(decided.labelled->faulty_lines.size(), "faulty line") + ")");
}

}  // namespace spark::audit
