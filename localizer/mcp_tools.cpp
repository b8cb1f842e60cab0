#include "localizer/mcp_tools.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "base/files.h"
#include "base/text.h"
#include "localizer/localize_run.h"
#include "localizer/queries.h"
#include "localizer/record_run.h"
#include "localizer/report.h"
#include "miner/git_history.h"
#include "miner/open_failures.h"

namespace spark {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Context = std::shared_ptr<McpContext>;

// ---- arguments ----

Result<std::string> string_argument(const json& args, const char* name, bool required) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) {
    if (required) return fail(std::string("argument `") + name + "` is missing");
    return std::string();
  }
  if (!it->is_string()) return fail(std::string("argument `") + name + "`: expected a string");
  return it->get<std::string>();
}

Result<std::optional<int64_t>> integer_argument(const json& args, const char* name, int64_t low, int64_t high) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() || it->get<int64_t>() < low || it->get<int64_t>() > high)
    return fail(std::string("argument `") + name + "`: expected an integer from " + std::to_string(low) + " to " +
                std::to_string(high));
  return std::optional<int64_t>(it->get<int64_t>());
}

// `given` as a path relative to the workspace, when it names an existing file there (links followed); an error that
// names the argument otherwise.
Result<std::string> workspace_file(const McpContext& c, const std::string& given, const std::string& what) {
  const std::string shown = what + " \"" + sanitize_utf8(given) + "\"";
  if (given.empty()) return fail(what + ": an empty path");
  const fs::path p(given);
  const fs::path relative = path_within(c.workspace, p.is_relative() ? c.workspace / p : p);
  if (relative.empty())
    return fail(shown + ": outside the workspace " + c.workspace.string() +
                " (spark mcp reads files only under the folder it was started in)");
  std::error_code ec;
  if (!fs::is_regular_file(c.workspace / relative, ec))
    return fail(shown + ": no such file in the workspace " + c.workspace.string());
  return relative.generic_string();
}

// ---- localizing ----

struct Localized {
  std::vector<Case> queries;
  std::vector<Result<Localization>> results;
  LocalizeOptions options;
  std::vector<std::string> notes;
};

// The failures the arguments name: `junit` (every failed or erroring test of a report), or `test_files` and `error`.
Result<std::vector<Case>> queries_of(const McpContext& c, const json& args, std::vector<std::string>& notes) {
  auto junit = string_argument(args, "junit", false);
  TRY(junit);
  auto test_id = string_argument(args, "test_id", false);
  TRY(test_id);
  const bool has_files = args.contains("test_files") && !args["test_files"].is_null();
  if (!junit->empty()) {
    if (has_files) return fail("give `junit` or `test_files`, not both");
    auto report = workspace_file(c, *junit, "junit");
    TRY(report);
    return queries_from_junit((c.workspace / *report).string(), c.workspace.string(), *test_id, notes);
  }
  if (!has_files)
    return fail(
        "give `test_files` and `error` (the failing test's file and its failure output), or `junit` (a "
        "JUnit XML report in the workspace)");
  const json& files = args["test_files"];
  if (!files.is_array() || files.empty() || !std::ranges::all_of(files, [](const json& f) { return f.is_string(); }))
    return fail("argument `test_files`: expected a non-empty array of paths");
  TestFileFailure failure;
  for (size_t i = 0; i < files.size(); ++i) {
    auto f = workspace_file(c, files[i].get<std::string>(), "test_files[" + std::to_string(i) + "]");
    TRY(f);
    failure.test_files.push_back(std::move(*f));
  }
  auto error = string_argument(args, "error", true);
  TRY(error);
  if (error->find_first_not_of(" \t\r\n") == std::string::npos)
    return fail("argument `error`: the failure output is empty");
  failure.error_name = "the argument `error`";
  failure.error_text = std::move(*error);
  failure.test_id = std::move(*test_id);
  failure.structures = c.structures;
  // Read relative to the workspace (the current folder), so the query's paths are the repository's.
  auto q = query_from_test_files(failure, notes);
  TRY(q);
  return std::vector<Case>{std::move(*q)};
}

