// spark's tools for agents (`spark mcp`, docs/MCP.md), served by McpServer (mcp_server.h): localize, similar_failures,
// suggest_fix, test_history, open_failures and record. Each answers what the command line would show for the same
// input (the JSON of `spark localize --format json`, `spark failures --format json`), redacted as the published
// outputs are: an agent's answers go on to a model provider.
//
// The workspace is the folder the server was started in. Every path an agent gives is resolved there, links
// followed, and refused when it leads outside: a prompt-injected agent cannot read /etc through spark. `record`
// writes to the knowledge base, and only when the server was started with writes allowed.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/redact.h"
#include "localizer/case_embedding.h"
#include "localizer/mcp_server.h"
#include "localizer/settings.h"
#include "localizer/verify.h"
#include "miner/mining_store.h"
#include "miner/recording.h"
#include "store/knowledge_base.h"

namespace spark {

struct McpContext {
  std::string version;
  LocalizeSettings settings;  // from the configuration, as `spark localize` reads it
  std::function<Result<std::unique_ptr<KnowledgeBase>>(bool create)> open_store;
  std::function<bool()> store_exists;
  std::string store_name;  // the store as messages name it
  EmbedderConfig embedder;
  std::shared_ptr<const Redactor> redactor;  // null: redaction off
  std::filesystem::path structures;          // parsed test-file versions between processes; "" = not kept
  std::filesystem::path workspace;           // the current folder, canonical: every given path must stay in it
  HistorySettings history;                   // `record`'s (its repo: the workspace)
  RecordingStore where;                      // `record`'s store (its `open` is set from open_store)
  bool allow_writes = false;                 // `record` may store outcomes
  // `spark mcp --verify CMD`: the command suggestions are verified with (verify.h); "" = verification off. The
  // command is the person's who started the server, never an agent's.
  VerifyOptions verify;
  std::function<void(const std::string&)> log;  // what spark says while it works (stderr)
};

// The tools, sharing `context`.
std::vector<McpTool> spark_mcp_tools(const std::shared_ptr<McpContext>& context);
// What the server tells an agent at initialize: what spark is and when to call which tool.
std::string spark_mcp_instructions();

}  // namespace spark
