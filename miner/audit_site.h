// The audit in a browser: the pages and the decisions `spark audit serve` serves (cli/ binds it to 127.0.0.1).
//
//   /TOKEN/                  the quarantine: each case with the rule that put it there
//   /TOKEN/case/ID           one case: where it failed, its message, the fix side by side with the faulty lines
//                            outlined, and Accept / Trim (the lines ticked) / Reject, each a form posted to:
//   /TOKEN/case/ID/accept    (POST; likewise trim and reject) MiningStore::decide, as `spark audit accept` calls
//                            it, with the case's state the page showed: a case decided meanwhile is not changed,
//                            and the page says who decided it (409)
//   /TOKEN/cases             every mined case, by status (the learnt ones and the decided ones)
//   /TOKEN/failures          the open failures: recorded, not yet fixed
//
// Access: only a request whose path starts with the token (random, printed once by `spark audit serve`), whose Host
// names the loopback (127.0.0.1, localhost, [::1]; any port, as an SSH tunnel may forward another), and, for a
// decision, whose Origin (when a browser sends one) is the Host's own and whose method is POST. Anything else is
// refused (403, 404 or 405) before the store is read. No page loads anything from elsewhere: styles are inline, there
// is no script, and the Content-Security-Policy forbids the rest.
#pragma once

#include <mutex>
#include <string>

#include "base/http_server.h"
#include "miner/mining_store.h"

namespace spark {

struct AuditSiteOptions {
  std::string token;   // the path prefix that grants access (new_audit_token())
  int port = 0;        // the server's port: its own Host and Origin are 127.0.0.1:port and localhost:port
  std::string author;  // who decides (as `spark audit accept --author`)
  double sigma = 3;    // the outlier rule shown
  std::string kb;      // the knowledge base's name, shown
};

// 32 hex digits from the kernel's random source.
std::string new_audit_token();

class AuditSite {
 public:
  AuditSite(MiningStore& store, AuditSiteOptions options) : store_(store), options_(std::move(options)) {}

  // Thread-safe: requests are served one at a time (the store has one connection).
  HttpReply handle(const HttpRequest& request);

  // The address a person opens.
  std::string url() const;

 private:
  HttpReply route(const HttpRequest& request, const std::string& path);
  HttpReply index_page();
  HttpReply cases_page(const std::string& status);
  HttpReply failures_page();
  HttpReply case_page(const std::string& id, const std::string& message);
  HttpReply decide(const std::string& id, const std::string& action, const HttpRequest& request);
  // A page that says what went wrong (`text`, escaped here), with a link back to case `back_to` when given.
  HttpReply problem(int status, const std::string& title, const std::string& text, const std::string& back_to = "");

  std::string base() const { return "/" + options_.token; }  // every path's prefix

  MiningStore& store_;
  AuditSiteOptions options_;
  std::mutex mutex_;
};

}  // namespace spark
