// `spark kb`: make, inspect and copy knowledge bases (SQLite folder or PostgreSQL server), and the spool that keeps
// `spark record`'s outcomes when a server store cannot be reached.
#include <cstdio>

#include "cli/commands.h"
#include "cli/flags.h"
#include "localizer/store_status.h"
#include "miner/mining_store.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

// `spark kb init | status | copy`.
struct KbArgs {
  std::string action;    // init | status | copy
  std::string from, to;  // copy
};

int kb_copy(const Common& common, const KbArgs& args) {
  if (args.from == args.to) return report_error(Error{"kb copy: the source and the destination are the same store"});
  auto from = open_knowledge_base(args.from, false, 30000, common.local_dir);
  if (!from) return report_error(from.error());
  auto to = open_knowledge_base(args.to, true, 30000, common.local_dir);
  if (!to) return report_error(to.error());
  auto copy = copy_store(**from, **to);
  if (!copy) return report_error(with_context("kb copy: ", copy.error()));
  auto& copied = copy->rows;
  std::printf("copied %lld case(s) (%lld file version(s)), %lld outcome(s), %lld failure(s) from %s to %s\n",
              static_cast<long long>(copied["cases"]), static_cast<long long>(copied["blobs"]),
              static_cast<long long>(copied["outcomes"]), static_cast<long long>(copied["failures"]),
              (*from)->name().c_str(), (*to)->name().c_str());
  note("the vector index is not copied: `spark index` (or the first `spark localize`) builds it for the new store");
  return 0;
}

int kb_status(const Common& common) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  auto status = store_status_text(**kb, common.kb_source, local_folder(common));
  if (!status) return report_error(status.error());
  return write_output("", *status);
}

int cmd_kb(const Common& common, const KbArgs& args) {
  if (args.action == "copy") return kb_copy(common, args);
  if (args.action == "status") return kb_status(common);
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  std::printf("%s: %s, schema version %d\n", (*kb)->name().c_str(), (*kb)->created() ? "created" : "up to date",
              kSchemaVersion);
  return 0;
}

}  // namespace

Command add_kb(CLI::App& app) {
  auto args = std::make_shared<KbArgs>();
  auto* sub = app.add_subcommand("kb", "make, inspect and copy knowledge bases (SQLite folder or PostgreSQL server)");
  sub->require_subcommand(1);
  auto* init = sub->add_subcommand("init", "create the store named by --kb, or upgrade its schema");
  auto* status = sub->add_subcommand("status", "the store's engine, schema, counts, local index and spool");
  auto* copy = sub->add_subcommand("copy", "copy every case, outcome, failure and decision into an empty store");
  copy->add_option("from", args->from, "source: a folder or a postgresql:// URL")->required();
  copy->add_option("to", args->to, "destination (must be empty; made when absent)")->required();
  return {sub, [args, init, status](Config&, Common& common) {
            args->action = init->parsed() ? "init" : status->parsed() ? "status" : "copy";
            return cmd_kb(common, *args);
          }};
}

}  // namespace spark::cli