// Whether the arguments ask for verified suggestions (`verify`, default `by_default`); an error when they do and the
// server has no command to verify with.
Result<bool> wants_verify(const McpContext& c, const json& args, bool by_default) {
  auto it = args.find("verify");
  if (it == args.end() || it->is_null()) return by_default && !c.verify.command.empty();
  if (!it->is_boolean()) return fail("argument `verify`: expected true or false");
  if (it->get<bool>() && c.verify.command.empty())
    return fail(
        "argument `verify`: this server has no test command to verify with (start it with `spark mcp --verify "
        "\"CMD {test_id}\"`)");
  return it->get<bool>();
}

// Localizes `queries` with the settings, `k` and `level` from the arguments when given; `commit` as the triage's.
// With `verify`, each suggestion is tried with the server's test command (verify.h).
Result<Localized> localize(const McpContext& c, const json& args, std::vector<Case> queries, const std::string& commit,
                           bool verify = false) {
  Localized out;
  out.queries = std::move(queries);
  out.options = c.settings.localize;
  auto k = integer_argument(args, "k", 1, 100);
  TRY(k);
  if (*k) out.options.k = static_cast<size_t>(**k);
  auto level = string_argument(args, "level", false);
  TRY(level);
  if (!level->empty() && !parse_level(*level, out.options.level)) {
    std::string names;
    for (const auto& n : level_names()) names += (names.empty() ? "" : ", ") + n;
    return fail("argument `level`: expected one of " + names);
  }
  LocalizeRun run{&c.settings,
                  out.options,
                  c.redactor,
                  nullptr,
                  c.embedder,
                  c.structures,
                  TriageContext{c.workspace.string(), commit, c.settings.test_code, {}},
                  nullptr,
                  nullptr};
  if (c.store_exists()) {
    auto kb = c.open_store(false);
    TRY(kb);
    run.kb = std::move(*kb);
  } else {
    out.notes.push_back("no knowledge base at " + c.store_name + ": the built-in ranker ranks alone");
  }
  if (out.queries.empty()) return out;
  auto done = localize_run(run, out.queries, out.notes);
  TRY(done);
  out.results = std::move(done->results);
  if (verify) {
    VerifyOptions options = c.verify;
    options.repo = c.workspace;
    options.commit = commit;
    options.query_root = c.workspace;
    options.progress = c.log;
    auto verified = verify_suggestions(out.queries, out.results, options);
    TRY(verified);
    out.notes.push_back(verify_summary_line(*verified));
  }
  return out;
}

// Every string of `j` redacted.
void redact_strings(json& j, const Redactor& redactor, std::map<std::string, size_t>& counts) {
  if (j.is_string()) {
    redactor.redact(j.get_ref<std::string&>(), counts);
  } else if (j.is_structured()) {
    for (auto& v : j) redact_strings(v, redactor, counts);
  }
}

// The localizations as `spark localize --format json` writes each (redacted as the published outputs are), the
// failures that could not be localized, and the notes.
json localized_json(const McpContext& c, const Localized& l) {
  const ReportContext ctx{c.settings.localize.policy.name, l.options.level, l.options.k, l.options.epsilon, c.version};
  json out = {{"failures", json::array()}, {"errors", json::array()}, {"notes", json::array()}};
  std::map<std::string, size_t> counts;
  for (size_t i = 0; i < l.results.size(); ++i) {
    if (!l.results[i]) {
      std::string e = l.queries[i].test_id + ": " + l.results[i].error().message;
      if (c.redactor) c.redactor->redact(e, counts);
      out["errors"].push_back(std::move(e));
      continue;
    }
    Localization copy = *l.results[i];
    if (c.redactor) redact_localization(copy, l.queries[i], *c.redactor, counts);
    out["failures"].push_back(json::parse(report_json(copy, ctx)));
  }
  for (std::string n : l.notes) {
    if (c.redactor) c.redactor->redact(n, counts);
    out["notes"].push_back(std::move(n));
  }
  return out;
}

