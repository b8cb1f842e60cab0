// The Model Context Protocol over stdio (`spark mcp`, docs/MCP.md): JSON-RPC 2.0 messages, one per line, read from
// the client and answered in order. The server offers tools only: initialize (the protocol version agreed: the
// client's when it is one of kMcpProtocolVersions, else the newest), ping, tools/list, tools/call. A tool answers
// with structured content (checked by its output schema on the client's side) and a short text; a tool that fails
// answers a tool error naming the input (isError), so the agent can correct its call, and the server goes on. Only
// the protocol is written to the output; what spark says while it works goes to the log sink (stderr).
//
// Bounds: a message longer than kMcpMessageLimit bytes is read to its end, dropped and answered with a parse error;
// the server's memory does not grow with it. A message nested deeper than kMaxJsonDepth is answered with a parse
// error before it is parsed. Thread safety: one McpServer serves one stream, a message at a time.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace spark {

inline constexpr const char* kMcpProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
inline constexpr size_t kMcpMessageLimit = size_t{16} << 20;

// A tool's answer: `structured` (an object, valid under the tool's output schema) and the text a person or a model
// reads first.
struct McpAnswer {
  nlohmann::json structured = nlohmann::json::object();
  std::string text;
};

struct McpTool {
  std::string name, title, description;
  nlohmann::json input_schema, output_schema;  // JSON Schema objects
  bool read_only = true;                       // the tool's annotations: readOnlyHint, and destructiveHint false
  std::function<Result<McpAnswer>(const nlohmann::json& arguments)> call;
};

class McpServer {
 public:
  McpServer(std::string name, std::string version, std::string instructions, std::vector<McpTool> tools,
            std::function<void(const std::string&)> log);

  // One message's reply; nullopt for a notification or a response (nothing is answered).
  std::optional<nlohmann::json> handle(const nlohmann::json& message);
  // One line as read (a message's text): its reply, as handle() gives it; a parse error for text that is not JSON.
  std::optional<nlohmann::json> handle_line(const std::string& line);
  // Serves `in` until it ends, or until `write` (a reply's line, newline included) fails: the client is gone.
  void serve(std::istream& in, const std::function<bool(const std::string&)>& write);

 private:
  nlohmann::json initialize(const nlohmann::json& params);
  nlohmann::json list_tools() const;
  Result<nlohmann::json> call_tool(const nlohmann::json& params);

  std::string name_, version_, instructions_;
  std::vector<McpTool> tools_;
  std::function<void(const std::string&)> log_;
};

}  // namespace spark
