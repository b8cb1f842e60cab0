// A failing test as a query (localizer/queries.h), and the library steps the commands share: the files `spark record`
// reads for its queries come from the store's sync, equal to reading them from git again; `kb copy`'s tables are the
// schema's own.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/text.h"
#include "localizer/queries.h"
#include "miner/git_history.h"
#include "miner/miner.h"
#include "miner/mining_store.h"
#include "store/knowledge_base.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::TempDir;
using testing::write_file;

// A repository whose test fails at HEAD: its test file, a conftest.py with its fixture, a helper module it imports, a
// JavaScript helper (test code a Python query leaves out) and product code.
void failing_repository(const TempDir& dir) {
  testing::git(dir, "init -q");
  write_file(dir / "calc.py", "def add(a, b):\n    return a + b\n");
  write_file(dir / "tests/conftest.py", "import pytest\n\n@pytest.fixture\ndef two():\n    return 2\n");
  write_file(dir / "tests/helpers.py", "def expected():\n    return 5\n");
  write_file(dir / "tests/util.test.js", "test('x', () => {});\n");
  write_file(dir / "tests/test_calc.py",
             "from calc import add\nfrom tests.helpers import expected\n\n\ndef test_add(two):\n"
             "    assert add(two, 2) == expected()\n");
  testing::commit(dir, "one", 1);
}

std::vector<RecordedOutcome> failed_at(const std::string& sha) {
  RecordedOutcome o;
  o.commit = sha;
  o.test_id = "tests/test_calc.py::test_add";
  o.outcome = Outcome::failed;
  o.message = "tests/test_calc.py:6: in test_add\n    assert add(two, 2) == expected()\nE   assert 4 == 5\n";
  o.origin = "report.xml:3";
  RecordedOutcome passed = o;
  passed.test_id = "tests/test_calc.py::test_other";
  passed.outcome = Outcome::passed;
  passed.message.clear();
  return {passed, o};
}

std::vector<std::string> paths_of(const Case& q) {
  std::vector<std::string> out;
  for (const auto& f : q.files) out.push_back(f.path);
  return out;
}

TEST(recorded_queries, from_the_syncs_snapshot_equal_those_read_from_git_again) {
  TempDir dir;
  failing_repository(dir);
  auto repo = GitRepository::open(dir.path());
  ASSERT_TRUE(repo);
  const std::string sha = testing::head_sha(dir);
  const auto outcomes = failed_at(sha);
  auto kb = open_knowledge_base(dir / ".spark", true);
  ASSERT_TRUE(kb);
  SyncOptions options;
  options.snapshot = true;
  options.tip = sha;
  auto report = MiningStore(**kb).sync(**repo, outcomes, options);
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_EQ(report->snapshots.size(), 1u);
  EXPECT_EQ(report->snapshots[0].outcome, 1u);  // the failure's place among the outcomes
  EXPECT_EQ(report->snapshots[0].own, 1u);      // the test file; the rest is the test code it depends on

  std::vector<std::string> snap_notes, git_notes;
  const auto from_snapshot = recorded_queries(**repo, sha, outcomes, TestCodeRule(), report->snapshots, snap_notes);
  const auto from_git = recorded_queries(**repo, sha, outcomes, TestCodeRule(), {}, git_notes);
  ASSERT_EQ(from_snapshot.size(), 1u);
  ASSERT_EQ(from_git.size(), 1u);
  EXPECT_EQ(paths_of(from_snapshot[0]),
            (std::vector<std::string>{"tests/test_calc.py", "tests/conftest.py", "tests/helpers.py"}));
  EXPECT_EQ(paths_of(from_snapshot[0]), paths_of(from_git[0]));
  for (size_t i = 0; i < from_git[0].files.size(); ++i)
    EXPECT_EQ(from_snapshot[0].files[i].content, from_git[0].files[i].content) << from_git[0].files[i].path;
  EXPECT_EQ(from_snapshot[0].error_message, from_git[0].error_message);
  EXPECT_EQ(snap_notes, git_notes);
}

TEST(recorded_queries, a_failure_whose_test_file_is_not_in_the_commit_is_named_and_left_out) {
  TempDir dir;
  failing_repository(dir);
  auto repo = GitRepository::open(dir.path());
  ASSERT_TRUE(repo);
  auto outcomes = failed_at(testing::head_sha(dir));
  outcomes[1].test_id = "tests/test_gone.py::test_add";
  std::vector<std::string> notes;
  EXPECT_TRUE(recorded_queries(**repo, testing::head_sha(dir), outcomes, TestCodeRule(), {}, notes).empty());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("report.xml:3: tests/test_gone.py::test_add: its test file is not in commit"),
            std::string::npos)
      << notes[0];
}

TEST(query_from_test_files, pytest_output_with_two_failures_picks_the_test_files_and_says_so) {
  TempDir dir;
  write_file(dir / "test_a.py", "def test_one():\n    assert 1 == 2\n\n\ndef test_two():\n    assert 3 == 4\n");
  TestFileFailure failure;
  failure.test_files = {(dir / "test_a.py").string()};
  failure.error_name = "out.txt";
  failure.error_text =
      "=================================== FAILURES ===================================\n"
      "___________________________________ test_one ___________________________________\n"
      "test_a.py:2: in test_one\n    assert 1 == 2\nE   assert 1 == 2\n"
      "___________________________________ test_two ___________________________________\n"
      "test_a.py:6: in test_two\n    assert 3 == 4\nE   assert 3 == 4\n"
      "=========================== short test summary info ============================\n"
      "FAILED test_a.py::test_one - assert 1 == 2\nFAILED test_a.py::test_two - assert 3 == 4\n";
  failure.test_id = "test_a.py::test_two";
  failure.time = "2026-01-02T03:04:05Z";
  std::vector<std::string> notes;
  auto q = query_from_test_files(failure, notes);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->test_id, "test_a.py::test_two");
  EXPECT_NE(q->error_message.find("assert 3 == 4"), std::string::npos);
  EXPECT_EQ(q->error_message.find("assert 1 == 2"), std::string::npos);
  EXPECT_EQ(q->failure_time, "2026-01-02T03:04:05Z");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("out.txt: pytest's output holds 2 failures; localizing test_a.py::test_two"),
            std::string::npos)
      << notes[0];
  failure.time = "yesterday";
  EXPECT_FALSE(query_from_test_files(failure, notes));
}

TEST(copied_tables, are_the_schemas_tables_with_their_columns_and_keys) {
  const auto& tables = copied_tables();
  std::vector<std::string> names;
  for (const auto& t : tables) names.push_back(t.name);
  // Parents before children; the store's own settings are not copied.
  EXPECT_EQ(names, (std::vector<std::string>{"blobs", "cases", "case_files", "outcomes", "failures"}));
  const auto& cases = tables[1];
  EXPECT_EQ(cases.key, "rowid");
  EXPECT_EQ(cases.columns.front(), "rowid");
  EXPECT_TRUE(cases.integer.front());
  EXPECT_EQ(cases.columns.back(), "language");
  EXPECT_EQ(tables[2].key, "case_rowid, ord");
  EXPECT_EQ(tables[4].columns.size(), 19u);
  EXPECT_EQ(tables[4].columns.back(), "duplicate_of");
}

TEST(text, plural_and_duration_read_as_spark_says_them) {
  EXPECT_EQ(plural(1, "test"), "1 test");
  EXPECT_EQ(plural(2, "fix", "fixes"), "2 fixes");
  EXPECT_EQ(duration_text(42), "42s");
  EXPECT_EQ(duration_text(184), "3m04s");
  EXPECT_EQ(duration_text(3720), "1h02m");
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
