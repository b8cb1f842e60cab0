// One fault, one case: a fix that labels the same faulty lines for several failing tests stores one case naming every
// test it broke (real git, Debian's pytest at its defaults, the real binary); a store an older spark filled with one
// case per test is merged when opened.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "formats/case.h"
#include "miner/mining_store.h"
#include "store/knowledge_base.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;
using testing::git;
using testing::run_pytest;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

// A shared expected value (line 1) that three tests read: 7 where the sums are 6.
const char* kBroken =
    "EXPECTED = 7\n\n\ndef test_sum():\n    assert sum([1, 2, 3]) == EXPECTED\n\n\ndef test_total():\n"
    "    assert 1 + 2 + 3 == EXPECTED\n\n\nclass TestMore:\n    def test_again(self):\n"
    "        assert 2 * 3 == EXPECTED\n\n\ndef test_other():\n    assert 'a' * 2 == 'aa'\n";

std::vector<json> exported(const TempDir& dir) {
  auto r = run_spark({"export"}, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> out;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) out.push_back(json::parse(l));
  return out;
}

// The history: the broken constant, a run that records three failures, the fix, a run that labels them.
void shared_value_fault(const TempDir& dir) {
  git(dir, "init");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
  write_file(dir / "tests" / "test_calc.py", kBroken);
  git(dir, "add -A");
  git(dir, "commit -m broken", "2026-02-01T00:00:00Z");
  ASSERT_EQ(run_pytest({"--junitxml=r1.xml", "tests"}, dir.path()).exit_code, 1);
  auto r1 = run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  std::string fixed = kBroken;
  fixed.replace(0, 12, "EXPECTED = 6");
  write_file(dir / "tests" / "test_calc.py", fixed);
  git(dir, "commit -am fix", "2026-02-02T00:00:00Z");
  ASSERT_EQ(run_pytest({"--junitxml=r2.xml", "tests"}, dir.path()).exit_code, 0);
  auto r2 = run_spark({"record", "--junit", "r2.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("2 the same fault as an earlier failure"), std::string::npos) << r2.err;
}

TEST(one_fault, a_shared_line_that_broke_three_tests_is_one_case_naming_them_all) {
  TempDir dir;
  shared_value_fault(dir);
  const auto cases = exported(dir);
  ASSERT_EQ(cases.size(), 1u);
  const json& c = cases[0];
  EXPECT_EQ(c["faulty_lines"], json::parse(R"([{"path": "tests/test_calc.py", "line": 1, "fix": ["EXPECTED = 6"]}])"));
  // The earliest failure keeps the case (one commit, one time here: the first test id), the others follow it.
  EXPECT_EQ(c["test_id"], "tests/test_calc.py::TestMore::test_again");
  EXPECT_EQ(c["tests"], json({"tests/test_calc.py::TestMore::test_again", "tests/test_calc.py::test_sum",
                              "tests/test_calc.py::test_total"}))
      << c.dump();
  // The record round-trips through import: `tests` is part of the format, not moved under meta.
  auto parsed = case_from_json(c);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->record["tests"].size(), 3u);
  EXPECT_FALSE(parsed->record["meta"].contains("tests"));
  // The audit lists one case.
  auto audit = run_spark({"audit", "--all", "--format", "json"}, dir.path());
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_EQ(json::parse(audit.out)["cases"].size(), 1u) << audit.out;
}

TEST(one_fault, a_bad_tests_field_is_refused_naming_the_line) {
  TempDir dir;
  json c = testing::sample_case("c1", "def test_a():\n    assert 1 == 2\n", 2);
  c["tests"] = json::array({"tests/test_x.py::test_a", 3});
  write_file(dir / "cases.jsonl", c.dump() + "\n");
  auto r = run_spark({"import", "cases.jsonl"}, dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cases.jsonl:1: tests[1] must be a non-empty string (a test id)"), std::string::npos) << r.err;
}

// Turns the store into what schema 4 made of shared_value_fault's history: three labelled failures keyed by their
// tests, three cases in the knowledge base, no `tests`.
void as_schema_4(const TempDir& dir) {
  {
    auto kb = KnowledgeBase::open(dir / ".spark", false);
    ASSERT_TRUE(kb);
    MiningStore store(**kb);
    auto dups = store.failures({FailureStatus::duplicate});
    ASSERT_TRUE(dups);
    ASSERT_EQ(dups->size(), 2u);
    for (const auto& d : *dups) {
      ASSERT_TRUE(d.labelled);
      ASSERT_TRUE((*kb)->import_cases({*d.labelled}, {}, false));
    }
    auto kept = store.failures({FailureStatus::labelled});
    ASSERT_TRUE(kept);
    ASSERT_EQ(kept->size(), 1u);
    Case alone = *(*kept)[0].labelled;
    alone.record.erase("tests");
    ASSERT_TRUE((*kb)->import_cases({alone}, {}, true));
  }
  testing::run_sql(dir / ".spark" / "kb.sqlite",
                   "UPDATE failures SET record = json_remove(record, '$.tests'), fault_key = 'old-' || test_id "
                   "WHERE record IS NOT NULL;"
                   "UPDATE failures SET status = 'labelled', duplicate_of = NULL WHERE status = 'duplicate';"
                   "PRAGMA user_version = 4;");
}

TEST(one_fault, a_schema_4_store_with_a_case_per_test_is_merged_when_opened) {
  TempDir dir;
  shared_value_fault(dir);
  ASSERT_NO_FATAL_FAILURE(as_schema_4(dir));
  const auto cases = exported(dir);  // any command upgrades the store first
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0]["tests"].size(), 3u) << cases[0].dump();
}