std::string code_snippet(const std::string& code) {
  std::string one = code.substr(0, code.find('\n'));
  const auto first = one.find_first_not_of(" \t");
  one = first == std::string::npos ? "" : one.substr(first);
  return one.size() > 100 ? one.substr(0, 97) + "..." : one;
}

std::string errors_text(const json& out) {
  std::string text;
  for (const auto& e : out["errors"]) text += "not localized: " + e.get<std::string>() + "\n";
  if (out["failures"].empty() && out["errors"].empty()) text += "no failed or erroring test to localize\n";
  return text;
}

std::string verdict_text(const json& f) {
  if (f["verdict"].is_null()) return "";
  return " — verdict " + f["verdict"]["class"].get<std::string>() + " (" +
         fixed(f["verdict"]["probability"].get<double>(), 2) + ")";
}

// " [verified]", " [not verified: MESSAGE]", " [not run: WHY]" for a verified suggestion's JSON; "" otherwise.
std::string verification_text(const json& s) {
  if (!s.contains("verification")) return "";
  const json& v = s["verification"];
  const std::string message = v["message"].get<std::string>();
  return " [" + v["status"].get<std::string>() + (message.empty() ? "" : ": " + message) + "]";
}

std::string localize_text(const json& out) {
  std::string text;
  for (const auto& f : out["failures"]) {
    text += f["test_id"].get<std::string>() + verdict_text(f) + "\n";
    size_t shown = 0;
    for (const auto& r : f["ranked"]) {
      if (++shown > 5) break;
      text += "  " + std::to_string(r["rank"].get<size_t>()) + ". " + r["path"].get<std::string>() + ":" +
              std::to_string(r["line"].get<int64_t>()) + "  " + code_snippet(r["code"].get<std::string>()) +
              "  (score " + fixed(r["score"].get<double>(), 2) + ")\n";
    }
    if (f["ranked"].empty()) text += "  no line ranked\n";
    for (const auto& s : f["suggestions"])
      if (s["preferred"].get<bool>())
        text += "  suggested edit at " + s["path"].get<std::string>() + ":" + std::to_string(s["line"].get<int64_t>()) +
                ": " + code_snippet(s["old"].get<std::string>()) + "  →  " + code_snippet(s["new"].get<std::string>()) +
                verification_text(s) + "\n";
  }
  return text + errors_text(out);
}

// A retrieved case's fix as a diff: each faulty line and, when the case kept it, what its fix put there.
std::string fix_diff(const json& rc) {
  std::string diff;
  std::string path;
  for (const auto& fl : rc["faulty_lines"]) {
    if (fl["path"].get<std::string>() != path) {
      path = fl["path"].get<std::string>();
      diff += "--- a/" + path + "\n+++ b/" + path + "\n";
    }
    diff += "@@ line " + std::to_string(fl["line"].get<int64_t>()) + " @@\n-" + fl["text"].get<std::string>() + "\n";
    if (fl.contains("fix"))
      for (const auto& added : fl["fix"]) diff += "+" + added.get<std::string>() + "\n";
    else
      diff += "# (the fix of this line was not kept)\n";
  }
  return diff;
}

// ---- schemas ----

