// `spark failures list | show ID | dismiss ID | expire`: the open failures (recorded, not yet fixed and labelled),
// and closing the ones that will never be fixed: dismissed by a person, or expired because their test is gone.
//
// One test failing at several commits is one open failure in the list: its first failing commit names it (the id is
// that failure's), and dismissing or expiring it closes every open failure of that test.

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "miner/git_history.h"
#include "miner/mining_store.h"
#include "miner/open_failures.h"
#include "miner/recording.h"

namespace spark::cli {

namespace {

// `spark failures` (cli/failures.cpp): the open failures, and closing those that will never be fixed.
struct FailuresArgs {
  std::string action = "list";  // list | show | dismiss | expire
  std::string id;               // a failure id (or a unique prefix), or a test id
  std::string format = "text";  // list, show: text | json
  std::string author;           // dismiss: who (default: git config user)
  std::string reason;           // dismiss: why
  std::string repo = ".";       // the repository: HEAD's test files and history
};

using nlohmann::json;

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
  const TipHistory* tip = history ? &*history : nullptr;
  const bool as_json = args.format == "json";
  if (args.action == "list") {
    auto out = failures_list(store, tip, as_json);
    if (!out) return report_error(out.error());
    return write_output("", as_json ? *out : terminal_lines(*out));
  }
  auto found = find_failures(store, args.id, (*kb)->name());
  if (!found) return report_error(found.error());
  if (args.action == "show") {
    const std::string out = failures_show(*found, tip, as_json);
    return write_output("", as_json ? out : terminal_lines(out));
  }
  auto dismissed = dismiss_failures(store, *found, author_or_default(args.author, args.repo), args.reason);
  if (!dismissed) return report_error(dismissed.error());
  note(*dismissed);
  return 0;
}

}  // namespace

Command add_failures(CLI::App& app) {
  auto args = std::make_shared<FailuresArgs>();
  auto* sub =
      app.add_subcommand("failures", "the open failures (recorded, not fixed yet): list, show, dismiss, expire");
  sub->add_option("action", args->action,
                  "list (default) | show ID | dismiss ID | expire (close those whose test is gone at HEAD)")
      ->check(CLI::IsMember({"list", "show", "dismiss", "expire"}));
  sub->add_option("id", args->id, "a failure's id (or a unique prefix), or a test id");
  sub->add_option("--format", args->format, "list, show: text | json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--author", args->author, "dismiss: who (default: git config user.name <user.email>)");
  sub->add_option("--reason", args->reason, "dismiss: why (stored with it)");
  sub->add_option("--repo", args->repo, "the git repository: HEAD's test files and history (default .)");
  return {sub, [args](Config&, Common& common) { return cmd_failures(common, *args); }};
}

}  // namespace spark::cli
