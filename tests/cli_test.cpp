// End-to-end: the real `spark` binary on data the test makes, asserting on --format json and exit codes.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark {

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
  EXPECT_EQ(j["test_id"], "tests/test_x.py::test_add");  // inferred from the traceback
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
  const std::string vectors = slurp(w.dir / ".spark" / "index" / "vectors.faiss");
  write_file(w.dir / ".spark" / "index" / "vectors.faiss", vectors.substr(0, vectors.size() - 100));
  auto truncated = run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt"}, w.dir.path());
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_NE(truncated.err.find(".spark/index/vectors.faiss: checksum mismatch"), std::string::npos) << truncated.err;
  auto rebuilt = run_spark({"index", "--rebuild"}, w.dir.path());
  EXPECT_EQ(rebuilt.exit_code, 0) << rebuilt.err;

  // Stale: a case added by another tool behind the index's back is embedded for the run, and said so.
  TempDir other;
  write_file(other / "more.jsonl", sample_case("late", kTest, 10).dump() + "\n");
  auto imp = run_spark({"--kb", (w.dir / ".spark").string(), "import", (other / "more.jsonl").string()}, w.dir.path());
  EXPECT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.out.find("added 1 case(s) to the vector index"), std::string::npos) << imp.out;
  {
    sqlite3* db = nullptr;
    sqlite3_open((w.dir / ".spark" / "kb.sqlite").c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM embeddings", -1, &st, nullptr);
    sqlite3_step(st);
    EXPECT_EQ(sqlite3_column_int(st, 0), 9);  // the new case's vector is stored too
    sqlite3_finalize(st);
    sqlite3_close(db);
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

}  // namespace spark