json failure_input(bool with_ranking) {
  json props = {
      {"test_files",
       {{"type", "array"},
        {"items", {{"type", "string"}}},
        {"minItems", 1},
        {"description",
         "the failing test's file(s), relative to the workspace; the first holds the test (with `error`)"}}},
      {"error",
       {{"type", "string"},
        {"description", "the failure output: pytest's (any --tb), a JUnit failure's text, or one traceback"}}},
      {"test_id",
       {{"type", "string"},
        {"description",
         "the test id (pytest node id, com.x.FooTest#testBar, …); default: from the output; with "
         "`junit`: only this test's failure"}}},
      {"junit",
       {{"type", "string"},
        {"description",
         "instead of test_files and error: a JUnit XML report in the workspace; each failed or "
         "erroring test in it is localized"}}}};
  if (with_ranking) {
    props["verify"] = {{"type", "boolean"},
                       {"description",
                        "try each suggested edit with the server's test command (spark mcp --verify) "
                        "in a scratch work tree: verified, not verified (the new message) or not run"}};
    props["k"] = {{"type", "integer"}, {"minimum", 1}, {"maximum", 100}, {"description", "how many lines to rank"}};
    props["level"] = {{"type", "string"},
                      {"enum", level_names()},
                      {"description", "rank lines, statements, blocks or functions (default line)"}};
  }
  return {{"type", "object"}, {"properties", std::move(props)}, {"additionalProperties", false}};
}

json array_of(json item) { return {{"type", "array"}, {"items", std::move(item)}}; }
const json kStrings = array_of({{"type", "string"}});

json failures_output(json failure_item) {
  return {{"type", "object"},
          {"properties", {{"failures", array_of(std::move(failure_item))}, {"errors", kStrings}, {"notes", kStrings}}},
          {"required", {"failures", "errors", "notes"}}};
}

// ---- the tools ----

// The failures the arguments name, localized, as localized_json gives them: `k` and `level` read from `ranking`, the
// suggestions verified when `verify` asks (`verify_default` when it is not given; nullopt: the tool never verifies).
Result<json> localized_arguments(const McpContext& c, const json& args, const json& ranking,
                                 std::optional<bool> verify_default) {
  std::vector<std::string> notes;
  auto queries = queries_of(c, args, notes);
  TRY(queries);
  bool verify = false;
  if (verify_default) {
    auto asked = wants_verify(c, args, *verify_default);
    TRY(asked);
    verify = *asked;
  }
  auto l = localize(c, ranking, std::move(*queries), "", verify);
  TRY(l);
  l->notes.insert(l->notes.begin(), notes.begin(), notes.end());
  return localized_json(c, *l);
}

Result<McpAnswer> localize_tool(const Context& c, const json& args) {
  auto full = localized_arguments(*c, args, args, false);
  TRY(full);
  McpAnswer a;
  a.structured = std::move(*full);
  a.text = localize_text(a.structured);
  return a;
}

Result<McpAnswer> similar_tool(const Context& c, const json& args) {
  bool weak = false;
  if (auto w = args.find("include_weak"); w != args.end() && !w->is_null()) {
    if (!w->is_boolean()) return fail("argument `include_weak`: expected true or false");
    weak = w->get<bool>();
  }
  auto localized = localized_arguments(*c, args, json::object(), std::nullopt);
  TRY(localized);
  const json& full = *localized;
  McpAnswer a;
  a.structured = {{"failures", json::array()}, {"errors", full["errors"]}, {"notes", full["notes"]}};
  for (const auto& f : full["failures"]) {
    json similar = json::array();
    size_t weaker = 0;
    for (json rc : f["retrieved"]) {
      if (!rc["shown"].get<bool>() && !weak) {
        ++weaker;
        continue;
      }
      rc["fix_diff"] = fix_diff(rc);
      similar.push_back(std::move(rc));
    }
    a.text += f["test_id"].get<std::string>() + ": ";
    if (similar.empty())
      a.text += "no similar fixed failure in the knowledge base\n";
    else
      a.text += std::to_string(similar.size()) + " similar fixed failure(s)\n";
    for (const auto& rc : similar) {
      const json& fixed_commit = rc["fixed_commit"];
      a.text += "  " + rc["test_id"].get<std::string>() + " (similarity " + fixed(rc["similarity"].get<double>(), 2) +
                (fixed_commit.is_string() ? ", fixed in " + fixed_commit.get<std::string>().substr(0, 12) : "") + ")\n";
      for (const auto& fl : rc["faulty_lines"])
        a.text += "    faulty " + fl["path"].get<std::string>() + ":" + std::to_string(fl["line"].get<int64_t>()) +
                  "  " + code_snippet(fl["text"].get<std::string>()) + "\n";
    }
    if (weaker) a.text += "  (" + std::to_string(weaker) + " less similar case(s) left out: include_weak shows them)\n";
    a.structured["failures"].push_back(
        {{"test_id", f["test_id"]}, {"similar", std::move(similar)}, {"left_out", weaker}});
  }
  a.text += errors_text(full);
  return a;
}

