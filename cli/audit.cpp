// `spark audit`: the quarantine a person reviews (list, show, accept, reject, trim), and its pages in a browser
// (serve: miner/audit_site.h).
#include <cstdio>
#include <filesystem>

#include "base/http_server.h"
#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "miner/audit_page.h"
#include "miner/audit_site.h"
#include "miner/mining_store.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

struct AuditArgs {
  std::string action = "list";  // list | show | accept | reject | trim | serve
  std::string id;
  std::vector<std::string> keep;  // trim: "12", "path:12", "12-14"
  std::string author;             // default: git config user
  std::string reason;
  bool all = false;             // list: decided ones too
  std::string format = "text";  // list: text | json
  std::string html;
  std::string repo = ".";  // for the author from git config
  double sigma = defaults::kSigma;
  std::string color = "auto";
  int port = 0;  // serve: 0 picks a free port
};

// `spark audit list`: the quarantine (every mined case with --all), as text or JSON, and the HTML page.
int audit_list(const Common& common, const AuditArgs& args, KnowledgeBase& kb, MiningStore& store) {
  std::vector<FailureStatus> statuses = {FailureStatus::quarantined};
  if (args.all) statuses = mined_statuses();
  auto list = store.failures(statuses);
  if (!list) return report_error(list.error());
  auto rule = store.rule(args.sigma);
  if (!rule) return report_error(rule.error());
  if (!args.html.empty()) {
    std::vector<std::string> notes;
    const std::string page = audit::shared_audit_html(*list, *rule, kb.dir().string(), common.redactor.get(), notes);
    for (const auto& n : notes) note(n);
    if (auto w = write_file_atomic(args.html, page); !w) return report_error(w.error());
  }
  if (args.format == "json") return write_output("", json_text(audit::list_json(*list, *rule), 2) + "\n");
  return write_output("", terminal_lines(audit::list_text(*list, *rule, args.all)));
}

// `spark audit show ID`: the case, where it failed, who decided it, and its fix's diff.
int audit_show(const AuditArgs& args, MiningStore& store) {
  auto f = store.failure_by_case(args.id);
  if (!f) return report_error(f.error());
  const bool color = args.color == "always" || (args.color == "auto" && ::isatty(STDOUT_FILENO));
  auto out = audit::show_text(*f, color);
  if (!out) return report_error(out.error());
  return write_output("", *out);
}

// `spark audit accept | reject | trim ID`: the decision stored, and said.
int audit_decide(const AuditArgs& args, MiningStore& store) {
  const Decision decision = args.action == "accept"   ? Decision::accept
                            : args.action == "reject" ? Decision::reject
                                                      : Decision::trim;
  std::vector<LineRef> keep;
  if (decision == Decision::trim) {
    auto f = store.failure_by_case(args.id);
    if (!f) return report_error(f.error());
    auto parsed = audit::parse_keep(args.keep, audit::test_file_of(*f));
    if (!parsed) return report_error(parsed.error());
    keep = std::move(*parsed);
  }
  auto decided = store.decide(args.id, decision, author_or_default(args.author, args.repo), args.reason, keep);
  if (!decided) return report_error(decided.error());
  note(audit::decided_text(*decided));
  return 0;
}

// `spark audit serve`: the audit in a browser (miner/audit_site.h) on 127.0.0.1, until Ctrl-C or SIGTERM. Prints the
// address, with its token, and nothing else on stdout.
int audit_serve(const AuditArgs& args, KnowledgeBase& kb, MiningStore& store) {
  // Blocked before the server's threads start, which inherit the mask; serve_until_stop_signal waits for them.
  const sigset_t stop_signals = block_stop_signals();
  std::error_code ec;
  AuditSiteOptions options{new_audit_token(), 0, author_or_default(args.author, args.repo), args.sigma,
                           fs::absolute(kb.dir(), ec).string()};
  std::unique_ptr<AuditSite> site;  // made once the port is known; no request is read before serve()
  auto server = HttpServer::bind("127.0.0.1", args.port, [&site](const HttpRequest& r) { return site->handle(r); });
  if (!server) return report_error(server.error());
  options.port = (*server)->port();
  site = std::make_unique<AuditSite>(store, options);
  std::fputs((site->url() + "\n").c_str(), stdout);
  std::fflush(stdout);
  note("the audit of " + options.kb + " is served on 127.0.0.1 only, to whoever has the address above; Ctrl-C stops");
  const Status served = serve_until_stop_signal(**server, stop_signals);
  if (!served) return report_error(served.error());
  note("stopped");
  return 0;
}

int cmd_audit(const Common& common, const AuditArgs& args) {
  const bool needs_id = args.action != "list" && args.action != "serve";
  if (needs_id && args.id.empty()) return usage_error("audit " + args.action + ": give the case id");
  if (args.action == "trim" && args.keep.empty())
    return usage_error("audit trim: give the true faulty lines with --keep");
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  MiningStore store(**kb);
  if (args.action == "list") return audit_list(common, args, **kb, store);
  if (args.action == "show") return audit_show(args, store);
  if (args.action == "serve") return audit_serve(args, **kb, store);
  return audit_decide(args, store);
}

}  // namespace

Command add_audit(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<AuditArgs>();
  AuditArgs& audit_args = *args;
  auto* sub = app.add_subcommand("audit", "review quarantined mined cases: list, show, accept, reject, trim, serve");
  sub->add_option("action", audit_args.action,
                  "list (default) | show | accept | reject | trim | serve (the audit in a browser, on 127.0.0.1)")
      ->check(CLI::IsMember({"list", "show", "accept", "reject", "trim", "serve"}));
  sub->add_option("id", audit_args.id, "the mined case's id (or a unique prefix)");
  sub->add_option("--keep", audit_args.keep, "trim: the true faulty lines (12, 12-14, path:12; comma-separated)")
      ->delimiter(',');
  sub->add_option("--author", audit_args.author, "who decides (default: git config user.name <user.email>)");
  sub->add_option("--reason", audit_args.reason, "why (stored with the decision)");
  sub->add_flag("--all", audit_args.all, "list: every mined case, not only the quarantine");
  sub->add_option("--format", audit_args.format, "list: text | json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--html", audit_args.html, "list: also write a self-contained HTML report with side-by-side diffs");
  sub->add_option("--repo", audit_args.repo, "the repository whose git config names the author (default .)");
  sub->add_option("--port", audit_args.port, "serve: the port on 127.0.0.1 (default 0: a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--color", audit_args.color, "auto | always | never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  flags.bind(sub, "--sigma", "mine.sigma", "the outlier rule shown")->check(CLI::Range(0.0, 100.0));

  return {sub, [args](Config& config, Common& common) {
            args->sigma = config.number("mine.sigma");
            return cmd_audit(common, *args);
          }};
}

}  // namespace spark::cli
