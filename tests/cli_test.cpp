// End-to-end: the real `spark` binary on data the test makes, asserting on --format json and exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <ranges>
#include <set>

#include "chat_server.h"
#include "json_schema.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using nlohmann::json;
using testing::run_spark;
using testing::sample_case;
using testing::slurp;
using testing::TempDir;
using testing::write_file;

namespace {

const std::string kTest =
    "import pytest\n\n\ndef add(a, b):\n    return a + b\n\n\ndef test_add():\n    expected = 5\n"
    "    assert add(2, 2) == expected\n\n\ndef test_sub():\n    assert 3 - 1 == 2\n";

std::string corpus_jsonl() {
  std::string out;
  for (int i = 0; i < 8; ++i) {
    json c = sample_case("c" + std::to_string(i), kTest, 9,
                         "tests/test_x.py:10: in test_add\n    assert add(2, 2) == expected\nE   assert 4 == 5\n"
                         "E    +  where 4 = add(2, 2)",
                         "2026-01-0" + std::to_string(i + 1) + "T00:00:00Z");
    c["test_id"] = "tests/test_x.py::test_add";
    c["meta"] = {{"note", i}};
    out += c.dump() + "\n";
  }
  return out;
}

// A folder with a knowledge base of the corpus, indexed.
struct Workspace {
  TempDir dir;
  Workspace() {
    write_file(dir / "cases.jsonl", corpus_jsonl());
    auto imp = run_spark({"import", "cases.jsonl"}, dir.path());
    EXPECT_EQ(imp.exit_code, 0) << imp.err;
    auto idx = run_spark({"index"}, dir.path());
    EXPECT_EQ(idx.exit_code, 0) << idx.err;
    write_file(dir / "tests" / "test_x.py", kTest);
    write_file(dir / "failure.txt",
               "tests/test_x.py:10: in test_add\n    assert add(2, 2) == expected\nE   assert 4 == 5\n");
  }
};

}  // namespace

TEST(cli, a_second_localize_of_a_test_file_version_reads_its_parsed_structure) {
  Workspace w;
  const std::vector<std::string> args = {"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format", "json"};
  auto first = run_spark(args, w.dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(w.dir / ".spark" / "structures"))
    if (e.path().extension() == ".struct") files.push_back(e.path());
  ASSERT_FALSE(files.empty());
  auto second = run_spark(args, w.dir.path());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  // A damaged structure file is parsed again: the same answer.
  for (const auto& f : files) write_file(f, "SPKPYS01");
  auto third = run_spark(args, w.dir.path());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, first.out);
}