Result<McpAnswer> suggest_tool(const Context& c, const json& args) {
  auto localized = localized_arguments(*c, args, args, true);
  TRY(localized);
  const json& full = *localized;
  McpAnswer a;
  a.structured = {{"failures", json::array()}, {"errors", full["errors"]}, {"notes", full["notes"]}};
  for (const auto& f : full["failures"]) {
    json suggestions = json::array();
    a.text += f["test_id"].get<std::string>() + ": ";
    a.text += f["suggestions"].empty() ? "no suggested edit (no similar case's fix applies to its lines)\n"
                                       : std::to_string(f["suggestions"].size()) + " suggested edit(s)\n";
    for (json s : f["suggestions"]) {
      const std::string path = s["path"].get<std::string>();
      s["diff"] = "--- a/" + path + "\n+++ b/" + path + "\n@@ line " + std::to_string(s["line"].get<int64_t>()) +
                  " @@\n-" + s["old"].get<std::string>() + "\n+" + s["new"].get<std::string>() + "\n";
      a.text += "  " + path + ":" + std::to_string(s["line"].get<int64_t>()) + ": " +
                code_snippet(s["old"].get<std::string>()) + "  →  " + code_snippet(s["new"].get<std::string>()) +
                "  (as case " + s["from_case"].get<std::string>() + "'s fix did; confidence " +
                fixed(s["confidence"].get<double>(), 2) + ")" + verification_text(s) + "\n";
      suggestions.push_back(std::move(s));
    }
    a.structured["failures"].push_back(
        {{"test_id", f["test_id"]}, {"verdict", f["verdict"]}, {"suggestions", std::move(suggestions)}});
  }
  a.text += errors_text(full);
  return a;
}

// The repository's history from HEAD (for ages in commits), when the workspace is a git repository.
std::optional<TipHistory> workspace_history(const McpContext& c) {
  auto repo = GitRepository::open(c.workspace.string());
  if (!repo) return std::nullopt;
  auto h = tip_history(**repo, "HEAD");
  if (!h) return std::nullopt;
  return std::move(*h);
}

Result<McpAnswer> history_tool(const Context& c, const json& args) {
  auto test_id = string_argument(args, "test_id", true);
  TRY(test_id);
  McpAnswer a;
  a.structured = {{"test_id", *test_id}, {"history", nullptr}, {"failures", json::array()}};
  if (!c->store_exists()) {
    a.text = "no knowledge base at " + c->store_name + ": nothing recorded of " + *test_id + "\n";
    return a;
  }
  auto kb = c->open_store(false);
  TRY(kb);
  MiningStore store(**kb);
  auto repo = GitRepository::open(c->workspace.string());
  const auto commit_time = [&](const std::string& sha) -> std::optional<int64_t> {
    if (!repo) return std::nullopt;
    auto t = (*repo)->commit_time(sha);
    return t ? std::optional<int64_t>(*t) : std::nullopt;
  };
  auto h = store.history(*test_id, now_epoch(), commit_time);
  TRY(h);
  auto all = store.failures();
  TRY(all);
  const std::optional<TipHistory> tip = workspace_history(*c);
  for (const auto& f : *all)
    if (f.test_id == *test_id) a.structured["failures"].push_back(open_failure_json({f}, tip ? &*tip : nullptr, true));
  if (*h) {
    Localization only;
    only.history = **h;
    a.structured["history"] = json::parse(report_json(only, ReportContext{}))["history"];
    a.text = *test_id + ": " + history_line(**h) + "\n";
  } else {
    a.text = *test_id + ": no recorded run\n";
  }
  a.text += std::to_string(a.structured["failures"].size()) + " recorded failure(s)\n";
  std::map<std::string, size_t> counts;
  if (c->redactor) redact_strings(a.structured, *c->redactor, counts);
  return a;
}

