// `spark eval` end to end: the real binary on a corpus the test makes, with and without the scripted LLM server.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "chat_server.h"
#include "json_schema.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

// Twelve failures of one test module, each with its own broken line; the traceback names the failing assert.
std::string corpus() {
  std::string out;
  for (int i = 0; i < 12; ++i) {
    const int value = 10 + i;
    std::string code = "import pytest\n\n\ndef total(items):\n    return sum(items)\n\n\n";
    code += "def test_total_" + std::to_string(i) + "():\n";
    code += "    items = [1, 2, " + std::to_string(value) + "]\n";        // line 9: the seeded fault
    code += "    expected = " + std::to_string(3 + value + 1) + "\n";      // line 10
    code += "    assert total(items) == expected\n";                       // line 11
    json c = testing::sample_case("case-" + std::to_string(i), code, i % 3 == 0 ? 10 : 9,
                                  "tests/test_x.py:11: in test_total_" + std::to_string(i) +
                                      "\n    assert total(items) == expected\nE   assert " + std::to_string(3 + value) +
                                      " == " + std::to_string(4 + value) + "\n",
                                  "2026-01-" + std::string(i < 9 ? "0" : "") + std::to_string(i + 1) + "T00:00:00Z");
    c["test_id"] = "tests/test_x.py::test_total_" + std::to_string(i);
    c["project"] = i < 6 ? "demo/one" : "demo/two";
    out += c.dump() + "\n";
  }
  return out;
}

const json* table(const json& report, const std::string& id) {
  for (const auto& t : report["tables"])
    if (t["id"] == id) return &t;
  return nullptr;
}

TEST(validate_json, reports_strings_for_numbers_missing_keys_and_unknown_keywords) {
  const json schema = testing::schema_file("eval.schema.json");
  json doc = {{"schema", "spark.eval/2"}, {"command", "spark eval"}, {"seconds", 1.5}, {"rankers", json::array()},
              {"tables", json::array({{{"id", "effectiveness"}, {"title", "t"},
                                       {"rows", json::array({{{"Hit@k", 72.7}, {"k", 1}}})}}})},
              {"cases", json::array()}};
  EXPECT_TRUE(testing::validate_json(doc, schema).empty());
  doc["tables"][0]["rows"][0]["Hit@k"] = "72.7";  // the old form
  doc.erase("command");
  const auto problems = testing::validate_json(doc, schema);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("missing \"command\""), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("Hit@k"), std::string::npos) << problems[1];
  EXPECT_FALSE(testing::validate_json(1, json{{"type", "integer"}, {"format", "x"}}).empty());
  // Debian's python3-jsonschema, as a user validates: the same two problems, and a line reference checked through
  // the $ref into localize.schema.json (resolved by its absolute $id, from the store, not the network).
  EXPECT_EQ(testing::python_schema_problems(doc, "eval.schema.json").size(), 2u);
  doc["command"] = "spark eval";
  doc["tables"][0]["rows"][0]["Hit@k"] = 72.7;
  doc["cases"].push_back({{"id", "c"}, {"dataset", "d"}, {"test_id", "t"}, {"faulty", json::array({{{"path", "t.py"}, {"line", 0}}})},
                          {"runs", json::array()}});
  for (const auto& found : {testing::validate_json(doc, schema), testing::python_schema_problems(doc, "eval.schema.json")}) {
    ASSERT_EQ(found.size(), 1u);
    EXPECT_NE(found[0].find("$.cases[0].faulty[0].line"), std::string::npos) << found[0];
  }
}