TEST(cli, a_distant_closest_case_is_named_but_not_shown_as_a_similar_one) {
  Workspace w;
  write_file(w.dir / "tests" / "test_far.py",
             "import json\n\n\ndef test_parse_payload():\n    payload = json.loads('{\"zeta\": [9, 8]}')\n"
             "    assert payload['zeta'][0] == 7\n");
  write_file(w.dir / "far.txt", "tests/test_far.py:6: in test_parse_payload\n    assert payload['zeta'][0] == 7\n"
                                "E   assert 9 == 7\n");
  auto json_run = run_spark({"localize", "--test", "tests/test_far.py", "--error", "far.txt", "--format", "json",
                             "--similarity-floor", "0"},
                            w.dir.path());
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const auto j = json::parse(json_run.out);
  ASSERT_EQ(j["retrieved"].size(), 1u);
  const double similarity = j["retrieved"][0]["similarity"];
  ASSERT_LT(similarity, 0.5);  // the corpus is about add(); this test parses JSON
  auto text = run_spark({"localize", "--test", "tests/test_far.py", "--error", "far.txt", "--similarity-floor", "0"},
                        w.dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("closest case: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("below 0.50: not shown"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("similar case: "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("its faulty line"), std::string::npos) << text.out;
}

TEST(cli, explain_takes_one_lines_score_apart) {
  Workspace w;
  auto r = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format", "json",
                      "--explain", "9"},
                     w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  for (const auto& problem : testing::schema_problems(j, "localize.schema.json"))
    ADD_FAILURE() << problem;
  // The gate's verdict on the failing statement (line 10, an assertion raised in the test's code).
  ASSERT_TRUE(j.contains("gate")) << j.dump(2);
  EXPECT_EQ(j["gate"]["line"], 10);
  EXPECT_EQ(j["gate"]["exception"], "AssertionError");
  EXPECT_EQ(j["gate"]["form"], "assertion");
  EXPECT_TRUE(j["gate"]["raised_in_test"].get<bool>());
  const auto& ex = j["explain"];
  EXPECT_EQ(ex["line"], 9);
  EXPECT_EQ(ex["code"], "expected = 5");
  // The contributions add up to the score, and the line's rank is where the ranking puts it.
  double z = 0;
  bool annotated = false;
  for (const auto& f : ex["features"]) {
    EXPECT_DOUBLE_EQ(f["contribution"].get<double>(), f["weight"].get<double>() * f["value"].get<double>());
    z += f["contribution"].get<double>();
    if (f["feature"] == "annotated") annotated = f["value"].get<double>() > 0;
  }
  EXPECT_NEAR(ex["score"].get<double>(), 1.0 / (1.0 + std::exp(-z)), 1e-9);
  EXPECT_TRUE(annotated);  // line 9 is the retrieved cases' faulty line
  bool ranked_there = false;
  for (const auto& e : j["ranked"]) ranked_there = ranked_there || (e["line"] == 9 && e["rank"] == ex["rank"]);
  EXPECT_TRUE(ranked_there) << r.out;
  // Text: a table of every feature.
  auto text = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--explain",
                         "tests/test_x.py:10"},
                        w.dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("explain tests/test_x.py:10"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("traceback_line"), std::string::npos) << text.out;
  // A blank line is explained as not ranked; a line that is no number is a usage error.
  auto blank = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format", "json",
                          "--explain", "2"},
                         w.dir.path());
  ASSERT_EQ(blank.exit_code, 0) << blank.err;
  EXPECT_NE(json::parse(blank.out)["explain"]["note"].get<std::string>().find("not a non-blank line"), std::string::npos);
  auto bad = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--explain", "x:y"},
                       w.dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--explain \"x:y\""), std::string::npos) << bad.err;
}

TEST(cli, import_export_round_trip_is_lossless) {
  Workspace w;
  auto out = run_spark({"export"}, w.dir.path());
  ASSERT_EQ(out.exit_code, 0) << out.err;
  std::vector<json> in_cases, out_cases;
  for (const auto& l : std::vector<std::string>{corpus_jsonl()}) {
    std::istringstream ss(l);
    std::string line;
    while (std::getline(ss, line)) in_cases.push_back(json::parse(line));
  }
  std::istringstream ss(out.out);
  std::string line;
  while (std::getline(ss, line)) out_cases.push_back(json::parse(line));
  EXPECT_EQ(in_cases, out_cases);
  auto to_file = run_spark({"export", "-o", "copy.jsonl"}, w.dir.path());
  ASSERT_EQ(to_file.exit_code, 0);
  EXPECT_EQ(slurp(w.dir / "copy.jsonl"), out.out);
}

TEST(cli, a_bad_jsonl_file_is_rejected_with_its_line_and_nothing_is_stored) {
  Workspace w;
  write_file(w.dir / "bad.jsonl", sample_case("new1", kTest, 9).dump() + "\n" + sample_case("new2", kTest, 2).dump() + "\n");
  auto r = run_spark({"import", "bad.jsonl"}, w.dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "spark: error: bad.jsonl:2: faulty_lines[0]: line 2 of tests/test_x.py is blank\n");
  auto exp = run_spark({"export"}, w.dir.path());
  EXPECT_EQ(std::count(exp.out.begin(), exp.out.end(), '\n'), 8);
  // A stored id with a different record: named by file and line, nothing stored.
  write_file(w.dir / "conflict.jsonl", sample_case("new3", kTest, 9).dump() + "\n" + sample_case("c1", kTest, 10).dump() + "\n");
  auto conflict = run_spark({"import", "conflict.jsonl"}, w.dir.path());
  EXPECT_EQ(conflict.exit_code, 1);
  EXPECT_EQ(conflict.err, "spark: error: conflict.jsonl:2: id \"c1\" is already in the knowledge base with a different "
                          "record (use --replace to overwrite it)\n");
  const std::string after = run_spark({"export"}, w.dir.path()).out;
  EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 8);
  // The import streams, file after file: a bad line in the second file takes back the first file's cases too.
  write_file(w.dir / "good.jsonl", sample_case("new4", kTest, 9).dump() + "\n");
  auto second = run_spark({"import", "good.jsonl", "bad.jsonl"}, w.dir.path());
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_EQ(second.err, "spark: error: bad.jsonl:2: faulty_lines[0]: line 2 of tests/test_x.py is blank\n");
  const std::string still = run_spark({"export"}, w.dir.path()).out;
  EXPECT_EQ(std::count(still.begin(), still.end(), '\n'), 8);
  // Wrong types, truncated line, duplicate id, faulty line out of range.
  for (const auto& [content, message] : std::vector<std::pair<std::string, std::string>>{
           {"{\"id\": 5}\n", "bad.jsonl:1: \"id\" must be a string, not number"},
           {sample_case("x", kTest, 9).dump().substr(0, 40) + "\n", "bad.jsonl:1: not valid JSON"},
           {sample_case("x", kTest, 9).dump() + "\n" + sample_case("x", kTest, 9).dump() + "\n", "bad.jsonl:2: duplicate id \"x\""},
           {sample_case("x", kTest, 99).dump() + "\n", "bad.jsonl:1: faulty_lines[0]: line 99 is out of range"}}) {
    write_file(w.dir / "bad.jsonl", content);
    auto bad = run_spark({"import", "bad.jsonl"}, w.dir.path());
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find(message), std::string::npos) << bad.err;
  }
}