Result<McpAnswer> open_failures_tool(const Context& c, const json&) {
  McpAnswer a;
  const std::optional<TipHistory> tip = workspace_history(*c);
  if (!c->store_exists()) {
    a.structured = failures_json(json::array(), nullptr);
  } else {
    auto kb = c->open_store(false);
    TRY(kb);
    MiningStore store(**kb);
    auto list = failures_list(store, tip ? &*tip : nullptr, true);
    TRY(list);
    a.structured = json::parse(*list);
  }
  std::map<std::string, size_t> counts;
  if (c->redactor) redact_strings(a.structured, *c->redactor, counts);
  a.text = list_text(a.structured["failures"]);
  if (a.structured["failures"].empty()) a.text = "no open failure\n";
  return a;
}

Result<McpAnswer> record_tool(const Context& c, const json& args) {
  if (!c->allow_writes)
    return fail("recording is off: this server was started read-only (start it with `spark mcp --allow-writes`)");
  auto junit = string_argument(args, "junit", true);
  TRY(junit);
  auto report = workspace_file(*c, *junit, "junit");
  TRY(report);
  auto commit = string_argument(args, "commit", false);
  TRY(commit);
  auto repo = GitRepository::open(c->workspace.string());
  TRY(repo);
  RecordRequest request;
  request.junit = (c->workspace / *report).string();
  request.commit = *commit;
  request.history = c->history;
  request.where = c->where;
  request.where.open = [c] { return c->open_store(true); };
  std::vector<std::string> said;
  auto run = record_outcomes(**repo, request, [&](const std::string& n) {
    said.push_back(n);
    if (c->log) c->log(n);
  });
  TRY(run);
  McpAnswer a;
  a.structured = {{"commit", run->commit},     {"stored", run->stored},   {"summary", said},
                  {"failures", json::array()}, {"errors", json::array()}, {"notes", json::array()}};
  if (!run->changed.empty()) {
    a.text = work_tree_note(run->commit, run->changed, false) + "\n";
    a.structured["summary"].push_back(work_tree_note(run->commit, run->changed, false));
    return a;
  }
  auto l = localize(*c, args, std::move(run->queries), run->commit);
  TRY(l);
  const json out = localized_json(*c, *l);
  a.structured["failures"] = out["failures"];
  a.structured["errors"] = out["errors"];
  a.structured["notes"] = out["notes"];
  for (const auto& s : said) a.text += s + "\n";
  a.text += localize_text(out);
  return a;
}

json object_schema(json props, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(props)}, {"required", std::move(required)}};
}

}  // namespace

