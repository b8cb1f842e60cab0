#include "localizer/mcp_server.h"

#include <algorithm>
#include <exception>
#include <istream>
#include <utility>

#include "base/text.h"

namespace spark {

using nlohmann::json;

namespace {

// JSON-RPC 2.0's error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

json error_reply(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json result_reply(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

// A tool's failure as MCP says it: a result the model reads, not a protocol error.
json tool_error(const std::string& message) {
  return {{"content", json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
}

}  // namespace

McpServer::McpServer(std::string name, std::string version, std::string instructions, std::vector<McpTool> tools,
                     std::function<void(const std::string&)> log)
    : name_(std::move(name)),
      version_(std::move(version)),
      instructions_(std::move(instructions)),
      tools_(std::move(tools)),
      log_(std::move(log)) {}

json McpServer::initialize(const json& params) {
  std::string agreed = kMcpProtocolVersions[0];
  if (auto v = params.find("protocolVersion"); v != params.end() && v->is_string()) {
    const auto& asked = v->get_ref<const std::string&>();
    if (std::ranges::find(kMcpProtocolVersions, asked) != std::end(kMcpProtocolVersions)) agreed = asked;
  }
  std::string client = "a client";
  if (auto info = params.find("clientInfo");
      info != params.end() && info->is_object() && info->contains("name") && (*info)["name"].is_string())
    client = (*info)["name"].get<std::string>();
  if (log_) log_("serving " + sanitize_utf8(client) + " (protocol " + agreed + ")");
  return {{"protocolVersion", agreed},
          {"capabilities", {{"tools", {{"listChanged", false}}}}},
          {"serverInfo", {{"name", name_}, {"version", version_}}},
          {"instructions", instructions_}};
}

json McpServer::list_tools() const {
  json tools = json::array();
  for (const McpTool& t : tools_)
    tools.push_back({{"name", t.name},
                     {"title", t.title},
                     {"description", t.description},
                     {"inputSchema", t.input_schema},
                     {"outputSchema", t.output_schema},
                     {"annotations",
                      {{"title", t.title},
                       {"readOnlyHint", t.read_only},
                       {"destructiveHint", false},
                       {"idempotentHint", t.read_only},
                       {"openWorldHint", false}}}});
  return {{"tools", std::move(tools)}};
}

Result<json> McpServer::call_tool(const json& params) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
    return fail("tools/call: params.name must be a tool's name");
  const std::string name = params["name"].get<std::string>();
  const auto tool = std::ranges::find(tools_, name, &McpTool::name);
  if (tool == tools_.end()) return fail("unknown tool \"" + sanitize_utf8(name) + "\" (see tools/list)");
  json arguments = json::object();
  if (auto a = params.find("arguments"); a != params.end() && !a->is_null()) {
    if (!a->is_object()) return json(tool_error(name + ": arguments must be an object"));
    arguments = *a;
  }
  Result<McpAnswer> answer = fail("");
  try {
    answer = tool->call(arguments);
  } catch (const std::exception& e) {
    answer = fail(std::string("internal error: ") + e.what());
  }
  if (!answer) {
    if (log_) log_(name + ": " + answer.error().message);
    return json(tool_error(name + ": " + answer.error().message));
  }
  return json{{"content", json::array({{{"type", "text"}, {"text", answer->text}}})},
              {"structuredContent", std::move(answer->structured)},
              {"isError", false}};
}

std::optional<json> McpServer::handle(const json& message) {
  if (!message.is_object()) return error_reply(nullptr, kInvalidRequest, "a message is a JSON object");
  const json id = message.contains("id") ? message["id"] : json(nullptr);
  if (!message.contains("method")) return std::nullopt;  // a response to a request of ours: none is made
  if (!message["method"].is_string() || message.value("jsonrpc", "") != "2.0")
    return error_reply(id, kInvalidRequest, "not a JSON-RPC 2.0 request");
  const std::string method = message["method"].get<std::string>();
  const bool notification = !message.contains("id");
  if (notification) return std::nullopt;  // notifications/initialized, notifications/cancelled: nothing to answer
  if (!id.is_string() && !id.is_number_integer())
    return error_reply(nullptr, kInvalidRequest, "a request's id is a string or an integer");
  const json params = message.contains("params") ? message["params"] : json::object();
  if (!params.is_object()) return error_reply(id, kInvalidParams, method + ": params must be an object");
  try {
    if (method == "initialize") return result_reply(id, initialize(params));
    if (method == "ping") return result_reply(id, json::object());
    if (method == "tools/list") return result_reply(id, list_tools());
    if (method == "tools/call") {
      auto r = call_tool(params);
      if (!r) return error_reply(id, kInvalidParams, r.error().message);
      return result_reply(id, std::move(*r));
    }
  } catch (const std::exception& e) {
    return error_reply(id, kInternalError, method + ": " + e.what());
  }
  return error_reply(id, kMethodNotFound, "spark does not serve \"" + sanitize_utf8(method) + "\"");
}

std::optional<json> McpServer::handle_line(const std::string& line) {
  // Copying and walking a value recurse: a message nested 100,000 deep would overflow the stack (base/text.h).
  if (auto at = json_too_deep(line)) return error_reply(nullptr, kParseError, json_too_deep_message(*at));
  json message = json::parse(line, nullptr, false);
  if (message.is_discarded()) return error_reply(nullptr, kParseError, "a message that is not JSON");
  return handle(message);
}

void McpServer::serve(std::istream& in, const std::function<bool(const std::string&)>& write) {
  std::streambuf* buf = in.rdbuf();
  std::string line;
  bool too_long = false;
  const auto answer = [&](const std::optional<json>& reply) { return !reply || write(json_text(*reply) + "\n"); };
  for (;;) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof() || c == '\n') {
      if (too_long) {
        if (log_) log_("a message over " + std::to_string(kMcpMessageLimit >> 20) + " MiB was dropped");
        if (!answer(error_reply(nullptr, kParseError,
                                "a message over " + std::to_string(kMcpMessageLimit >> 20) + " MiB (not read)")))
          return;
      } else if (line.find_first_not_of(" \t\r") != std::string::npos) {
        if (!answer(handle_line(line))) return;
      }
      line.clear();
      too_long = false;
      if (c == std::char_traits<char>::eof()) return;
      continue;
    }
    if (too_long) continue;
    if (line.size() >= kMcpMessageLimit) {
      too_long = true;
      std::string().swap(line);
      continue;
    }
    line.push_back(static_cast<char>(c));
  }
}

}  // namespace spark
