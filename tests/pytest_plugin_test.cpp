// integrations/pytest (pytest-spark) in real pytest sessions (Debian's pytest at its defaults) of real git
// repositories: the session's outcomes recorded, the ranked lines in a "spark" section, pytest's exit status kept
// whatever spark does.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace spark {
namespace {

using testing::git;
using testing::RunResult;
using testing::TempDir;
using testing::write_file;

const std::string kPlugin = std::string(SPARK_SOURCE_DIR) + "/integrations/pytest";

// pytest with the plugin on PYTHONPATH (`-p pytest_spark`, as its README says) and $SPARK naming `binary`.
RunResult pytest_with_plugin(const TempDir& dir, std::vector<std::string> args, const std::string& binary = SPARK_BINARY) {
  std::vector<std::string> all = {"PYTHONPATH=" + kPlugin, "SPARK=" + binary, "SPARK_KB=",
                                  "/usr/bin/python3", "-B", "-m", "pytest", "-p", "no:cacheprovider", "-p",
                                  "pytest_spark"};
  all.insert(all.end(), args.begin(), args.end());
  return testing::run_program("/usr/bin/env", all, dir.path());
}

void project(const TempDir& dir, const std::string& expected) {
  git(dir, "init");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n*.xml\n");
  write_file(dir / "tests" / "test_a.py",
             "def test_add():\n    total = 2 + 2\n    assert total == " + expected + "\n\n\ndef test_ok():\n"
             "    assert 1 == 1\n");
  git(dir, "add -A");
  git(dir, "commit -m a");
}

TEST(pytest_spark, records_the_session_shows_the_ranked_lines_and_keeps_pytests_exit_status) {
  TempDir dir;
  project(dir, "5");
  auto r = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // pytest's: a test failed
  EXPECT_NE(r.out.find("= spark ="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tests/test_a.py::test_add  (no similar case learnt yet)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1. tests/test_a.py:3  assert total == 5  (the test stopped here"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("spark: recorded 2 outcomes"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("generated xml file"), std::string::npos) << r.out;  // the report of its own is not announced
  auto open = testing::run_spark({"failures", "list"}, dir.path());
  EXPECT_NE(open.out.find("tests/test_a.py::test_add"), std::string::npos) << open.out << open.err;
  // The fix: the next session labels the failure into the knowledge base, as `spark record` does.
  write_file(dir / "tests" / "test_a.py",
             "def test_add():\n    total = 2 + 2\n    assert total == 4\n\n\ndef test_ok():\n    assert 1 == 1\n");
  git(dir, "commit -am fix", "2026-01-02T00:00:00Z");
  auto fixed = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out;
  EXPECT_NE(fixed.out.find("1 labelled into the knowledge base"), std::string::npos) << fixed.out;
  auto exported = testing::run_spark({"export"}, dir.path());
  EXPECT_NE(exported.out.find("\"test_id\":\"tests/test_a.py::test_add\""), std::string::npos) << exported.out;
}

TEST(pytest_spark, without_spark_the_flag_does_nothing) {
  TempDir dir;
  project(dir, "5");
  auto r = pytest_with_plugin(dir, {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out.find("= spark ="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("spark: "), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / ".spark"));
}

// A session in an edited work tree: its outcomes are not HEAD's. Nothing is recorded (before: the edit's failure was
// stored at HEAD with HEAD's line `== 4`, closed as flaky by HEAD's next session, and the test judged flaky after);
// the section ranks the line as the file has it, and says why nothing was recorded.
TEST(pytest_spark, a_session_in_an_edited_work_tree_is_ranked_as_the_files_are_and_not_recorded_as_heads) {
  TempDir dir;
  project(dir, "4");
  auto passed = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(passed.exit_code, 0) << passed.out;
  write_file(dir / "tests" / "test_a.py",
             "def test_add():\n    total = 2 + 2\n    assert total == 5\n\n\ndef test_ok():\n    assert 1 == 1\n");
  auto edited = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(edited.exit_code, 1) << edited.out;
  EXPECT_NE(edited.out.find("1. tests/test_a.py:3  assert total == 5"), std::string::npos) << edited.out;
  EXPECT_NE(edited.out.find("spark: recorded nothing: the work tree differs from HEAD"), std::string::npos)
      << edited.out;
  git(dir, "checkout -- tests/test_a.py");
  auto again = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(again.out.find("flaky"), std::string::npos) << again.out;
  auto open = testing::run_spark({"failures", "list"}, dir.path());
  EXPECT_NE(open.out.find("no open failures"), std::string::npos) << open.out << open.err;
}

TEST(pytest_spark, no_record_ranks_without_storing_and_a_given_junitxml_is_kept) {
  TempDir dir;
  project(dir, "5");
  auto r = pytest_with_plugin(dir, {"--spark", "--spark-no-record", "--spark-k", "2", "--junitxml", "mine.xml"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("1. tests/test_a.py:3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2. tests/test_a.py:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("3. tests/test_a.py:"), std::string::npos) << r.out;  // --spark-k 2
  EXPECT_NE(r.out.find("generated xml file: " + (dir / "mine.xml").string()), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "mine.xml"));
  EXPECT_FALSE(std::filesystem::exists(dir / ".spark" / "kb.sqlite"));
}

TEST(pytest_spark, spark_missing_or_failing_is_one_warning_line_and_never_the_sessions_status) {
  TempDir dir;
  project(dir, "4");  // every test passes
  auto missing = pytest_with_plugin(dir, {"--spark"}, "/nonexistent/spark");
  EXPECT_EQ(missing.exit_code, 0) << missing.out;
  EXPECT_NE(missing.out.find("spark not found ($SPARK or PATH): not recorded"), std::string::npos) << missing.out;
  // A knowledge base that is not one: spark's error, one line; the session still passes.
  std::filesystem::create_directories(dir / ".spark");
  write_file(dir / ".spark" / "kb.sqlite", std::string(4096, 'x'));
  auto broken = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(broken.exit_code, 0) << broken.out;
  EXPECT_NE(broken.out.find("spark: error:"), std::string::npos) << broken.out;
  EXPECT_EQ(broken.out.find("Traceback"), std::string::npos) << broken.out;
  EXPECT_EQ(broken.out.find("= spark ="), std::string::npos) << broken.out;
}

TEST(pytest_spark, an_interrupted_session_is_not_recorded) {
  TempDir dir;
  project(dir, "5");
  write_file(dir / "tests" / "test_b.py", "def test_stop():\n    raise KeyboardInterrupt\n");
  auto r = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(r.exit_code, 2) << r.out;  // pytest's "interrupted"
  EXPECT_NE(r.out.find("spark: the session did not finish (interrupted): not recorded"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / ".spark" / "kb.sqlite"));
}

TEST(pytest_spark, many_failures_are_cut_to_twenty_with_a_count_and_xdist_sums_up_once) {
  TempDir dir;
  project(dir, "5");
  write_file(dir / "tests" / "test_many.py",
             "import pytest\n\n\n@pytest.mark.parametrize('n', range(45))\ndef test_n(n):\n    assert n < 0\n");
  git(dir, "add -A");
  git(dir, "commit -m many", "2026-01-02T00:00:00Z");
  auto r = pytest_with_plugin(dir, {"--spark", "-n", "2"});
  ASSERT_EQ(r.err.find("unrecognized arguments: -n"), std::string::npos)
      << "pytest-xdist is missing (scripts/setup.sh --tests installs python3-pytest-xdist)";
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("... and 26 more failures: `spark failures list` lists them"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("opened 46 failures"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("= spark ="), r.out.rfind("= spark =")) << r.out;  // the controller's section only
}

TEST(pytest_spark, pip_installs_it_and_pytest_loads_it_by_its_entry_point) {
  TempDir dir, install;
  project(dir, "5");
  // From a copy: a build in the folder itself would leave build/ and *.egg-info there.
  std::filesystem::copy(kPlugin, install / "src", std::filesystem::copy_options::recursive);
  auto pip = testing::run_program("/usr/bin/python3",
                                  {"-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                                   "--target", (install / "site").string(), (install / "src").string()},
                                  install.path());
  ASSERT_EQ(pip.exit_code, 0) << pip.out << pip.err
                              << "(scripts/setup.sh --tests installs python3-pip and python3-setuptools)";
  auto r = testing::run_program("/usr/bin/env",
                                {"PYTHONPATH=" + (install / "site").string(), std::string("SPARK=") + SPARK_BINARY,
                                 "/usr/bin/python3", "-B", "-m", "pytest", "-p", "no:cacheprovider", "--spark"},
                                dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("1. tests/test_a.py:3  assert total == 5"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace spark
