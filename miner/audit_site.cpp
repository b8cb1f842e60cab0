#include "miner/audit_site.h"

#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include "base/clock.h"
#include "base/text.h"
#include "miner/audit_page.h"

namespace spark {

namespace {

constexpr size_t kMaxRows = 1000;      // rows a list shows
constexpr size_t kMaxReason = 2000;    // characters of a reason kept
constexpr size_t kMaxMessage = 20000;  // characters of an error message shown

const char* const kSiteStyle =
    "nav a{margin-right:1.2em}nav{margin-bottom:1em}table.list{border-collapse:collapse}"
    "table.list td,table.list th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}"
    "form.decide{display:inline-block;margin:.5em 1.5em .5em 0;padding:.5em;border:1px solid #ccc;border-radius:4px}"
    "form.decide button{font-weight:bold}p.err{color:#a00;font-weight:bold}p.ok{color:#060;font-weight:bold}"
    "td.n input{margin:0 .3em 0 0}table.diff td.n{white-space:nowrap}col.n{width:5.5em}";

// A path segment: everything but unreserved characters percent-encoded.
std::string path_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// Equal strings, in a time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

HttpReply reply(int status, std::string body) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  r.headers = {{"Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; "
                "base-uri 'none'"},
               {"Referrer-Policy", "same-origin"},
               {"X-Content-Type-Options", "nosniff"},
               {"Cache-Control", "no-store"}};
  return r;
}

// A refusal: plain text, nothing of the store.
HttpReply refuse(int status, const std::string& why) {
  HttpReply r = reply(status, "spark audit serve: " + why + "\n");
  r.content_type = "text/plain; charset=utf-8";
  return r;
}

std::string badge(FailureStatus s) {
  return "<span class='badge " + status_name(s) + "'>" + status_name(s) + "</span>";
}

std::string count_of(size_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::string short_sha(const std::string& sha) { return html_escape(sha.substr(0, 10)); }

}  // namespace

std::string new_audit_token() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::string out;
  for (unsigned char b : bytes) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

std::string AuditSite::url() const { return "http://127.0.0.1:" + std::to_string(options_.port) + base() + "/"; }

HttpReply AuditSite::handle(const HttpRequest& request) {
  // The Host names this machine's loopback (DNS rebinding names another); any port: an SSH tunnel may forward another.
  const std::string host = request.header("host");
  const std::string host_name =
      host.starts_with("[") ? host.substr(0, host.find(']') + 1) : host.substr(0, host.rfind(':'));
  if (host_name != "127.0.0.1" && host_name != "localhost" && host_name != "[::1]")
    return refuse(403, "refused: the request names another host (" + host + ")");
  const std::string prefix = base();
  const std::string& path = request.path;
  if (path.size() < prefix.size() || !same_secret(path.substr(0, prefix.size()), prefix) ||
      (path.size() > prefix.size() && path[prefix.size()] != '/'))
    return refuse(403, "no access: open the address `spark audit serve` printed");
  const std::string rest = path.substr(prefix.size());
  if (rest.empty()) {
    HttpReply r = reply(303, "");
    r.headers.emplace_back("Location", prefix + "/");
    return r;
  }
  // A decision: /case/ID/accept|reject|trim.
  const bool decision =
      rest.starts_with("/case/") && (rest.ends_with("/accept") || rest.ends_with("/reject") || rest.ends_with("/trim"));
  if (decision) {
    if (request.method != "POST") {
      HttpReply r = refuse(405, request.method + " " + rest + ": a decision is sent with POST (the page's buttons)");
      r.headers.emplace_back("Allow", "POST");
      return r;
    }
    const std::string origin = request.header("origin");
    if (!origin.empty() && origin != "http://" + host)
      return refuse(403, "refused: a decision from another site (Origin " + origin + ")");
    const std::string site = request.header("sec-fetch-site");
    if (!site.empty() && site != "same-origin" && site != "none")
      return refuse(403, "refused: a decision from another site (Sec-Fetch-Site " + site + ")");
  } else if (request.method != "GET" && request.method != "HEAD") {
    HttpReply r = refuse(405, request.method + " " + rest + ": pages are read with GET");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  std::lock_guard lock(mutex_);
  return route(request, rest);
}

HttpReply AuditSite::route(const HttpRequest& request, const std::string& rest) {
  if (rest == "/") return index_page();
  if (rest == "/cases") return cases_page(request.param("status"));
  if (rest == "/failures") return failures_page();
  if (rest.starts_with("/case/")) {
    std::string id = rest.substr(6);
    const size_t slash = id.find('/');
    if (slash == std::string::npos) return case_page(id, request.param("done"));
    return decide(id.substr(0, slash), id.substr(slash + 1), request);
  }
  return refuse(404, "no page " + rest);
}

namespace {

// A page: the navigation, then `body`.
std::string page(const std::string& base, const std::string& title, const std::string& body, const std::string& kb) {
  return std::string("<!doctype html><html lang=en><head><meta charset=utf-8><title>") + html_escape(title) +
         " · spark audit</title><style>" + audit::kStyle + kSiteStyle + "</style></head><body><nav><a href='" + base +
         "/'>Quarantine</a><a href='" + base + "/cases'>Mined cases</a><a href='" + base +
         "/failures'>Open failures</a><small>knowledge base <code>" + html_escape(kb) + "</code></small></nav><h1>" +
         html_escape(title) + "</h1>" + body + "</body></html>\n";
}

std::string case_link(const std::string& base, const std::string& id) {
  return "<a href='" + base + "/case/" + path_escape(id) + "'>" + html_escape(id) + "</a>";
}

std::string case_rows(const std::string& base, const std::vector<StoredFailure>& list, const OutlierRule* rule) {
  std::string out =
      "<table class=list><tr><th>case</th><th>status</th><th>faulty lines</th><th>test</th><th>failing</th>"
      "<th>fix</th><th>decision</th></tr>";
  for (size_t i = 0; i < list.size() && i < kMaxRows; ++i) {
    const auto& f = list[i];
    std::string lines = f.faulty_count ? std::to_string(*f.faulty_count) : "-";
    if (rule && f.faulty_count && rule->outlier(*f.faulty_count)) lines += " &gt; " + fixed(rule->threshold, 2);
    out += "<tr><td>" + case_link(base, f.case_id) + "</td><td>" + badge(f.status) + "</td><td>" + lines +
           "</td><td><code>" + html_escape(f.test_id) + "</code></td><td><code>" + short_sha(f.commit) +
           "</code></td><td><code>" + short_sha(f.fixed_commit) + "</code></td><td>" +
           (f.decided_at ? html_escape(f.decided_by) + ", " + audit::date_text(f.decided_at) : "") + "</td></tr>";
  }
  out += "</table>";
  if (list.size() > kMaxRows)
    out += "<p>The first " + std::to_string(kMaxRows) + " of " + std::to_string(list.size()) +
           " are shown (`spark audit list --all --format json` lists them all).</p>";
  return out;
}

}  // namespace

HttpReply AuditSite::problem(int status, const std::string& title, const std::string& text,
                             const std::string& back_to) {
  const std::string base = this->base();
  std::string body = "<p class=err>" + html_escape(text) + "</p>";
  if (!back_to.empty()) body += "<p><a href='" + base + "/case/" + path_escape(back_to) + "'>Back to the case</a></p>";
  return reply(status, page(base, title, body, options_.kb));
}

HttpReply AuditSite::index_page() {
  const std::string base = this->base();
  auto rule = store_.rule(options_.sigma);
  auto list = store_.failures({FailureStatus::quarantined});
  if (!rule || !list) return problem(500, "Error", (!rule ? rule.error() : list.error()).message);
  std::string body =
      "<p>A mined case goes to the quarantine when its fix changed more test lines than the outlier "
      "rule allows: above " +
      html_escape(rule->describe()) +
      ". Such a fix is often a refactoring, not a fault: open a case to accept it, keep only its true "
      "faulty lines (trim) or reject it.</p>";
  if (list->empty())
    body += "<p class=ok>The quarantine is empty.</p>";
  else
    body += case_rows(base, *list, &*rule);
  return reply(200, page(base, "Quarantine: " + count_of(list->size(), "case"), body, options_.kb));
}

HttpReply AuditSite::cases_page(const std::string& status) {
  const std::string base = this->base();
  std::vector<FailureStatus> statuses = mined_statuses();
  const auto wanted = parse_status(status);
  if (wanted && is_mined(*wanted)) statuses = {*wanted};
  auto all = store_.failures(mined_statuses());
  if (!all) return problem(500, "Error", all.error().message);
  std::map<FailureStatus, size_t> counts;
  std::vector<StoredFailure> shown;
  for (auto& f : *all) {
    ++counts[f.status];
    if (std::find(statuses.begin(), statuses.end(), f.status) != statuses.end()) shown.push_back(std::move(f));
  }
  std::string body =
      "<p>Mined cases by status: <a href='" + base + "/cases'>all (" + std::to_string(all->size()) + ")</a>";
  for (const auto& [s, n] : counts)
    body += " · <a href='" + base + "/cases?status=" + status_name(s) + "'>" + status_name(s) + " (" +
            std::to_string(n) + ")</a>";
  body +=
      ". Labelled, accepted and trimmed cases are in the knowledge base (learnt); quarantined and rejected ones "
      "are not.</p>" +
      case_rows(base, shown, nullptr);
  return reply(200, page(base, "Mined cases: " + std::to_string(shown.size()), body, options_.kb));
}

HttpReply AuditSite::failures_page() {
  const std::string base = this->base();
  auto list = store_.failures({FailureStatus::open});
  if (!list) return problem(500, "Error", list.error().message);
  std::string body =
      "<p>Failures recorded and not fixed yet: each becomes a mined case when a later commit makes its "
      "test pass (`spark failures` lists them, `spark failures dismiss` closes one).</p>"
      "<table class=list><tr><th>test</th><th>commit</th><th>recorded</th><th>message</th></tr>";
  for (size_t i = 0; i < list->size() && i < kMaxRows; ++i) {
    const auto& f = (*list)[i];
    const std::string first_line = f.message.substr(0, std::min(f.message.find('\n'), size_t{200}));
    body += "<tr><td><code>" + html_escape(f.test_id) + "</code></td><td><code>" + short_sha(f.commit) +
            "</code></td><td>" + audit::date_text(f.time) + "</td><td><code>" + html_escape(first_line) +
            "</code></td></tr>";
  }
  body += "</table>";
  if (list->size() > kMaxRows)
    body += "<p>The first " + std::to_string(kMaxRows) + " of " + std::to_string(list->size()) + " are shown.</p>";
  return reply(200, page(base, "Open failures: " + std::to_string(list->size()), body, options_.kb));
}

HttpReply AuditSite::case_page(const std::string& id, const std::string& done) {
  const std::string base = this->base();
  auto found = store_.failure_by_case(id);
  if (!found) return problem(404, "No such case", found.error().message);
  const StoredFailure& f = *found;
  auto rule = store_.rule(options_.sigma);
  std::string body;
  if (!done.empty() && f.decided_at)
    body += "<p class=ok>" + html_escape(status_name(f.status)) + " by " + html_escape(f.decided_by) + " at " +
            audit::date_text(f.decided_at) +
            (in_corpus(f.status) ? ": in the knowledge base with " +
                                       count_of(f.labelled ? f.labelled->faulty_lines.size() : 0, "faulty line")
                                 : ": kept out of the knowledge base") +
            ".</p>";
  body += "<p>" + badge(f.status) + "</p><table class=meta>";
  body += "<tr><td>test</td><td><code>" + html_escape(f.test_id) + "</code></td></tr>";
  body += "<tr><td>failing commit</td><td><code>" + html_escape(f.commit) + "</code></td></tr>";
  body += "<tr><td>fix</td><td><code>" + html_escape(f.fixed_commit) + "</code></td></tr>";
  body += "<tr><td>faulty lines</td><td>" + (f.faulty_count ? std::to_string(*f.faulty_count) : "-") + " mined";
  if (f.labelled && f.labelled->faulty_lines.size() != f.mined_lines.size())
    body += ", " + std::to_string(f.labelled->faulty_lines.size()) + " kept";
  body += "</td></tr>";
  if (rule && f.faulty_count && f.status == FailureStatus::quarantined)
    body += "<tr><td>why quarantined</td><td>" + std::to_string(*f.faulty_count) +
            (rule->outlier(*f.faulty_count)
                 ? " faulty lines, above the outlier rule's " + html_escape(rule->describe())
                 : " faulty lines, within the outlier rule shown here (" + html_escape(rule->describe()) +
                       "): a stricter one quarantined it (another mine.sigma); the next `spark mine` or `spark "
                       "record` with this rule puts it back in the knowledge base") +
            "</td></tr>";
  if (const auto o = audit::occurrences_of(f); o.value("count", 1) > 1)
    body += "<tr><td>failed at</td><td>" + std::to_string(o.value("count", 1)) + " commits</td></tr>";
  if (f.decided_at)
    body += "<tr><td>decision</td><td>" + html_escape(f.decided_by) + ", " + audit::date_text(f.decided_at) +
            (f.reason.empty() ? "" : ": " + html_escape(f.reason)) + "</td></tr>";
  body += "</table>";
  if (!f.message.empty())
    body += "<details open><summary>error message</summary><pre>" + html_escape(f.message.substr(0, kMaxMessage)) +
            "</pre></details>";
  // The decisions: each form carries the state this page shows (MiningStore::decide's `seen`).
  const std::string action = base + "/case/" + path_escape(f.case_id) + "/";
  const std::string seen = "<input type=hidden name=seen value='" + html_escape(decision_state(f)) + "'>";
  const bool decidable = is_mined(f.status) && f.status != FailureStatus::duplicate && f.labelled;
  if (decidable) {
    body += "<div class=actions>";
    body += "<form class=decide method=post action='" + action + "accept'>" + seen +
            "<input name=reason size=30 placeholder='reason (optional)'> <button type=submit id=accept>Accept</button>"
            "<br><small>into the knowledge base with every mined faulty line</small></form>";
    body += "<form class=decide method=post id=trim action='" + action + "trim'>" + seen +
            "<input name=reason size=30 placeholder='reason (optional)'> <button type=submit id=trim-button>Trim"
            "</button><br><small>into the knowledge base with only the lines ticked below</small></form>";
    body += "<form class=decide method=post action='" + action + "reject'>" + seen +
            "<input name=reason size=30 placeholder='why (e.g. a refactoring)'> <button type=submit id=reject>Reject"
            "</button><br><small>never into the knowledge base</small></form>";
    body += "</div>";
  }
  for (const auto& d : audit::diff_files(f)) {
    std::set<int> faulty, choosable;
    if (f.labelled)
      for (const auto& l : f.labelled->faulty_lines)
        if (l.path == d.path) faulty.insert(l.line);
    for (const auto& l : f.mined_lines)
      if (l.path == d.path) choosable.insert(l.line);
    // Ticked: the lines a trim kept. A case never trimmed starts with none ticked: a trim keeps a few of many.
    body += audit::side_by_side_html(d, faulty, decidable ? "trim" : "", choosable,
                                     f.status == FailureStatus::trimmed ? faulty : std::set<int>{});
  }
  body +=
      "<p><small>Lines outlined in red are the case's faulty lines (removed or modified by the fix); tick the "
      "true faulty ones to keep, then Trim.</small></p>";
  return reply(200, page(base, f.case_id, body, options_.kb));
}

HttpReply AuditSite::decide(const std::string& id, const std::string& action, const HttpRequest& request) {
  auto found = store_.failure_by_case(id);
  if (!found || found->case_id != id) return problem(404, "No such case", "no mined case has the id " + id);
  const std::string seen = request.param("seen");
  if (seen.empty())
    return problem(400, "Not decided",
                   "The form did not say which state of the case it showed: reload the page and decide again.", id);
  const Decision decision = action == "accept"   ? Decision::accept
                            : action == "reject" ? Decision::reject
                                                 : Decision::trim;
  std::vector<LineRef> keep;
  if (decision == Decision::trim) {
    const auto specs = request.params_named("keep");
    if (specs.empty())
      return problem(400, "Not trimmed", "Tick at least one faulty line to keep (or reject the case).", id);
    auto parsed = audit::parse_keep(specs, audit::test_file_of(*found));
    if (!parsed) return problem(400, "Not trimmed", parsed.error().message, id);
    keep = std::move(*parsed);
  }
  std::string reason = request.param("reason");
  if (reason.size() > kMaxReason) reason.resize(kMaxReason);
  auto decided = store_.decide(id, decision, options_.author, reason, keep, seen);
  if (!decided) {
    // Decided meanwhile (another browser, or the command line): the first decision stands.
    auto now = store_.failure_by_case(id);
    const bool conflict = now && decision_state(*now) != seen;
    return problem(conflict ? 409 : 400, conflict ? "Already decided" : "Not decided", decided.error().message, id);
  }
  HttpReply r = reply(303, "");
  r.headers.emplace_back("Location", base() + "/case/" + path_escape(id) + "?done=1");
  return r;
}

}  // namespace spark