TEST(eval, leave_one_out_tables_for_builtin_and_the_references) {
  TempDir dir;
  write_file(dir / "corpus.jsonl", corpus());
  auto r = run_spark({"eval", "corpus.jsonl", "--mode", "builtin,traceback,annotation", "-k", "1,3", "--level",
                      "line,function", "--policy", "all,all-preceding", "--format", "json"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["schema"], "spark.eval/2");
  // The output conforms to its schema, and no number hides in a string.
  for (const auto& problem : testing::schema_problems(j, "eval.schema.json")) ADD_FAILURE() << problem;
  const std::regex numeric(R"(-?[0-9.]+%?( \(.*\))?)");
  for (const auto& t : j["tables"])
    for (const auto& row : t["rows"])
      for (const auto& [column, value] : row.items()) {
        if (value.is_string()) {
          EXPECT_FALSE(std::regex_match(value.get<std::string>(), numeric)) << column << ": " << value;
        }
      }
  const json* eff = table(j, "effectiveness");
  ASSERT_TRUE(eff);
  // 3 datasets (two projects and all) × 2 levels × 2 k × 3 modes × 2 policies.
  EXPECT_EQ((*eff)["rows"].size(), 3u * 2 * 2 * 3 * 2);
  for (const auto& row : (*eff)["rows"]) {
    if (row["mode"] == "traceback" && row["level"] == "line" && row["k"] == 1 && row["dataset"] == "all") {
      EXPECT_EQ(row["Hit@k"], 0.0);  // the traceback names line 11; the faults are on 9 and 10
    }
    if (row["level"] == "function" && row["dataset"] == "all" && row["k"] == 1 && row["mode"] != "annotation") {
      EXPECT_EQ(row["Hit@k"], 100.0);  // every line is in the one test function
    }
  }
  // Leave-one-out: with policy all each query sees the 11 others; all-preceding sees 0 to 11.
  const json* kb = table(j, "knowledge_base");
  ASSERT_TRUE(kb);
  for (const auto& row : (*kb)["rows"])
    if (row["dataset"] == "all") {
      if (row["policy"] == "all") {
        EXPECT_EQ(row["max"], 11);
        EXPECT_EQ(row["min"], 11);
      } else {
        EXPECT_EQ(row["min"], 0);
      }
    }
  ASSERT_EQ(j["cases"].size(), 12u);
  for (const auto& c : j["cases"])
    for (const auto& run : c["runs"])
      for (const auto& p : run["predicted"]) EXPECT_EQ(p["path"], "tests/test_x.py");
  EXPECT_TRUE(table(j, "significance"));
  EXPECT_FALSE(table(j, "significance")->at("rows").empty());

  // Deterministic: the same effectiveness again; Markdown and CSV carry the same table.
  auto again = run_spark({"eval", "corpus.jsonl", "--mode", "builtin,traceback,annotation", "-k", "1,3", "--level",
                          "line,function", "--policy", "all,all-preceding", "--format", "json"},
                         dir.path());
  EXPECT_EQ(*table(json::parse(again.out), "effectiveness"), *eff);
  auto md = run_spark({"eval", "corpus.jsonl", "-k", "1", "-o", "report.md"}, dir.path());
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(testing::slurp(dir / "report.md").find("| all | line | 1 | builtin |"), std::string::npos);
  auto csv = run_spark({"eval", "corpus.jsonl", "-k", "1", "--format", "csv"}, dir.path());
  EXPECT_NE(csv.out.find("effectiveness,all,line,1,builtin,all,0.05,1,12,"), std::string::npos) << csv.out;
}

TEST(eval, llm_modes_are_cached_and_a_rerun_or_a_resumed_run_asks_only_for_what_is_missing) {
  TempDir dir;
  write_file(dir / "corpus.jsonl", corpus());
  std::atomic<bool> failing{true};  // case-1's prompts fail (HTTP 400: not retried) in the first run, as if cut off
  testing::ChatServer server([&](const httplib::Request& req, httplib::Response& res, int) {
    if (failing && testing::ChatServer::prompt_of(req.body).find("def test_total_1():") != std::string::npos) {
      res.status = 400;
      res.set_content(R"({"error": {"message": "try later"}})", "application/json");
      return;
    }
    res.set_content(testing::ChatServer::completion("line 9\nline 10\nline 11"), "application/json");
  });
  const std::vector<std::string> args = {"eval", "corpus.jsonl", "--mode", "default,baseline", "-k", "1,3", "--format",
                                         "json", "--llm-url", server.url(), "--model", "m", "--concurrency", "4",
                                         "--cache", "answers.sqlite"};
  // Every prompt is asked once: a default-mode prompt with no line annotated is the baseline prompt, so the cache
  // answers the second from the first.
  const auto failures = [](const json& report) {
    size_t n = 0;
    for (const auto& c : report["cases"])
      for (const auto& run : c["runs"]) n += run["llm"]["used"].get<bool>() ? 0 : 1;
    return n;
  };
  auto first = run_spark(args, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const size_t c1 = server.calls();
  EXPECT_LE(c1, 2u * 2 * 12);  // 2 modes × 2 k × 12 cases at most
  EXPECT_GE(c1, 2u * 12);      // at least one prompt per case and k
  const json j1 = json::parse(first.out);
  const size_t failed = failures(j1);
  EXPECT_GE(failed, 2u);  // case-1 at k = 1 and 3 fell back to the built-in ranker, and is not cached
  EXPECT_LE(failed, 4u);
  const json* cost = table(j1, "efficiency");
  ASSERT_TRUE(cost);
  EXPECT_FALSE(cost->at("rows").empty());

  failing = false;
  auto second = run_spark(args, dir.path());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const size_t asked = server.calls() - c1;
  EXPECT_GE(asked, 2u);  // only case-1's prompts are asked again
  EXPECT_LE(asked, 4u);
  EXPECT_NE(second.err.find(", " + std::to_string(asked) + " new"), std::string::npos) << second.err;
  EXPECT_EQ(failures(json::parse(second.out)), 0u);
  auto third = run_spark(args, dir.path());
  EXPECT_EQ(server.calls(), c1 + asked);  // nothing new
  EXPECT_NE(third.err.find(", 0 new"), std::string::npos) << third.err;
  EXPECT_EQ(*table(json::parse(third.out), "effectiveness"), *table(json::parse(second.out), "effectiveness"));
  // The model answered 9, 10, 11: Hit@3 is 100 % in default mode once every answer is in.
  const json final_report = json::parse(third.out);
  for (const auto& row : table(final_report, "effectiveness")->at("rows"))
    if (row["dataset"] == "all" && row["k"] == 3) {
      EXPECT_EQ(row["Hit@k"], 100.0) << row.dump();
    }
}

// Issue 40: answers whose bytes are not UTF-8 made `--format json` exit 1 with nlohmann's type_error.316 and print
// nothing, after the whole evaluation had run. Now each such run falls back and the report is JSON.
TEST(eval, answers_not_utf8_fall_back_and_the_json_report_stays_json) {
  TempDir dir;
  write_file(dir / "corpus.jsonl", corpus());
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content("{\"choices\": [{\"message\": {\"content\": \"line 9 \xff\"}}]}", "application/json");
  });
  auto r = run_spark({"eval", "corpus.jsonl", "--mode", "default", "-k", "1", "--format", "json", "--llm-url",
                      server.url(), "--model", "m", "--retries", "0"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  for (const auto& problem : testing::schema_problems(report, "eval.schema.json")) ADD_FAILURE() << problem;
  size_t fell_back = 0;
  for (const auto& c : report["cases"])
    for (const auto& run : c["runs"])
      if (!run["llm"]["used"].get<bool>() &&
          run["llm"]["error"].get<std::string>().find("line 9 \xef\xbf\xbd") != std::string::npos)
        ++fell_back;
  EXPECT_EQ(fell_back, 12u) << r.out.substr(0, 2000);
}

TEST(eval, bad_input_is_named_and_llm_modes_need_an_llm) {
  TempDir dir;
  write_file(dir / "corpus.jsonl", corpus());
  write_file(dir / "bad.jsonl", "{\"id\": \"x\"}\n");
  auto bad = run_spark({"eval", "bad.jsonl"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.jsonl:1"), std::string::npos) << bad.err;
  auto twice = run_spark({"eval", "corpus.jsonl", "corpus.jsonl"}, dir.path());
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.err.find("appears twice"), std::string::npos);
  auto magic = run_spark({"eval", "corpus.jsonl", "--mode", "magic"}, dir.path());
  EXPECT_EQ(magic.exit_code, 2);
  EXPECT_NE(magic.err.find("--mode: unknown mode \"magic\" (known: traceback, annotation, builtin, baseline, default,"),
            std::string::npos)
      << magic.err;
  // --compare's modes are parsed too: an unknown one is refused before anything runs, not skipped in silence.
  auto compare = run_spark({"eval", "corpus.jsonl", "--mode", "builtin,traceback", "--compare", "builtin:tracebak"},
                           dir.path());
  EXPECT_EQ(compare.exit_code, 2);
  EXPECT_NE(compare.err.find("--compare builtin:tracebak: unknown mode \"tracebak\""), std::string::npos)
      << compare.err;
  auto no_llm = run_spark({"eval", "corpus.jsonl", "--mode", "default"}, dir.path());
  EXPECT_EQ(no_llm.exit_code, 1);
  EXPECT_NE(no_llm.err.find("need an LLM"), std::string::npos) << no_llm.err;
}

TEST(eval, the_html_report_loads_in_headless_chromium_without_console_errors) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh --tests installs it)";
  TempDir dir;
  write_file(dir / "corpus.jsonl", corpus());
  auto r = run_spark({"eval", "corpus.jsonl", "--mode", "builtin,traceback", "-k", "1,3", "--html", "report.html"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string cmd = "cd '" + dir.path().string() +
                          "' && timeout 120 chromium --headless=new --no-sandbox --disable-gpu --enable-logging=stderr "
                          "--v=0 --user-data-dir=chrome-profile --dump-dom file://" + (dir / "report.html").string() +
                          " > dom.html 2> chrome.log";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::slurp(dir / "chrome.log");
  const std::string dom = testing::slurp(dir / "dom.html");
  const std::string log = testing::slurp(dir / "chrome.log");
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;  // no console message at all, let alone an error
  EXPECT_NE(dom.find("<table class=\"sortable\">"), std::string::npos);
  EXPECT_NE(dom.find("Effectiveness (%)"), std::string::npos);
  EXPECT_NE(dom.find("case-11"), std::string::npos);  // the drill-down
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_NE(dom.find("<svg"), std::string::npos);
  }
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
