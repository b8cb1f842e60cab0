// A real MCP client nobody here wrote, the official TypeScript SDK's (@modelcontextprotocol/sdk, installed by
// scripts/setup.sh --tests into third_party/js-test-tools), driving `spark mcp` over stdio as an editor's agent does.
// tests/mcp_client_check.py makes the knowledge base and the failing test, then runs:
//
//   node tests/mcp/client.mjs SPARK WORKSPACE SCENARIO.json
//
// SCENARIO.json names the failing test (its file, its pytest output, its id) and what the answers must hold. Prints
// one line per check; exits 1 when any failed.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { dirname, join } from "node:path";

const [spark, workspace, scenarioFile] = process.argv.slice(2);
const scenario = JSON.parse(readFileSync(scenarioFile, "utf8"));
const sdk = join(dirname(new URL(import.meta.url).pathname), "..", "..", "third_party", "js-test-tools",
                 "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const { Client } = await import(pathToFileURL(join(sdk, "client", "index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "client", "stdio.js")).href);

let failed = 0;
function check(ok, what, detail) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) {
    failed++;
    if (detail !== undefined) console.log("     " + JSON.stringify(detail).slice(0, 2000));
  }
}

async function connect(args) {
  const transport = new StdioClientTransport({ command: spark, args, cwd: workspace, stderr: "pipe",
                                               env: { ...process.env } });
  let stderr = "";
  const client = new Client({ name: "spark-mcp-check", version: "1.0.0" });
  await client.connect(transport);
  transport.stderr?.on("data", (d) => { stderr += d; });
  return { client, stderr: () => stderr };
}

const { client } = await connect(["mcp"]);
check(client.getServerVersion()?.name === "spark", "initialize: the server is spark", client.getServerVersion());
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(JSON.stringify(names) === JSON.stringify(["localize", "open_failures", "record", "similar_failures",
                                                "suggest_fix", "test_history"]), "tools/list: the six tools", names);
for (const t of tools) {
  check(t.inputSchema?.type === "object" && t.outputSchema?.type === "object" && t.description.length > 20,
        `tools/list: ${t.name} has input and output schemas and a description`);
}

const failure = { test_files: [scenario.test_file], error: scenario.error };

// localize: the renamed attribute's line first, the verdict the test's, the edit the earlier fix made suggested.
// The SDK checks each structuredContent against the tool's output schema (it throws when one does not match).
const loc = await client.callTool({ name: "localize", arguments: failure });
const f = loc.structuredContent?.failures?.[0];
check(!loc.isError && f, "localize answers", loc);
check(f?.test_id === scenario.test_id, "localize: the test id from pytest's output", f?.test_id);
check(f?.ranked?.[0]?.line === scenario.faulty_line, "localize: the faulty line ranked first", f?.ranked?.slice(0, 3));
check(f?.verdict?.class === "test", "localize: verdict test", f?.verdict);
check(f?.history?.failing_runs >= 1, "localize: the recorded history joined", f?.history);
check(loc.content?.[0]?.type === "text" && loc.content[0].text.includes(`${scenario.test_file}:${scenario.faulty_line}`),
      "localize: the text names the line", loc.content);

// similar_failures: the case learnt from the earlier fix, with its diff.
const sim = await client.callTool({ name: "similar_failures", arguments: failure });
const similar = sim.structuredContent?.failures?.[0]?.similar ?? [];
check(!sim.isError && similar.length >= 1, "similar_failures: the earlier fixed failure", sim);
check(similar[0]?.test_id === scenario.fixed_test_id, "similar_failures: the fixed test's case first", similar[0]);
check(similar[0]?.fix_diff?.includes(scenario.fix_added), "similar_failures: how it was fixed, as a diff",
      similar[0]?.fix_diff);

// suggest_fix: the same rename proposed on the new failure's line.
const sug = await client.callTool({ name: "suggest_fix", arguments: failure });
const suggestion = sug.structuredContent?.failures?.[0]?.suggestions?.[0];
check(!sug.isError && suggestion?.line === scenario.faulty_line && suggestion?.new?.includes(scenario.fix_token),
      "suggest_fix: the earlier fix's rename on the faulty line", sug.structuredContent);
