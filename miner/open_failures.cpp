#include "miner/open_failures.h"

#include <cmath>

#include "base/text.h"
#include "formats/failure_form.h"

namespace spark {

using nlohmann::json;

namespace {

// The line that says what failed: the last exception and its message as the failure's form reads them, else the
// message's last non-blank line.
std::string error_line(std::string_view message) {
  const FailureForm form = parse_failure_form(message);
  if (!form.exception.empty())
    return clip(form.exception + (form.message.empty() ? "" : ": " + form.message), 200);
  const auto lines = split_lines(message);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (!is_blank(*it)) return clip(trim(*it), 200);
  return "";
}

json iso(std::optional<int64_t> t) { return t ? json(format_iso8601(*t)) : json(nullptr); }

std::string age_text(const json& j) {
  std::string out;
  if (j["age_commits"].is_number()) out = std::to_string(j["age_commits"].get<size_t>()) + " commit(s)";
  if (j["age_days"].is_number())
    out += (out.empty() ? "" : ", ") + std::to_string(static_cast<long long>(j["age_days"].get<double>())) + " day(s)";
  return out.empty() ? "age unknown" : out + " ago";
}

std::string time_or_unknown(const json& t) { return t.is_string() ? t.get<std::string>() : "time unknown"; }

}  // namespace

// One failure (or one test's open failures) as `spark failures --format json` writes it (docs/schemas).
json open_failure_json(const std::vector<StoredFailure>& rows, const TipHistory* history, bool with_message) {
  const StoredFailure& first = rows.front();
  const StoredFailure& last = rows.back();
  std::optional<int64_t> first_time = first.time;
  json age_commits = nullptr, age_days = nullptr;
  if (history) {
    if (auto at = history->position.find(first.commit); at != history->position.end()) {
      age_commits = history->commits.size() - 1 - at->second;
      if (!first_time) first_time = history->commits[at->second].time;
    }
  }
  if (first_time) age_days = std::floor(std::max<int64_t>(0, now_epoch() - *first_time) / 8640.0) / 10.0;
  json j = {{"id", failure_id(first)},
            {"test_id", first.test_id},
            {"status", status_name(first.status)},
            {"first_commit", first.commit},
            {"last_commit", last.commit},
            {"commits", rows.size()},
            {"first_time", iso(first_time)},
            {"last_time", iso(last.time)},
            {"age_commits", age_commits},
            {"age_days", age_days},
            {"error_line", error_line(last.message)},
            {"origin", last.origin}};
  if (first.decided_at) {
    j["closed_by"] = first.decided_by;
    j["closed_at"] = format_iso8601(*first.decided_at);
    j["reason"] = first.reason;
  }
  if (with_message) j["message"] = last.message;
  return j;
}

std::string list_text(const json& failures) {
  if (failures.empty()) return "no open failures\n";
  std::string out = std::to_string(failures.size()) +
                    " test(s) with open failures (spark failures show ID | dismiss ID | expire):\n";
  for (const auto& j : failures) {
    out += j["id"].get<std::string>() + "  " + j["test_id"].get<std::string>() + "\n    first failed at " +
           j["first_commit"].get<std::string>().substr(0, 10) + ", " + age_text(j) +
           (j["commits"].get<size_t>() > 1 ? "; failed at " + std::to_string(j["commits"].get<size_t>()) + " commits"
                                            : "") +
           "\n    " + j["error_line"].get<std::string>() + "\n";
  }
  return out;
}

std::string show_text(const json& j) {
  std::string out = j["id"].get<std::string>() + "  " + j["status"].get<std::string>() +
                    "\n  test:          " + j["test_id"].get<std::string>() +
                    "\n  first failed:  " + j["first_commit"].get<std::string>() + " (" +
                    time_or_unknown(j["first_time"]) + "), " + age_text(j) +
                    "\n  last failed:   " + j["last_commit"].get<std::string>() + " (" +
                    time_or_unknown(j["last_time"]) + ")" +
                    "\n  failed at:     " + std::to_string(j["commits"].get<size_t>()) + " commit(s)" +
                    "\n  recorded from: " + j["origin"].get<std::string>() + "\n";
  if (j.contains("closed_by"))
    out += "  closed:        by " + j["closed_by"].get<std::string>() + ", " + j["closed_at"].get<std::string>() +
           (j["reason"].get<std::string>().empty() ? "" : ": " + j["reason"].get<std::string>()) + "\n";
  std::string message = j["message"];
  if (!message.empty() && message.back() != '\n') message += "\n";
  return out + "\n" + message;
}

// The failures `id` names: a test id (its open failures, else its latest one), or a failure id or a unique prefix of
// one (an open failure stands for its test's open failures, oldest first; a closed one for itself).
Result<std::vector<StoredFailure>> find_failures(MiningStore& store, const std::string& id, const std::string& kb) {
  auto all = store.failures();
  TRY(all);
  std::vector<const StoredFailure*> named;
  for (const auto& f : *all)
    if (f.test_id == id) named.push_back(&f);
  const bool by_test = !named.empty();
  if (!by_test)
    for (const auto& f : *all)
      if (failure_id(f).starts_with(id)) named.push_back(&f);
  if (named.empty()) return fail("no failure \"" + id + "\" in " + kb + " (`spark failures list` shows the open ones)");
  if (!by_test && named.size() > 1)
    return fail("\"" + id + "\" names " + std::to_string(named.size()) + " failures (" + failure_id(*named[0]) + ", " +
                failure_id(*named[1]) + (named.size() > 2 ? ", …" : "") + "); give more of the id");
  std::vector<StoredFailure> out;
  if (by_test || named.front()->status == FailureStatus::open)
    for (const auto& f : *all)
      if (f.test_id == named.front()->test_id && f.status == FailureStatus::open) out.push_back(f);
  if (out.empty()) out.push_back(*named.back());
  return out;
}

json failures_json(const json& failures, const TipHistory* history) {
  return {{"schema", "spark.failures/1"},
          {"head", history ? json(history->head) : json(nullptr)},
          {"failures", failures}};
}

Result<std::string> failures_list(MiningStore& store, const TipHistory* history, bool as_json) {
  auto open = store.failures({FailureStatus::open});
  TRY(open);
  json failures = json::array();
  for (const auto& test : group_by_test(*open)) failures.push_back(open_failure_json(test.failures, history, false));
  return as_json ? json_text(failures_json(failures, history), 2) + "\n" : list_text(failures);
}

std::string failures_show(const std::vector<StoredFailure>& found, const TipHistory* history, bool as_json) {
  const json j = open_failure_json(found, history, true);
  return as_json ? json_text(failures_json(json::array({j}), history), 2) + "\n" : show_text(j);
}

Result<std::string> dismiss_failures(MiningStore& store, const std::vector<StoredFailure>& found,
                                     const std::string& author, const std::string& reason) {
  const StoredFailure& first = found.front();
  if (first.status != FailureStatus::open)
    return fail(failure_id(first) + " (" + first.test_id + ") is " + status_name(first.status) +
                ": only open failures can be dismissed");
  auto closed = store.close_open(found, FailureStatus::dismissed, author, reason);
  TRY(closed);
  return "dismissed " + std::to_string(*closed) + " open failure(s) of " + first.test_id +
         ": kept, never labelled, not re-run by the post-commit hook";
}

}  // namespace spark
