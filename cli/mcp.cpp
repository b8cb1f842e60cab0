// `spark mcp`: the Model Context Protocol server over stdio for coding agents (docs/MCP.md). The protocol and the
// tools are the localizer's (localizer/mcp_server.h, mcp_tools.h); this file makes their context from the
// configuration and keeps standard output for the protocol alone.

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/localize.h"
#include "localizer/mcp_tools.h"
#include "store/postgres_db.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

struct McpArgs {
  bool allow_writes = false;
  VerifyOptions verify;  // --verify and its bounds (the command empty: suggestions are not verified)
};

int cmd_mcp(Config& config, const Common& common, const McpArgs& args) {
  auto context = std::make_shared<McpContext>();
  McpContext& c = *context;
  if (auto s = localize_settings(config, c.settings); !s) return usage_error(s.error());
  history_from_config(config, c.history);
  std::error_code ec;
  c.workspace = fs::weakly_canonical(fs::current_path(ec), ec);
  if (ec) return report_error(Error{"the workspace (the current folder): " + ec.message()});
  c.history.repo = c.workspace.string();
  c.version = SPARK_VERSION;
  c.open_store = [common](bool create) { return open_kb(common, create); };
  c.store_exists = [common] { return kb_exists(common); };
  c.store_name = is_postgres_url(common.kb_dir) ? redact_postgres_url(common.kb_dir) : common.kb_dir;
  c.embedder = common.embedder;
  c.redactor = common.redactor;
  c.structures = kb_exists(common) ? fs::path(local_folder(common)) / "structures" : fs::path();
  c.where.server = is_postgres_url(common.kb_dir);
  c.where.local_dir = common.local_dir;
  c.where.retry_seconds = record_retry_seconds();
  c.allow_writes = args.allow_writes;
  c.verify = args.verify;
  c.log = [](const std::string& n) { note("mcp: " + n); };
  // Standard output carries the protocol alone: it moves to a descriptor of its own, and whatever else would write to
  // descriptor 1 goes to stderr.
  // A client that goes away ends the serving loop (a failed write), not the process by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  std::fflush(stdout);
  const int protocol = ::dup(STDOUT_FILENO);
  if (protocol < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
    return report_error(Error{"standard output could not be kept for the protocol"});
  FILE* out = ::fdopen(protocol, "w");
  if (!out) return report_error(Error{"standard output could not be kept for the protocol"});
  McpServer server("spark", SPARK_VERSION, spark_mcp_instructions(), spark_mcp_tools(context), c.log);
  note(std::string("mcp: serving ") + context->workspace.string() + " over stdio (" +
       (args.allow_writes ? "record allowed" : "read-only") +
       (args.verify.command.empty() ? "" : "; suggestions verified with: " + args.verify.command) + ")");
  server.serve(std::cin, [out](const std::string& line) {
    return std::fwrite(line.data(), 1, line.size(), out) == line.size() && std::fflush(out) == 0;
  });
  std::fclose(out);
  return 0;
}

}  // namespace

Command add_mcp(CLI::App& app) {
  auto args = std::make_shared<McpArgs>();
  auto* sub = app.add_subcommand("mcp", "serve spark's tools to coding agents: the Model Context Protocol over stdio");
  sub->add_flag("--allow-writes", args->allow_writes,
                "let agents call `record` (store a JUnit report's outcomes); read-only without it");
  // suggest_fix verifies with it by default, localize when an agent asks.
  add_verify_flags(sub, args->verify, false);
  return {sub, [args](Config& config, Common& common) { return cmd_mcp(config, common, *args); }};
}

}  // namespace spark::cli