check(suggestion?.diff?.startsWith(`--- a/${scenario.test_file}`), "suggest_fix: a diff", suggestion);
check(suggestion && !("verification" in suggestion), "suggest_fix: not verified on a server without --verify",
      suggestion);
const cannot = await client.callTool({ name: "suggest_fix", arguments: { ...failure, verify: true } });
check(cannot.isError && cannot.content[0].text.includes("--verify"), "verify asked of a server without a command",
      cannot);

// test_history and open_failures: what `spark record` stored.
const hist = await client.callTool({ name: "test_history", arguments: { test_id: scenario.test_id } });
check(!hist.isError && hist.structuredContent?.history?.failing_runs >= 1 &&
      hist.structuredContent.failures.some((x) => x.status === "open"), "test_history: its open failure", hist);
const open = await client.callTool({ name: "open_failures", arguments: {} });
check(!open.isError && open.structuredContent?.failures?.some((x) => x.test_id === scenario.test_id),
      "open_failures: lists the failing test", open.structuredContent);

// Bad input: tool errors that name the input; the server goes on.
const outside = await client.callTool({ name: "localize", arguments: { test_files: ["../outside.py"], error: "x" } });
check(outside.isError && outside.content[0].text.includes("outside the workspace"),
      "a path outside the workspace is a tool error", outside);
const missing = await client.callTool({ name: "localize", arguments: { test_files: [scenario.test_file] } });
check(missing.isError && missing.content[0].text.includes("`error`"), "a missing argument is named", missing);
const badK = await client.callTool({ name: "localize", arguments: { ...failure, k: 0 } });
check(badK.isError && badK.content[0].text.includes("`k`"), "a bad k is named", badK);
const noJunit = await client.callTool({ name: "localize", arguments: { junit: "nowhere.xml" } });
check(noJunit.isError && noJunit.content[0].text.includes("nowhere.xml"), "a missing report is named", noJunit);
const readOnly = await client.callTool({ name: "record", arguments: { junit: scenario.report } });
check(readOnly.isError && readOnly.content[0].text.includes("--allow-writes"), "record is off without --allow-writes",
      readOnly);
let unknown = null;
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
} catch (e) {
  unknown = e;
}
check(unknown && String(unknown.message).includes("no_such_tool"), "an unknown tool is a protocol error", unknown?.message);
const again = await client.callTool({ name: "open_failures", arguments: {} });
check(!again.isError, "the server still answers after the errors");
await client.close();

// record, on a server started with --allow-writes: the report stored at HEAD, its failure localized.
const { client: writer } = await connect(["mcp", "--allow-writes"]);
const rec = await writer.callTool({ name: "record", arguments: { junit: scenario.report } });
check(!rec.isError && rec.structuredContent?.stored === true, "record stores the report", rec);
check(rec.structuredContent?.failures?.some((x) => x.test_id === scenario.test_id && x.ranked?.[0]?.line ===
                                               scenario.faulty_line),
      "record localizes the failure it recorded", rec.structuredContent?.failures);
await writer.close();

// suggest_fix on a server started with --verify: the rename tried in a scratch work tree, the test passing with it.
const { client: verifier } = await connect(["mcp", "--verify", scenario.verify_command]);
const ver = await verifier.callTool({ name: "suggest_fix", arguments: failure });
const tried = ver.structuredContent?.failures?.[0]?.suggestions?.[0];
check(!ver.isError && tried?.line === scenario.faulty_line && tried?.verification?.status === "verified",
      "suggest_fix --verify: the rename verified, first", ver.structuredContent);
check(ver.content?.[0]?.text.includes("[verified]"), "suggest_fix --verify: the text says verified", ver.content);
await verifier.close();

console.log(failed ? `${failed} check(s) failed` : "every check passed");
process.exit(failed ? 1 : 0);
