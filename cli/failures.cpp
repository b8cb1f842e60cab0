// `spark failures list | show ID | dismiss ID | expire`: the open failures (recorded, not yet fixed and labelled),
// and closing the ones that will never be fixed: dismissed by a person, or expired because their test is gone.
//
// One test failing at several commits is one open failure in the list: its first failing commit names it (the id is
// that failure's), and dismissing or expiring it closes every open failure of that test.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "commands.h"
#include "formats/failure_form.h"
#include "git_history.h"
#include "mining_store.h"
#include "recording.h"

namespace spark::cli {

namespace {

using nlohmann::json;

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

// One failure (or one test's open failures) as `spark failures --format json` writes it (docs/schemas).
json failure_json(const std::vector<StoredFailure>& rows, const TipHistory* history, bool with_message) {
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

std::string age_text(const json& j) {
  std::string out;
  if (j["age_commits"].is_number()) out = std::to_string(j["age_commits"].get<size_t>()) + " commit(s)";
  if (j["age_days"].is_number())
    out += (out.empty() ? "" : ", ") + std::to_string(static_cast<long long>(j["age_days"].get<double>())) + " day(s)";
  return out.empty() ? "age unknown" : out + " ago";
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

std::string time_or_unknown(const json& t) { return t.is_string() ? t.get<std::string>() : "time unknown"; }

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

}  // namespace

int cmd_failures(const Common& common, const FailuresArgs& args) {
  if (args.action != "list" && args.action != "expire" && args.id.empty()) {
    return usage_error("failures " + args.action + ": give the failure's id (see `spark failures list`)");
  }
  if (args.action == "list" && !kb_exists(common))  // nothing recorded yet
    return write_output("", args.format == "json" ? json_text(failures_json(json::array(), nullptr), 2) + "\n"
                                                  : list_text(json::array()));
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  MiningStore store(**kb);
  auto repo = GitRepository::open(args.repo);
  if (args.action == "expire") {
    if (!repo) return report_error(repo.error());
    auto notes = expire_gone_failures(**kb, **repo, "HEAD");
    if (!notes) return report_error(notes.error());
    for (const auto& n : *notes) note(n);
    if (notes->empty()) note("no open failure's test is gone at HEAD");
    return 0;
  }
  // The repository gives the ages in commits; without one (a store used elsewhere) they are unknown.
  std::optional<TipHistory> history;
  if (repo) {
    if (auto h = tip_history(**repo, "HEAD")) history = std::move(*h);
  }
  if (args.action == "list") {
    auto open = store.failures({FailureStatus::open});
    if (!open) return report_error(open.error());
    json failures = json::array();
    for (const auto& test : group_by_test(*open))
      failures.push_back(failure_json(test.failures, history ? &*history : nullptr, false));
    if (args.format == "json")
      return write_output("", json_text(failures_json(failures, history ? &*history : nullptr), 2) + "\n");
    return write_output("", terminal_lines(list_text(failures)));
  }
  auto found = find_failures(store, args.id, (*kb)->name());
  if (!found) return report_error(found.error());
  if (args.action == "show") {
    const json j = failure_json(*found, history ? &*history : nullptr, true);
    if (args.format == "json")
      return write_output("", json_text(failures_json(json::array({j}), history ? &*history : nullptr), 2) + "\n");
    return write_output("", terminal_lines(show_text(j)));
  }
  // dismiss
  const StoredFailure& first = found->front();
  if (first.status != FailureStatus::open)
    return report_error(Error{failure_id(first) + " (" + first.test_id + ") is " + status_name(first.status) +
                              ": only open failures can be dismissed"});
  auto closed =
      store.close_open(*found, FailureStatus::dismissed, author_or_default(args.author, args.repo), args.reason);
  if (!closed) return report_error(closed.error());
  note("dismissed " + std::to_string(*closed) + " open failure(s) of " + first.test_id +
       ": kept, never labelled, not re-run by the post-commit hook");
  return 0;
}

}  // namespace spark::cli