TEST(cli, localize_prints_ranked_lines_with_reasons_as_json) {
  Workspace w;
  auto r = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "-k", "3", "--format", "json"},
                     w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  for (const auto& problem : testing::schema_problems(j, "localize.schema.json"))
    ADD_FAILURE() << problem;
  EXPECT_EQ(j["test_id"], "tests/test_x.py::test_add");  // inferred from the traceback
  EXPECT_EQ(j["language"], "python");
  ASSERT_EQ(j["ranked"].size(), 3u);
  EXPECT_EQ(j["retrieved"].size(), 1u);
  EXPECT_EQ(j["annotations"][0]["line"], 9);  // the retrieved cases' faulty line
  bool has9 = false;
  for (const auto& e : j["ranked"]) has9 = has9 || e["line"] == 9;
  EXPECT_TRUE(has9);
  EXPECT_NE(r.err.find("no LLM configured"), std::string::npos);
  auto stdin_run = run_spark({"localize", "--test", "tests/test_x.py", "--error", "-", "--format", "sarif"}, w.dir.path(),
                             slurp(w.dir / "failure.txt"));
  ASSERT_EQ(stdin_run.exit_code, 0) << stdin_run.err;
  EXPECT_EQ(json::parse(stdin_run.out)["version"], "2.1.0");
}

