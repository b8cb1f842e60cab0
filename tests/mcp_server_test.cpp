#include "localizer/mcp_server.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;

McpServer server_with_echo(std::vector<std::string>* log = nullptr) {
  McpTool echo{.name = "echo",
               .title = "Echo",
               .description = "says its input back",
               .input_schema = {{"type", "object"}, {"properties", {{"say", {{"type", "string"}}}}}},
               .output_schema = {{"type", "object"}},
               .read_only = true,
               .call = [](const json& a) -> Result<McpAnswer> {
                 if (!a.contains("say")) return fail("say: required");
                 if (a["say"] == "throw") throw std::runtime_error("boom");
                 return McpAnswer{{{"said", a["say"]}}, a["say"].get<std::string>()};
               }};
  return McpServer("spark", "1.0", "use echo", {echo}, [log](const std::string& m) {
    if (log) log->push_back(m);
  });
}

json request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

TEST(mcp_server, initialize_agrees_to_a_supported_version_else_offers_the_newest) {
  McpServer s = server_with_echo();
  auto r = s.handle(request(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"clientInfo", {{"name", "t"}}}}));
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ((*r)["result"]["serverInfo"]["name"], "spark");
  EXPECT_TRUE((*r)["result"]["capabilities"].contains("tools"));
  EXPECT_EQ((*r)["result"]["instructions"], "use echo");
  r = s.handle(request(2, "initialize", {{"protocolVersion", "1999-01-01"}}));
  EXPECT_EQ((*r)["result"]["protocolVersion"], kMcpProtocolVersions[0]);
}

TEST(mcp_server, notifications_and_responses_get_no_reply) {
  McpServer s = server_with_echo();
  EXPECT_FALSE(s.handle({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}));
  EXPECT_FALSE(s.handle({{"jsonrpc", "2.0"}, {"id", 4}, {"result", json::object()}}));
}

TEST(mcp_server, protocol_errors_carry_json_rpc_codes) {
  McpServer s = server_with_echo();
  auto r = s.handle_line("{not json");
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["error"]["code"], -32700);
  EXPECT_TRUE((*r)["id"].is_null());
  r = s.handle_line("[1,2]");
  EXPECT_EQ((*r)["error"]["code"], -32600);
  r = s.handle(request(3, "resources/list"));
  EXPECT_EQ((*r)["error"]["code"], -32601);
  EXPECT_EQ((*r)["id"], 3);
  r = s.handle({{"jsonrpc", "1.0"}, {"id", 5}, {"method", "ping"}});
  EXPECT_EQ((*r)["error"]["code"], -32600);
  r = s.handle({{"jsonrpc", "2.0"}, {"id", json::array()}, {"method", "ping"}});
  EXPECT_EQ((*r)["error"]["code"], -32600);
  r = s.handle(request(6, "tools/call", {{"name", "nope"}}));
  EXPECT_EQ((*r)["error"]["code"], -32602);
  EXPECT_NE((*r)["error"]["message"].get<std::string>().find("nope"), std::string::npos);
  r = s.handle(request(7, "ping"));
  EXPECT_EQ((*r)["result"], json::object());
}

TEST(mcp_server, a_message_nested_too_deep_is_refused_before_parsing) {
  McpServer s = server_with_echo();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = s.handle_line(deep);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["error"]["code"], -32700);
  EXPECT_NE((*r)["error"]["message"].get<std::string>().find("nested deeper"), std::string::npos);
}

TEST(mcp_server, tools_list_gives_schemas_and_annotations) {
  McpServer s = server_with_echo();
  auto r = s.handle(request(1, "tools/list"));
  const json& tool = (*r)["result"]["tools"][0];
  EXPECT_EQ(tool["name"], "echo");
  EXPECT_EQ(tool["inputSchema"]["type"], "object");
  EXPECT_EQ(tool["outputSchema"]["type"], "object");
  EXPECT_EQ(tool["annotations"]["readOnlyHint"], true);
}

TEST(mcp_server, a_tools_failure_is_a_tool_error_and_the_server_goes_on) {
  std::vector<std::string> log;
  McpServer s = server_with_echo(&log);
  auto r = s.handle(request(1, "tools/call", {{"name", "echo"}, {"arguments", json::object()}}));
  EXPECT_EQ((*r)["result"]["isError"], true);
  EXPECT_EQ((*r)["result"]["content"][0]["text"], "echo: say: required");
  r = s.handle(request(2, "tools/call", {{"name", "echo"}, {"arguments", {{"say", "throw"}}}}));
  EXPECT_EQ((*r)["result"]["isError"], true);
  EXPECT_NE((*r)["result"]["content"][0]["text"].get<std::string>().find("boom"), std::string::npos);
  r = s.handle(request(3, "tools/call", {{"name", "echo"}, {"arguments", "x"}}));
  EXPECT_EQ((*r)["result"]["isError"], true);
  r = s.handle(request(4, "tools/call", {{"name", "echo"}, {"arguments", {{"say", "hi"}}}}));
  EXPECT_EQ((*r)["result"]["isError"], false);
  EXPECT_EQ((*r)["result"]["structuredContent"]["said"], "hi");
  EXPECT_EQ((*r)["result"]["content"][0]["text"], "hi");
  EXPECT_EQ(log.size(), 2u);  // the two failures, on the log (stderr), not on the protocol
}

TEST(mcp_server, serve_answers_line_by_line_and_drops_an_oversized_message) {
  McpServer s = server_with_echo();
  std::string input = request(1, "ping").dump() + "\n\n";
  input += "[" + std::string(kMcpMessageLimit + 10, ' ') + "]\n";
  input += request(2, "tools/list").dump() + "\n";
  input += request(3, "ping").dump();  // the last line without its newline
  std::istringstream in(input);
  std::vector<json> replies;
  s.serve(in, [&](const std::string& line) {
    EXPECT_EQ(line.back(), '\n');
    replies.push_back(json::parse(line));
    return true;
  });
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[0]["id"], 1);
  EXPECT_EQ(replies[1]["error"]["code"], -32700);
  EXPECT_NE(replies[1]["error"]["message"].get<std::string>().find("MiB"), std::string::npos);
  EXPECT_EQ(replies[2]["id"], 2);
  EXPECT_EQ(replies[3]["id"], 3);
}

TEST(mcp_server, serve_stops_when_the_client_is_gone) {
  McpServer s = server_with_echo();
  std::istringstream in(request(1, "ping").dump() + "\n" + request(2, "ping").dump() + "\n");
  int writes = 0;
  s.serve(in, [&](const std::string&) {
    ++writes;
    return false;
  });
  EXPECT_EQ(writes, 1);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