// The merge on upgrade is the miner's rule: the store alone upgrades the schema and leaves the cases as they were;
// open_knowledge_base (how the commands open a store) merges them in the upgrade.
TEST(open_knowledge_base, merges_the_failures_an_upgrade_made_one_fault) {
  TempDir dir;
  shared_value_fault(dir);
  ASSERT_NO_FATAL_FAILURE(as_schema_4(dir));
  TempDir copy;
  std::filesystem::copy(dir / ".spark", copy / ".spark", std::filesystem::copy_options::recursive);
  {
    auto plain = KnowledgeBase::open(copy / ".spark", false);
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ(*(*plain)->count(), 3u);
  }
  auto kb = open_knowledge_base(dir / ".spark", false);
  ASSERT_TRUE(kb) << kb.error().message;
  EXPECT_EQ(*(*kb)->count(), 1u);
  auto dups = MiningStore(**kb).failures({FailureStatus::duplicate});
  ASSERT_TRUE(dups);
  EXPECT_EQ(dups->size(), 2u);
}

// A fixture fault learnt once leads the answer when the same fixture line breaks again: conftest.py is part of the
// query, its fixtures the test asks for are the test's set-up, and the learnt case's line is annotated there.
TEST(one_fault, a_learnt_fixture_fault_leads_the_next_failure_of_that_fixture) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
  const std::string conftest =
      "import pytest\n\n\n@pytest.fixture\ndef prices():\n    return {'apple': 3, 'pear': 2}\n\n\n@pytest.fixture\n"
      "def colors():\n    return ['red']\n";
  const auto with_apple = [&](const std::string& apple) {
    std::string c = conftest;
    c.replace(c.find("'apple': 3"), 10, "'apple': " + apple);
    write_file(dir / "tests" / "conftest.py", c);
  };
  write_file(dir / "tests" / "conftest.py", conftest);
  write_file(dir / "tests" / "test_shop.py",
             "def test_apple(prices):\n    expected = 2\n    assert prices['apple'] == expected\n\n\n"
             "def test_total(prices):\n    names = sorted(prices)\n    assert sum(prices.values()) == 4\n");
  git(dir, "add -A");
  git(dir, "commit -m shop", "2026-02-01T00:00:00Z");
  const auto record = [&](const std::string& report, std::vector<std::string> args) {
    run_pytest({"--junitxml=" + report, "tests"}, dir.path());
    args.insert(args.begin(), {"record", "--junit", report});
    return run_spark(args, dir.path());
  };
  ASSERT_EQ(record("r1.xml", {"--no-localize"}).exit_code, 0);
  with_apple("2");
  git(dir, "commit -am fix", "2026-02-02T00:00:00Z");
  ASSERT_EQ(record("r2.xml", {"--no-localize"}).exit_code, 0);
  ASSERT_EQ(exported(dir).size(), 1u);
  // The same line breaks again.
  with_apple("5");
  git(dir, "commit -am again", "2026-02-03T00:00:00Z");
  auto again = record("r3.xml", {"--format", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const json all = json::parse(again.out);
  ASSERT_EQ(all.size(), 2u) << again.out;
  // With the prior weights (one labelled case): in the first three, above the test's failing statement; the other
  // fixture, which these tests do not ask for, is another test's and comes after it.
  for (const auto& r : all) {
    std::map<int, size_t> conftest_rank;
    for (size_t i = 0; i < r["ranked"].size(); ++i)
      if (r["ranked"][i]["path"] == "tests/conftest.py") conftest_rank[r["ranked"][i]["line"].get<int>()] = i;
    ASSERT_TRUE(conftest_rank.contains(6)) << r.dump(1);
    EXPECT_LT(conftest_rank[6], 3u) << r.dump(1);
    if (conftest_rank.contains(11)) {
      EXPECT_LT(conftest_rank[6], conftest_rank[11]) << r.dump(1);
    }
  }
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