TEST(cli, localize_without_a_knowledge_base_answers_with_the_baseline_and_says_so) {
  TempDir dir;
  write_file(dir / "tests" / "test_x.py", kTest);
  write_file(dir / "f.txt", "tests/test_x.py:10: in test_add\nE   assert 4 == 5\n");
  auto r = run_spark({"localize", "--test", "tests/test_x.py", "--error", "f.txt", "--format", "json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["degraded"].get<bool>());
  EXPECT_NE(r.err.find("no knowledge base at .spark"), std::string::npos);
}

TEST(cli, bad_test_files_and_messages_get_clear_errors_or_documented_handling) {
  Workspace w;
  const auto localize = [&](const std::string& test, const std::string& error = "failure.txt") {
    return run_spark({"localize", "--test", test, "--error", error, "--format", "json"}, w.dir.path());
  };
  write_file(w.dir / "latin1.py", "x = 1\ns = 'caf\xe9'\n");
  auto latin1 = localize("latin1.py");
  EXPECT_EQ(latin1.exit_code, 1);
  EXPECT_NE(latin1.err.find("latin1.py:2: invalid UTF-8 at byte 14"), std::string::npos) << latin1.err;

  write_file(w.dir / "binary.py", std::string("\x7f" "ELF\0\0\x01", 7));
  auto binary = localize("binary.py");
  EXPECT_EQ(binary.exit_code, 1);
  EXPECT_NE(binary.err.find("binary.py:1: contains a NUL byte"), std::string::npos) << binary.err;

  write_file(w.dir / "empty.py", "");
  auto empty = localize("empty.py");
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_TRUE(json::parse(empty.out)["ranked"].empty());

  write_file(w.dir / "long.py", "x = '" + std::string(5 << 20, 'a') + "'\n");
  auto long_line = localize("long.py");
  EXPECT_EQ(long_line.exit_code, 0) << long_line.err;
  EXPECT_EQ(json::parse(long_line.out)["ranked"].size(), 1u);

  std::string huge = "tests/test_x.py:10: in test_add\n";
  while (huge.size() < (10u << 20)) huge += "E   some very long log output line " + std::to_string(huge.size()) + "\n";
  write_file(w.dir / "huge.txt", huge + "\xff\n");
  auto big_error = localize("tests/test_x.py", "huge.txt");
  EXPECT_EQ(big_error.exit_code, 0) << big_error.err;
  EXPECT_NE(big_error.err.find("huge.txt: invalid UTF-8 at byte"), std::string::npos);
}

TEST(cli, damaged_stores_and_indexes_fail_with_the_file_named_and_stay_untouched) {
  Workspace w;
  const std::string before = slurp(w.dir / ".spark" / "kb.sqlite");
  const std::string vectors_file =
      nlohmann::json::parse(slurp(w.dir / ".spark" / "index" / "manifest.json")).at("vectors_file").get<std::string>();
  const std::string vectors = slurp(w.dir / ".spark" / "index" / vectors_file);
  write_file(w.dir / ".spark" / "index" / vectors_file, vectors.substr(0, vectors.size() - 100));
  auto truncated = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt"}, w.dir.path());
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_NE(truncated.err.find(".spark/index/" + vectors_file + ": size or header does not match manifest.json"),
            std::string::npos)
      << truncated.err;
  auto rebuilt = run_spark({"index", "--rebuild"}, w.dir.path());
  EXPECT_EQ(rebuilt.exit_code, 0) << rebuilt.err;
  // A byte changed inside the vectors (the size intact): a query maps the file without reading it all and answers;
  // `spark index` checks every byte, says what it found, and rebuilds.
  {
    const std::filesystem::path index_dir = w.dir / ".spark" / "index";
    const std::string file = nlohmann::json::parse(slurp(index_dir / "manifest.json")).at("vectors_file").get<std::string>();
    std::string bytes = slurp(index_dir / file);
    bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x21);
    write_file(index_dir / file, bytes);
    auto query = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt"}, w.dir.path());
    EXPECT_EQ(query.exit_code, 0) << query.err;
    auto check = run_spark({"index"}, w.dir.path());
    EXPECT_EQ(check.exit_code, 0) << check.err;
    EXPECT_NE(check.err.find("rebuilding the vector index: .spark/index/" + file + ": checksum mismatch"),
              std::string::npos)
        << check.err;
    auto again = run_spark({"index"}, w.dir.path());
    EXPECT_NE(again.out.find("is up to date"), std::string::npos) << again.out << again.err;
    EXPECT_NE(again.out.find("every file matches its checksum"), std::string::npos) << again.out;
  }

  // Stale: a case added by another tool behind the index's back is embedded for the run, and said so.
  TempDir other;
  write_file(other / "more.jsonl", sample_case("late", kTest, 10).dump() + "\n");
  auto imp = run_spark({"--kb", (w.dir / ".spark").string(), "import", (other / "more.jsonl").string()}, w.dir.path());
  EXPECT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.out.find("added 1 case(s) to the vector index"), std::string::npos) << imp.out;
  {
    // The vectors live in the index only (the store keeps none): the saved index holds the new case.
    const auto manifest = nlohmann::json::parse(slurp(w.dir / ".spark" / "index" / "manifest.json"));
    EXPECT_EQ(manifest.at("count").get<int>(), 9);
  }
  auto fresh = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt"}, w.dir.path());
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(fresh.err.find("the index lacked"), std::string::npos) << fresh.err;  // persisted: nothing to catch up

  write_file(w.dir / ".spark" / "kb.sqlite", std::string(4096, '\x42'));
  std::filesystem::remove(w.dir / ".spark" / "kb.sqlite-wal");
  std::filesystem::remove(w.dir / ".spark" / "kb.sqlite-shm");
  auto corrupt = run_spark({"export"}, w.dir.path());
  EXPECT_EQ(corrupt.exit_code, 1);
  EXPECT_NE(corrupt.err.find(".spark/kb.sqlite"), std::string::npos) << corrupt.err;
  EXPECT_EQ(slurp(w.dir / ".spark" / "kb.sqlite"), std::string(4096, '\x42'));
  (void)before;
}

