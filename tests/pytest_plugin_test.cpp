// integrations/pytest (pytest-spark) in real pytest sessions (Debian's pytest at its defaults) of real git
// repositories: the session's outcomes recorded, the ranked lines in a "spark" section, pytest's exit status kept
// whatever spark does.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::git;
using testing::RunResult;
using testing::TempDir;
using testing::write_file;

const std::string kPlugin = std::string(SPARK_SOURCE_DIR) + "/integrations/pytest";

// pytest with the plugin on PYTHONPATH (`-p pytest_spark`, as its README says) and $SPARK naming `binary`; `env`:
// more NAME=VALUE settings.
RunResult pytest_with_plugin(const TempDir& dir, std::vector<std::string> args,
                             const std::string& binary = SPARK_BINARY, const std::vector<std::string>& env = {}) {
  std::vector<std::string> all = {"PYTHONPATH=" + kPlugin, "SPARK=" + binary, "SPARK_KB="};
  all.insert(all.end(), env.begin(), env.end());
  for (const char* a : {"/usr/bin/python3", "-B", "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_spark"})
    all.emplace_back(a);
  all.insert(all.end(), args.begin(), args.end());
  return testing::run_program("/usr/bin/env", all, dir.path());
}

// A stand-in for spark that prints `json` on standard output and exits 0, whatever it is asked.
std::string fake_spark(const TempDir& dir, const std::string& json) {
  const auto path = dir / "fake-spark";
  write_file(path, "#!/bin/sh\ncat <<'EOF'\n" + json + "\nEOF\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path.string();
}

void project(const TempDir& dir, const std::string& expected) {
  git(dir, "init");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n*.xml\n");
  write_file(dir / "tests" / "test_a.py", "def test_add():\n    total = 2 + 2\n    assert total == " + expected +
                                              "\n\n\ndef test_ok():\n"
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

TEST(pytest_spark, a_bad_timeout_setting_is_one_warning_line_and_never_the_sessions_status) {
  TempDir dir;
  project(dir, "4");  // every test passes
  for (const std::string value : {"10s", "", "-5", "nan"}) {
    SCOPED_TRACE("SPARK_PYTEST_TIMEOUT=" + value);
    // Without --spark the plugin does nothing, whatever its settings.
    auto off = pytest_with_plugin(dir, {}, SPARK_BINARY, {"SPARK_PYTEST_TIMEOUT=" + value});
    EXPECT_EQ(off.exit_code, 0) << off.out << off.err;
    EXPECT_EQ(off.out.find("spark:"), std::string::npos) << off.out;
    EXPECT_EQ(off.out.find("= spark ="), std::string::npos) << off.out;
    // With it, the session is recorded with the default timeout; a value that is set and bad is said.
    auto on = pytest_with_plugin(dir, {"--spark"}, SPARK_BINARY, {"SPARK_PYTEST_TIMEOUT=" + value});
    EXPECT_EQ(on.exit_code, 0) << on.out << on.err;
    EXPECT_NE(on.out.find("spark: recorded "), std::string::npos) << on.out << on.err;
    const bool said = on.out.find("SPARK_PYTEST_TIMEOUT='" + value +
                                  "' is not a positive number of seconds: 600 used") != std::string::npos;
    EXPECT_EQ(said, !value.empty()) << on.out;
  }
  // A good value is taken: a spark slower than it is stopped, the session's status kept.
  write_file(dir / "slow-spark", "#!/bin/sh\nsleep 5\n");
  std::filesystem::permissions(dir / "slow-spark", std::filesystem::perms::owner_all);
  auto slow = pytest_with_plugin(dir, {"--spark"}, (dir / "slow-spark").string(), {"SPARK_PYTEST_TIMEOUT=0.5"});
  EXPECT_EQ(slow.exit_code, 0) << slow.out << slow.err;
  EXPECT_NE(slow.out.find("spark took over 0.5 s: stopped"), std::string::npos) << slow.out;
}

TEST(pytest_spark, json_of_another_shape_is_one_warning_line_and_never_the_sessions_status) {
  TempDir dir, bin;
  project(dir, "4");  // every test passes
  for (const std::string json : {"[1, 2]", "\"text\"", "{\"schema\": 3}", "[{\"test_id\": 7}]", "null", "[null]",
                                 "[{\"test_id\": \"t::a\", \"ranked\": [1, {\"rank\": [], \"path\": {}, "
                                 "\"reasons\": \"x\"}], \"retrieved\": {\"similarity\": 1}}]"}) {
    SCOPED_TRACE(json);
    auto r = pytest_with_plugin(dir, {"--spark"}, fake_spark(bin, json));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("INTERNALERROR"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("2 passed"), std::string::npos) << r.out;
  }
  auto bad = pytest_with_plugin(dir, {"--spark"}, fake_spark(bin, "[1, 2]"));
  EXPECT_NE(bad.out.find("spark: 2 entries of its JSON output are not a localization: not shown"), std::string::npos)
      << bad.out;
  // What can be read of an entry is shown; the rest of it stands in as "?".
  auto partial = pytest_with_plugin(
      dir, {"--spark"},
      fake_spark(bin,
                 "[{\"test_id\": \"t::a\", \"ranked\": [1, {\"rank\": [], \"path\": {}, \"line\": 3, "
                 "\"reasons\": [5, \"why\"]}]}]"));
  EXPECT_EQ(partial.exit_code, 0) << partial.out << partial.err;
  EXPECT_NE(partial.out.find("t::a  (no similar case learnt yet)"), std::string::npos) << partial.out;
  EXPECT_NE(partial.out.find("1. ?:3    (why)"), std::string::npos) << partial.out;
  // Triage fields of the wrong type: what can be read is shown, nothing else, never a traceback.
  auto triage = pytest_with_plugin(
      dir, {"--spark"},
      fake_spark(bin,
                 "[{\"test_id\": \"t::b\", \"ranked\": [], \"verdict\": {\"class\": \"test\", "
                 "\"probability\": \"high\", \"reasons\": [1, \"why\"]}, \"history\": {\"failing_runs\": "
                 "\"2\", \"first_failing_commit\": 5, \"flaky\": true}, \"suggestions\": [1, {\"preferred\": "
                 "true, \"change\": 3, \"line\": 2.5}, {\"preferred\": false}]}]"));
  EXPECT_EQ(triage.exit_code, 0) << triage.out << triage.err;
  EXPECT_EQ(triage.out.find("Traceback"), std::string::npos) << triage.out;
  EXPECT_NE(triage.out.find("  verdict: test: why\n"), std::string::npos) << triage.out;
  EXPECT_NE(
      triage.out.find("  history: no failing run recorded before this one; failed and passed at the same commit 0 "
                      "times: flaky"),
      std::string::npos)
      << triage.out;
  EXPECT_NE(triage.out.find("  suggested edit: ?:?  ? -> ?  (as case ?'s fix did; not applied)"), std::string::npos)
      << triage.out;
  // A failing session keeps its 1 the same way.
  project(dir, "5");
  auto failing = pytest_with_plugin(dir, {"--spark"}, fake_spark(bin, "[1, 2]"));
  EXPECT_EQ(failing.exit_code, 1) << failing.out << failing.err;
}

TEST(pytest_spark, claims_a_similar_case_only_where_spark_shows_one) {
  TempDir dir;
  project(dir, "5");
  ASSERT_EQ(pytest_with_plugin(dir, {"--spark"}).exit_code, 1);
  write_file(dir / "tests" / "test_a.py",
             "def test_add():\n    total = 2 + 2\n    assert total == 4\n\n\ndef test_ok():\n    assert 1 == 1\n");
  git(dir, "commit -am fix", "2026-01-02T00:00:00Z");
  auto fixed = pytest_with_plugin(dir, {"--spark"});
  ASSERT_NE(fixed.out.find("1 labelled into the knowledge base"), std::string::npos) << fixed.out;
  // The same line breaks again (another way: a failure never retrieves a case of its own exact code), and a test
  // about something else fails beside it.
  write_file(dir / "tests" / "test_a.py",
             "def test_add():\n    total = 2 + 2\n    assert total == 6\n\n\ndef test_ok():\n    assert 1 == 1\n");
  write_file(dir / "tests" / "test_far.py",
             "import json\n\n\ndef test_parse_payload():\n    payload = json.loads('{\"zeta\": [9, 8]}')\n"
             "    assert payload['zeta'][0] == 7\n");
  git(dir, "add -A");
  git(dir, "commit -m again", "2026-01-03T00:00:00Z");
  auto again = pytest_with_plugin(dir, {"--spark", "--spark-no-record", "--junitxml", "again.xml"});
  EXPECT_EQ(again.exit_code, 1) << again.out;
  EXPECT_NE(again.out.find("tests/test_a.py::test_add  (1 similar case(s) learnt before)"), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("tests/test_far.py::test_parse_payload  (no similar case learnt yet)"), std::string::npos)
      << again.out;
  // spark retrieved the case for the distant failure too (above the retrieval floor, 0.10), and says it does not show
  // it (the text report names it as the closest case, too far to show).
  auto far = testing::run_spark({"localize", "--junit", "again.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(far.exit_code, 0) << far.err;
  const auto all = nlohmann::json::parse(far.out);
  ASSERT_TRUE(all.is_array()) << far.out;
  nlohmann::json one;
  for (const auto& l : all)
    if (l.is_object() && l["test_id"] == "tests/test_far.py::test_parse_payload") one = l;
  ASSERT_TRUE(one.is_object()) << far.out;
  ASSERT_EQ(one["retrieved"].size(), 1u) << far.out;
  EXPECT_LT(one["retrieved"][0]["similarity"].get<double>(), 0.5) << far.out;
  EXPECT_EQ(one["retrieved"][0]["shown"], false) << far.out;
}

// What triage asks before "which line", as spark's own report gives it: a product rename fixed once in one test, the
// same rename breaking another test: its verdict, its history and the earlier fix's edit, suggested.
TEST(pytest_spark, shows_the_verdict_the_history_and_the_suggested_edit) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "shop.py", "class Order:\n    def __init__(self, prices):\n        self.total = sum(prices)\n");
  write_file(dir / "tests" / "test_o.py",
             "from shop import Order\n\n\ndef test_total():\n    assert Order([2, 3]).total_price == 5\n");
  git(dir, "add -A");
  git(dir, "commit -m a");
  auto first = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(first.exit_code, 1) << first.out << first.err;
  EXPECT_NE(first.out.find("  verdict: test (0."), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("  history: failing since "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("; never passed in the recorded runs"), std::string::npos) << first.out;
  EXPECT_EQ(first.out.find("suggested edit"), std::string::npos) << first.out;  // nothing learnt yet
  write_file(dir / "tests" / "test_o.py",
             "from shop import Order\n\n\ndef test_total():\n    assert Order([2, 3]).total == 5\n");
  git(dir, "commit -am fix", "2026-01-02T00:00:00Z");
  auto fixed = pytest_with_plugin(dir, {"--spark"});
  ASSERT_NE(fixed.out.find("1 labelled into the knowledge base"), std::string::npos) << fixed.out;
  write_file(dir / "tests" / "test_r.py",
             "from shop import Order\n\n\ndef test_refund():\n    refund = Order([1, 1])\n"
             "    assert refund.total_price == 2\n");
  git(dir, "add -A");
  git(dir, "commit -m refunds", "2026-01-03T00:00:00Z");
  auto again = pytest_with_plugin(dir, {"--spark"});
  EXPECT_EQ(again.exit_code, 1) << again.out;
  EXPECT_NE(again.out.find("tests/test_r.py::test_refund  (1 similar case(s) learnt before)\n  verdict: test (0."),
            std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("  suggested edit: tests/test_r.py:6  total_price -> total  (as case "), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("not applied)\n  1. tests/test_r.py:6  assert refund.total_price == 2"), std::string::npos)
      << again.out;
  // --spark-verify: the edit tried in spark's scratch work tree with this Python's pytest, and marked.
  auto verified = pytest_with_plugin(dir, {"--spark", "--spark-no-record", "--spark-verify"});
  EXPECT_EQ(verified.exit_code, 1) << verified.out;
  EXPECT_NE(verified.out.find("not applied) \u2014 verified: the test passes with this edit\n"), std::string::npos)
      << verified.out;
  EXPECT_EQ(testing::run_program("/usr/bin/git", {"status", "--porcelain"}, dir.path()).out, "") << "the work tree";
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
}  // namespace spark::SPARK_TEST_FILE_ID