std::vector<McpTool> spark_mcp_tools(const std::shared_ptr<McpContext>& context) {
  const json failure =
      object_schema({{"test_id", {{"type", "string"}}}, {"ranked", {{"type", "array"}}}}, {"test_id", "ranked"});
  const json similar_failure = object_schema(
      {{"test_id", {{"type", "string"}}}, {"similar", {{"type", "array"}}}, {"left_out", {{"type", "integer"}}}},
      {"test_id", "similar"});
  const json suggested_failure = object_schema(
      {{"test_id", {{"type", "string"}}}, {"suggestions", {{"type", "array"}}}}, {"test_id", "suggestions"});
  json with_weak = failure_input(false);
  with_weak["properties"]["include_weak"] = {
      {"type", "boolean"},
      {"description", "also the cases below the similarity spark shows (0.5): rarely the same fault"}};
  json record_output = failures_output(failure);
  record_output["properties"]["commit"] = {{"type", "string"}};
  record_output["properties"]["stored"] = {{"type", "boolean"}};
  record_output["properties"]["summary"] = kStrings;
  record_output["required"].push_back("stored");
  const auto bind = [context](Result<McpAnswer> (*f)(const Context&, const json&)) {
    return [context, f](const json& args) { return f(context, args); };
  };
  std::vector<McpTool> tools;
  tools.push_back({"localize", "Localize a failing test",
                   "Ranks the lines of a failing test (its own code, fixtures, helpers) most likely at fault, using "
                   "the fixes the team made to similar test failures before. Each failure comes with its verdict "
                   "(test, product, environment, flaky), its recorded history and any edit a past fix suggests.",
                   failure_input(true), failures_output(failure), true, bind(localize_tool)});
  tools.push_back({"similar_failures", "Similar fixed failures",
                   "The earlier test failures most similar to this one, with their faulty lines and how each was fixed "
                   "(the fix's diff of those lines).",
                   with_weak, failures_output(similar_failure), true, bind(similar_tool)});
  tools.push_back(
      {"suggest_fix", "Suggested edits from past fixes",
       "Edits of the failing test that repeat a similar failure's fix (a renamed name, a changed literal) on "
       "the lines spark ranks; each with the case it comes from and a diff, verified first when the server verifies "
       "(the test run with the edit made in a scratch work tree). Never applied to the workspace.",
       failure_input(true), failures_output(suggested_failure), true, bind(suggest_tool)});
  tools.push_back(
      {"test_history", "A test's recorded history",
       "One test's recorded runs: failing since when, how many failing runs, its last pass, whether it "
       "is flaky, and each recorded failure (open, fixed, dismissed …) with its message.",
       object_schema({{"test_id", {{"type", "string"}, {"description", "the test id as recorded"}}}}, {"test_id"}),
       object_schema({{"test_id", {{"type", "string"}}},
                      {"history", {{"type", {"object", "null"}}}},
                      {"failures", {{"type", "array"}}}},
                     {"test_id", "history", "failures"}),
       true, bind(history_tool)});
  tools.push_back({"open_failures",
                   "Open failures",
                   "The recorded failures not fixed yet, one entry per test: first and last failing commit, age, the "
                   "error line.",
                   {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}},
                   object_schema({{"schema", {{"type", "string"}}}, {"failures", {{"type", "array"}}}}, {"failures"}),
                   true,
                   bind(open_failures_tool)});
  tools.push_back(
      {"record", "Record a test run",
       "Stores a JUnit report's outcomes at a commit (default HEAD) in the knowledge base, labels the "
       "failures its passes fix, and localizes the failures it opened. Only when the server was started "
       "with --allow-writes.",
       object_schema({{"junit", {{"type", "string"}, {"description", "the JUnit XML report, in the workspace"}}},
                      {"commit", {{"type", "string"}, {"description", "the commit tested (default HEAD)"}}}},
                     {"junit"}),
       record_output, false, bind(record_tool)});
  return tools;
}

std::string spark_mcp_instructions() {
  return "spark localizes faults in failing tests (not in the code under test) from the fixes a team made to "
         "earlier test failures. For a failing test, call `localize` with its file(s) and failure output (or a "
         "JUnit report): it ranks the suspicious lines and says whether the fault is likely the test's at all. "
         "`similar_failures` shows the past fixes it learnt from, `suggest_fix` the edits they suggest, and "
         "`test_history` / `open_failures` what was recorded. Paths are relative to the workspace.";
}

}  // namespace spark