TEST(cli, usage_errors_exit_with_2) {
  TempDir dir;
  EXPECT_EQ(run_spark({}, dir.path()).exit_code, 2);
  EXPECT_EQ(run_spark({"localize", "--format", "xml"}, dir.path()).exit_code, 2);
  write_file(dir / "e.txt", "E   boom\n");
  auto no_test = run_spark({"localize", "--error", "e.txt"}, dir.path());
  EXPECT_EQ(no_test.exit_code, 2);
  EXPECT_EQ(no_test.err, "spark: error: give the failing test's file with --test (or a cases file with --case [--id])\n");
  EXPECT_EQ(run_spark({"localize", "--test", "e.txt"}, dir.path()).exit_code, 2);
  EXPECT_EQ(run_spark({"--version"}, dir.path()).exit_code, 0);
}

TEST(cli, an_unknown_option_names_the_one_it_most_likely_meant) {
  TempDir dir;
  // pytest's flag given to spark.
  auto junitxml = run_spark({"localize", "--junitxml", "report.xml"}, dir.path());
  EXPECT_EQ(junitxml.exit_code, 2);
  EXPECT_NE(junitxml.err.find("did you mean --junit?"), std::string::npos) << junitxml.err;
  // Where --junit is required, its absence is what CLI11 reports first: the hint still follows.
  auto required = run_spark({"record", "--junitxml", "report.xml"}, dir.path());
  EXPECT_EQ(required.exit_code, 2);
  EXPECT_NE(required.err.find("unknown option --junitxml: did you mean --junit?"), std::string::npos) << required.err;
  write_file(dir / "r.xml", "<testsuite/>\n");
  auto typo = run_spark({"record", "--junit=r.xml", "--formta", "json"}, dir.path());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown option --formta: did you mean --format?"), std::string::npos) << typo.err;
  // Nothing close: no guess.
  auto far = run_spark({"localize", "--zzzzzzzzzz"}, dir.path());
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

// --- with an LLM: the real binary against the scripted in-process server -------------------------------------

TEST(cli, localize_with_an_llm_reports_its_answer_usage_and_raw_text) {
  Workspace w;
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(testing::ChatServer::completion(R"J({"faulty_lines": [{"line": 9, "code": "expected = 5"}, {"line": 10, "code": "x"}]})J",
                                                    "stop", true, 250, 30),
                    "application/json");
  });
  auto r = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "-k", "3", "--format", "json",
                      "--llm-url", server.url(), "--model", "qwen2.5-72b", "--show-prompt"},
                     w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  for (const auto& problem : testing::schema_problems(j, "localize.schema.json"))
    ADD_FAILURE() << problem;  // with the llm object
  EXPECT_EQ(j["ranked"][0]["line"], 9);
  EXPECT_EQ(j["ranked"][0]["source"], "llm");
  EXPECT_EQ(j["ranked"][1]["line"], 10);
  EXPECT_EQ(j["ranked"][2]["source"], "filled");
  EXPECT_EQ(j["llm"]["model"], "qwen2.5-72b");
  EXPECT_EQ(j["llm"]["mode"], "default");
  EXPECT_EQ(j["llm"]["tokens"]["prompt"], 250);
  EXPECT_FALSE(j["llm"]["tokens"]["estimated"].get<bool>());
  EXPECT_EQ(j["llm"]["answer"]["from_llm"], 2);
  EXPECT_NE(j["llm"]["answer"]["raw"].get<std::string>().find("expected = 5"), std::string::npos);
  // The annotated line (9 resembles the retrieved faulty line) carries the marker in the prompt sent.
  const std::string prompt = testing::ChatServer::prompt_of(server.bodies().at(0));
  EXPECT_NE(prompt.find("9:     expected = 5  # !!! high likelihood of being faulty !!!"), std::string::npos) << prompt;
  EXPECT_EQ(j["llm"]["prompt"], prompt);
  EXPECT_EQ(r.err.find("no LLM configured"), std::string::npos);
}

