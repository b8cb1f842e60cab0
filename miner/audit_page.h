// The audit's views of mined cases, shared by `spark audit list` (text, JSON, the static HTML report) and the pages
// `spark audit serve` serves (audit_site.h): a fix's side-by-side diff with the faulty lines marked, a case as JSON,
// the lines a trim keeps.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/redact.h"
#include "miner/miner.h"
#include "miner/mining_store.h"

namespace spark::audit {

struct DiffFile {
  std::string path;
  std::string before, after;
  bool deleted = false;
};

// The files the case's fix changed, before (the failing commit) and after (the fix).
std::vector<DiffFile> diff_files(const StoredFailure& f);

// An ISO 8601 time, or "-".
std::string date_text(std::optional<int64_t> t);

// Every failing commit behind a mined case: meta.occurrences when the fault merge put it there, else the one failure.
nlohmann::json occurrences_of(const StoredFailure& f);

// A mined case as `spark audit list --format json` lists it.
nlohmann::json failure_json(const StoredFailure& f);

// The pages' style sheet (inline: no page loads anything from elsewhere).
extern const char* const kStyle;

// One side-by-side table per file: the fix's hunks (3 lines of context), removed lines left, added lines right, the
// lines in `faulty` outlined. With `trim_form`, each line of `choosable` carries a checkbox of that form (ticked when
// in `ticked`) whose value is "path:line".
std::string side_by_side_html(const DiffFile& d, const std::set<int>& faulty, const std::string& trim_form = "",
                              const std::set<int>& choosable = {}, const std::set<int>& ticked = {});

// The static report (`spark audit list --html`): every case with its diff and the commands that decide it.
std::string audit_html(const std::vector<StoredFailure>& failures, const OutlierRule& rule, const std::string& kb);
// What `spark audit accept | reject | trim` says of the failure it decided.
std::string decided_text(const StoredFailure& decided);

// The page for `spark audit list --html`, meant to be shared: made from redacted copies (messages, labelled cases,
// fixed files) unless `redactor` is null (redaction off); how many secrets went is said in `notes`.
std::string shared_audit_html(const std::vector<StoredFailure>& failures, const OutlierRule& rule,
                              const std::string& kb, const Redactor* redactor, std::vector<std::string>& notes);

// "12", "12-14", "path:12", "path:12-14" → line refs (a bare number is in `default_path`, the test's own file).
Result<std::vector<LineRef>> parse_keep(const std::vector<std::string>& specs, const std::string& default_path);

// The file a bare line number names: the case's first file (a Java id names only a package path).
std::string test_file_of(const StoredFailure& f);

// `spark audit list` as JSON (spark.audit/1: the rule and the cases) and as text.
nlohmann::json list_json(const std::vector<StoredFailure>& list, const OutlierRule& rule);
std::string list_text(const std::vector<StoredFailure>& list, const OutlierRule& rule, bool all);
// `spark audit show ID`: the case, where it failed, who decided it, and its fix's diff (in colour with `color`).
Result<std::string> show_text(const StoredFailure& f, bool color);

}  // namespace spark::audit