TEST(cli, an_unreachable_llm_falls_back_unless_required) {
  Workspace w;
  int port;
  {
    testing::ChatServer gone([](const httplib::Request&, httplib::Response&, int) {});
    port = gone.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  std::vector<std::string> args = {"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format", "json",
                                   "--llm-url", url, "--model", "m", "--retries", "1", "--retry-delay", "0.01"};
  auto r = run_spark(args, w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the LLM could not be used"), std::string::npos) << r.err;
  EXPECT_FALSE(json::parse(r.out)["llm"]["used"].get<bool>());
  EXPECT_EQ(json::parse(r.out)["ranked"][0]["source"], "builtin");
  args.push_back("--require-llm");
  auto strict = run_spark(args, w.dir.path());
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_TRUE(strict.out.empty());
  EXPECT_NE(strict.err.find("--require-llm"), std::string::npos);
  auto none = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--require-llm"}, w.dir.path());
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no LLM configured"), std::string::npos);
}

TEST(cli, a_cases_file_is_localized_as_a_batch_in_input_order) {
  Workspace w;
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    res.set_content(testing::ChatServer::completion("line 10"), "application/json");
  });
  auto r = run_spark({"localize", "--case", "cases.jsonl", "--format", "json", "-k", "2", "--llm-url", server.url(),
                      "--model", "m", "--concurrency", "4"},
                     w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 8u);
  for (const auto& doc : j) EXPECT_EQ(doc["ranked"][0]["line"], 10);
  EXPECT_EQ(server.calls(), 8u);
  // Each query's own labels and meta are hidden: no prompt mentions the meta note.
  for (const auto& b : server.bodies()) EXPECT_EQ(b.find("\"note\""), std::string::npos);
}

TEST(cli, modes_random_and_baseline_retrieve_as_the_paper_says) {
  Workspace w;
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(testing::ChatServer::completion("line 10"), "application/json");
  });
  const auto run = [&](const std::string& mode, const std::string& seed) {
    auto r = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format", "json", "--mode",
                        mode, "--seed", seed, "--llm-url", server.url(), "--model", "m"},
                       w.dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  };
  const auto baseline = run("baseline", "1");
  EXPECT_TRUE(baseline["retrieved"].empty());
  EXPECT_EQ(testing::ChatServer::prompt_of(server.bodies().back()).find("!!!"), std::string::npos);
  const auto a = run("random", "7"), b = run("random", "7");
  ASSERT_EQ(a["retrieved"].size(), 1u);
  EXPECT_EQ(a["retrieved"][0]["id"], b["retrieved"][0]["id"]);  // seeded
  std::set<std::string> drawn;
  for (int seed = 0; seed < 12; ++seed) drawn.insert(run("random", std::to_string(seed))["retrieved"][0]["id"]);
  EXPECT_GT(drawn.size(), 1u);  // not the similarity order
}

TEST(cli, configuration_file_env_and_flags_in_priority_order_and_secrets_hidden) {
  TempDir dir;
  std::filesystem::create_directories(dir / ".git");
  write_file(dir / ".spark.toml",
             "kb = \"store\"\n[llm]\nmodel = \"from-file\"\napi_key = \"sk-file-secret-123\"\nconcurrency = 8\n"
             "[localize]\nk = 7\n[redact]\npatterns = [\"EMP-[0-9]{6}\"]\n");
  std::filesystem::create_directories(dir / "sub");
  // The repository's own file: its key and a raised limit are not used until it is trusted (trust_test.cpp).
  auto untrusted = run_spark({"config"}, dir / "sub");
  ASSERT_EQ(untrusted.exit_code, 0) << untrusted.err;
  EXPECT_NE(untrusted.err.find("not used: llm.api_key ("), std::string::npos) << untrusted.err;
  EXPECT_NE(untrusted.err.find("llm.concurrency ("), std::string::npos) << untrusted.err;
  EXPECT_EQ(untrusted.out.find("sk-file-secret-123"), std::string::npos);
  EXPECT_EQ(untrusted.err.find("sk-file-secret-123"), std::string::npos);
  ASSERT_EQ(run_spark({"trust"}, dir / "sub").exit_code, 0);
  auto r = run_spark({"config"}, dir / "sub");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("model = \"from-file\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(".spark.toml:3"), std::string::npos);
  EXPECT_NE(r.out.find("k = 7"), std::string::npos);
  EXPECT_NE(r.out.find("EMP-[0-9]{6}"), std::string::npos);
  EXPECT_EQ(r.out.find("sk-file-secret-123"), std::string::npos);
  EXPECT_NE(r.out.find("# api_key = (set, hidden)"), std::string::npos);
  ::setenv("SPARK_LLM_MODEL", "from-env", 1);
  auto env = run_spark({"config"}, dir.path());
  auto flag = run_spark({"config"}, dir.path());
  ::unsetenv("SPARK_LLM_MODEL");
  EXPECT_NE(env.out.find("model = \"from-env\"    # from env SPARK_LLM_MODEL"), std::string::npos) << env.out;
  auto over = run_spark({"--kb", "elsewhere", "config"}, dir.path());
  EXPECT_NE(over.out.find("kb = \"elsewhere\"    # from flag --kb"), std::string::npos) << over.out;

  write_file(dir / "bad.toml", "[llm]\nconcurrency = \"many\"\n");
  auto bad = run_spark({"--config", "bad.toml", "config"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.toml:2: llm.concurrency must be an integer"), std::string::npos) << bad.err;
  write_file(dir / "unknown.toml", "[llm]\nmodle = \"x\"\n");
  auto unknown = run_spark({"--config", "unknown.toml", "config"}, dir.path());
  EXPECT_NE(unknown.err.find("unknown.toml:2: unknown setting llm.modle"), std::string::npos) << unknown.err;
  write_file(dir / "broken.toml", "[llm\nmodel = 1\n");
  auto broken = run_spark({"--config", "broken.toml", "config"}, dir.path());
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("broken.toml:1"), std::string::npos) << broken.err;
  EXPECT_EQ(run_spark({"--config", "missing.toml", "config"}, dir.path()).exit_code, 2);
}

// libcurl, libpq and libgit2 are opened when a command first needs them (base/shared_library.h), not at start: the
// loader's own trace (LD_DEBUG=files) lists each library a process loads.
TEST(cli, the_network_postgres_and_git_libraries_are_loaded_only_by_commands_that_use_them) {
  Workspace w;
  const auto loaded = [&](const std::vector<std::string>& args) {
    ::setenv("LD_DEBUG", "files", 1);
    auto r = run_spark(args, w.dir.path());
    ::unsetenv("LD_DEBUG");
    std::set<std::string> libraries;
    for (const char* name : {"libcurl.so", "libpq.so", "libgit2.so"})
      if (r.err.find(std::string("file=") + name) != std::string::npos) libraries.insert(name);
    // spark's own messages, without the trace (its lines start with the process id).
    std::string messages;
    for (const auto line : std::views::split(r.err, '\n')) {
      const std::string_view l(line.begin(), line.end());
      const size_t text = l.find_first_not_of(' ');
      if (text != std::string_view::npos && !std::isdigit(static_cast<unsigned char>(l[text])))
        messages.append(l).append("\n");
    }
    // The trace is there: the library every process loads is in it (the C library: the rest are linked in,
    // SPARK_STATIC_LIBS in CMakeLists.txt).
    EXPECT_NE(r.err.find("file=libc.so"), std::string::npos) << r.err.substr(0, 1000);
    r.err = messages;
    return std::make_pair(r, libraries);
  };
  auto [version, none] = loaded({"--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_TRUE(none.empty());
  auto [localize, local_only] = loaded({"localize", "--test", "tests/test_x.py", "--error", "failure.txt"});
  EXPECT_EQ(localize.exit_code, 0) << localize.err;
  EXPECT_TRUE(local_only.empty()) << *local_only.begin();

  // An LLM server (a port nothing listens on: the answer falls back to the built-in ranker) needs libcurl only.
  auto [llm, with_llm] = loaded({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--llm-url",
                                 "http://127.0.0.1:9/v1", "--model", "m", "--retries", "0"});
  EXPECT_EQ(with_llm, std::set<std::string>{"libcurl.so"}) << llm.err;
  // A PostgreSQL knowledge base needs libpq only (nothing answers there either).
  auto [pg, with_pg] = loaded({"--kb", "postgresql://127.0.0.1:9/none?connect_timeout=1", "export"});
  EXPECT_NE(pg.exit_code, 0);
  EXPECT_EQ(with_pg, std::set<std::string>{"libpq.so"}) << pg.err;
  // Git history needs libgit2 (the workspace is no repository: the error says so, from libgit2).
  write_file(w.dir / "none.jsonl", "");
  auto [mine, with_git] = loaded({"mine", "--outcomes", "none.jsonl"});
  EXPECT_NE(mine.exit_code, 0);
  EXPECT_TRUE(with_git.contains("libgit2.so")) << mine.err;
}

}  // namespace spark::SPARK_TEST_FILE_ID
