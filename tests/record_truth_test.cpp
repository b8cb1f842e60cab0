// What `spark record` learns and says must be true, on real git repositories with real pytest at its defaults:
// outcomes of a work tree that differs from HEAD are not HEAD's; the verdict weighs what changed since the test last
// passed; the history, the open failures and a fault's occurrences count what they say; `spark record -r`,
// `spark localize --junit --test-id`, and what `spark hooks install` says it will do.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/case.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::git;
using testing::run_spark;
using testing::RunResult;
using testing::TempDir;
using testing::write_file;

using testing::day;

void repo(const TempDir& dir) {
  git(dir, "init");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
}

using testing::commit;

// pytest at its defaults over tests/, its JUnit report written to `report`.
void run_tests(const TempDir& dir, const std::string& report) {
  (void)testing::run_pytest({"-q", "--junitxml=" + report, "tests"}, dir.path());
  ASSERT_TRUE(std::filesystem::exists(dir / report)) << report;
}

RunResult record(const TempDir& dir, const std::string& report, std::vector<std::string> args = {}) {
  run_tests(dir, report);
  args.insert(args.begin(), {"record", "--junit", report});
  return run_spark(args, dir.path());
}

// The localization of `test_id` in a JSON report (an array), or null.
nlohmann::json localization_of(const std::string& out, const std::string& test_id) {
  const auto all = nlohmann::json::parse(out, nullptr, false);
  if (all.is_array())
    for (const auto& one : all)
      if (one.value("test_id", "") == test_id) return one;
  return nullptr;
}

const char* kSums = "def test_sum():\n    values = [1, 2, 3]\n    assert sum(values) == 6\n";

// A test edited in the work tree and failing there: its outcome is the work tree's, not HEAD's. Nothing is stored
// (before: the failure was stored at HEAD with HEAD's line, then closed as flaky by HEAD's next pass, and the test
// judged flaky (0.90) ever after); the failure is localized as the work tree has it, as `localize --junit` does.
TEST(spark_record_truth, outcomes_of_a_work_tree_that_differs_from_head_are_not_recorded_as_heads) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "test_sums.py", kSums);
  commit(dir, "sums", 1);
  auto passed = record(dir, "r1.xml");
  ASSERT_EQ(passed.exit_code, 0) << passed.err;
  // The work tree's edit: `== 5` fails where HEAD's `== 6` passes.
  std::string edited = kSums;
  edited.replace(edited.find("== 6"), 4, "== 5");
  write_file(dir / "tests" / "test_sums.py", edited);
  auto dirty = record(dir, "r2.xml", {"--format", "json"});
  ASSERT_EQ(dirty.exit_code, 0) << dirty.err;
  EXPECT_NE(dirty.err.find("spark: recorded nothing: the work tree differs from HEAD"), std::string::npos)
      << dirty.err;
  EXPECT_NE(dirty.err.find("(tests/test_sums.py)"), std::string::npos) << dirty.err;
  EXPECT_EQ(dirty.err.find("opened 1 failure"), std::string::npos) << dirty.err;
  const auto loc = localization_of(dirty.out, "tests/test_sums.py::test_sum");
  ASSERT_TRUE(loc.is_object()) << dirty.out;
  ASSERT_FALSE(loc["ranked"].empty());
  EXPECT_EQ(loc["ranked"][0]["line"], 3);
  EXPECT_NE(loc["ranked"][0]["code"].get<std::string>().find("== 5"), std::string::npos) << loc.dump();
  // Its verdict: the test's code changed since it passed at HEAD.
  EXPECT_EQ(loc["verdict"]["class"], "test") << loc.dump();
  EXPECT_NE(loc["verdict"]["reasons"][0].get<std::string>().find("its test code changed"), std::string::npos)
      << loc.dump();
  // localize --junit on the same report says the same line.
  auto localized = run_spark({"localize", "--junit", "r2.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(localized.exit_code, 0) << localized.err;
  EXPECT_EQ(localization_of(localized.out, "tests/test_sums.py::test_sum")["ranked"][0]["code"],
            loc["ranked"][0]["code"]);
  // Nothing is open, and HEAD's next pass closes nothing as flaky.
  auto open = run_spark({"failures", "list"}, dir.path());
  EXPECT_NE(open.out.find("no open failures"), std::string::npos) << open.out;
  git(dir, "checkout -- tests/test_sums.py");
  auto clean = record(dir, "r3.xml", {"--format", "json"});
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(clean.err.find("flaky"), std::string::npos) << clean.err;
  // The edit committed fails at its own commit: recorded there, and not flaky.
  write_file(dir / "tests" / "test_sums.py", edited);
  commit(dir, "edit", 2);
  auto committed = record(dir, "r4.xml", {"--format", "json"});
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_NE(committed.err.find("opened 1 failure"), std::string::npos) << committed.err;
  const auto at_commit = localization_of(committed.out, "tests/test_sums.py::test_sum");
  ASSERT_TRUE(at_commit.is_object()) << committed.out;
  EXPECT_EQ(at_commit["verdict"]["class"], "test") << at_commit.dump();
  EXPECT_FALSE(at_commit["history"]["flaky"].get<bool>()) << at_commit.dump();
  // --no-localize says the same, and stores nothing either.
  write_file(dir / "tests" / "test_sums.py", kSums);
  auto quiet = record(dir, "r5.xml", {"--no-localize"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_NE(quiet.err.find("recorded nothing: the work tree differs from HEAD"), std::string::npos) << quiet.err;
  EXPECT_EQ(quiet.err.find("labelled"), std::string::npos) << quiet.err;
}

// A new test file not committed yet: HEAD has no such test; its outcomes are the work tree's too.
TEST(spark_record_truth, a_test_file_head_does_not_have_makes_the_run_the_work_trees) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "test_sums.py", kSums);
  commit(dir, "sums", 1);
  write_file(dir / "tests" / "test_new.py", "def test_new():\n    assert 1 == 2\n");
  auto r = record(dir, "r1.xml", {"--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("recorded nothing: the work tree differs from HEAD"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tests/test_new.py"), std::string::npos) << r.err;
  EXPECT_TRUE(localization_of(r.out, "tests/test_new.py::test_new").is_object()) << r.out;
}

// What changed since the last pass decides between test and product: a product regression (only calc.py changed) is
// the product's, though the assertion that caught it is the test's; a test whose own file changed is the test's
// (before: both `test (0.73): raised in the test's own code`).
TEST(spark_record_truth, the_verdict_weighs_what_changed_since_the_last_pass) {
  TempDir dir;
  repo(dir);
  write_file(dir / "calc.py", "def total(xs):\n    return sum(xs)\n");
  write_file(dir / "tests" / "test_calc.py", "from calc import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n");
  write_file(dir / "tests" / "test_words.py", "def test_len():\n    assert len('abc') == 3\n");
  commit(dir, "start", 1);
  ASSERT_EQ(record(dir, "r1.xml").exit_code, 0);
  write_file(dir / "calc.py", "def total(xs):\n    return sum(xs) + 1\n");
  write_file(dir / "tests" / "test_words.py", "def test_len():\n    assert len('abc') == 4\n");
  commit(dir, "regress", 2);
  auto r = record(dir, "r2.xml", {"--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto product = localization_of(r.out, "tests/test_calc.py::test_total");
  ASSERT_TRUE(product.is_object()) << r.out;
  EXPECT_EQ(product["verdict"]["class"], "product") << product.dump();
  const std::string why = product["verdict"]["reasons"][0];
  EXPECT_NE(why.find("only code outside its test code changed"), std::string::npos) << why;
  EXPECT_NE(why.find("(calc.py, -2.0)"), std::string::npos) << why;
  const auto test = localization_of(r.out, "tests/test_words.py::test_len");
  ASSERT_TRUE(test.is_object()) << r.out;
  EXPECT_EQ(test["verdict"]["class"], "test") << test.dump();
  EXPECT_NE(test["verdict"]["reasons"][0].get<std::string>().find("its test code changed"), std::string::npos)
      << test.dump();
  EXPECT_NE(test["verdict"]["reasons"][0].get<std::string>().find("tests/test_words.py"), std::string::npos)
      << test.dump();
  // The text report says it on the verdict line.
  auto text = run_spark({"localize", "--junit", "r2.xml"}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("verdict: product (0.73): only code outside its test code changed"), std::string::npos)
      << text.out;
}

// Break → fix (learnt) → break again of a module's import: the module's tests passed at the fix, and its history
// says so (before: "2 failing runs … never passed in the recorded runs").
TEST(spark_record_truth, a_module_that_passed_at_its_fix_has_that_pass_in_its_history) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "calc_helpers.py", "def halve(x):\n    return x / 2\n");
  const std::string good = "from calc_helpers import halve\n\n\ndef test_halve():\n    assert halve(4) == 2\n";
  std::string broken = good;
  broken.replace(broken.find("import halve"), 12, "import half");
  write_file(dir / "tests" / "test_calc.py", broken);
  commit(dir, "broken", 1);
  ASSERT_EQ(record(dir, "r1.xml", {"--no-localize"}).exit_code, 0);
  write_file(dir / "tests" / "test_calc.py", good);
  commit(dir, "fix", 2);
  const std::string fix = testing::head_sha(dir);
  auto fixed = record(dir, "r2.xml", {"--no-localize"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.err.find("1 labelled into the knowledge base"), std::string::npos) << fixed.err;
  write_file(dir / "tests" / "test_calc.py", broken);
  commit(dir, "again", 3);
  auto again = record(dir, "r3.xml", {"--format", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto loc = localization_of(again.out, "tests/test_calc.py");
  ASSERT_TRUE(loc.is_object()) << again.out;
  EXPECT_EQ(loc["history"]["failing_runs"], 1) << loc.dump();
  EXPECT_EQ(loc["history"]["last_passed_commit"], fix) << loc.dump();
  EXPECT_EQ(loc["verdict"]["class"], "test") << loc.dump();
  auto text = run_spark({"localize", "--junit", "r3.xml"}, dir.path());
  EXPECT_NE(text.out.find("1 failing run, "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("; last passed at " + fix.substr(0, 10)), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("never passed"), std::string::npos) << text.out;
}

const char* kFixture = "import pytest\n\n\n@pytest.fixture\ndef base():\n    return 10\n";
const char* kThree =
    "def test_a(base):\n    assert base + 1 == 2\n\n\ndef test_b(base):\n    assert base * 2 == 2\n\n\n"
    "def test_c(base):\n    assert base - 0 == 1\n";

// One fixture breaks three tests at one commit, and they stay broken over a second commit: three tests are still open
// (six failures), and the fault learnt from the fixture's fix failed at two commits, not six.
TEST(spark_record_truth, open_failures_and_a_faults_commits_are_counted_as_tests_and_commits) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "conftest.py", kFixture);
  write_file(dir / "tests" / "test_three.py", kThree);
  commit(dir, "three", 1);
  auto first = record(dir, "r1.xml", {"--no-localize"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("; 3 tests still open (not fixed yet)"), std::string::npos) << first.err;
  write_file(dir / "NOTES", "x\n");
  commit(dir, "notes", 2);
  auto second = record(dir, "r2.xml", {"--no-localize"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("; 3 tests still open (6 failures at 2 commits; not fixed yet)"), std::string::npos)
      << second.err;
  std::string fixed = kFixture;
  fixed.replace(fixed.find("return 10"), 9, "return 1");
  write_file(dir / "tests" / "conftest.py", fixed);
  commit(dir, "fix", 3);
  auto labelled = record(dir, "r3.xml", {"--no-localize"});
  ASSERT_EQ(labelled.exit_code, 0) << labelled.err;
  EXPECT_NE(labelled.err.find("1 labelled into the knowledge base"), std::string::npos) << labelled.err;
  EXPECT_NE(labelled.err.find("; 0 tests still open (not fixed yet)"), std::string::npos) << labelled.err;
  auto list = run_spark({"audit", "--all", "--format", "json"}, dir.path());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto cases = nlohmann::json::parse(list.out)["cases"];
  ASSERT_EQ(cases.size(), 1u) << list.out;
  EXPECT_EQ(cases[0]["occurrences"]["count"], 2) << list.out;
  EXPECT_EQ(cases[0]["occurrences"]["commits"].size(), 2u) << list.out;
  auto text = run_spark({"audit", "--all"}, dir.path());
  EXPECT_NE(text.out.find("(failed at 2 commits)"), std::string::npos) << text.out;
  auto exported = nlohmann::json::parse(run_spark({"export"}, dir.path()).out);
  EXPECT_EQ(exported["tests"].size(), 3u) << exported.dump();
}

// A test failing at two commits until one fix: one case, both failures labelled from the same failing commit, so both
// carry its id. The case's own page (`audit show` of its id, or of a prefix) is the kept failure that `audit list`
// calls labelled, never the duplicate behind it, though the later commit's run was recorded first (before: the
// duplicate's page for the id, "names 2 mined cases" for a prefix).
TEST(spark_record_truth, a_learnt_cases_audit_page_shows_the_case_not_its_duplicate) {
  TempDir dir;
  repo(dir);
  std::string broken = kSums;
  broken.replace(broken.find("[1, 2, 3]"), 9, "[1, 2, 4]");
  write_file(dir / "tests" / "test_sums.py", broken);
  commit(dir, "broken", 1);
  const std::string first = testing::head_sha(dir);
  run_tests(dir, "r1.xml");
  write_file(dir / "NOTES", "x\n");
  commit(dir, "notes", 2);
  ASSERT_EQ(record(dir, "r2.xml", {"--no-localize"}).exit_code, 0);
  ASSERT_EQ(run_spark({"record", "--junit", "r1.xml", "--commit", first, "--no-localize"}, dir.path()).exit_code, 0);
  write_file(dir / "tests" / "test_sums.py", kSums);
  commit(dir, "fix", 3);
  auto fixed = record(dir, "r3.xml", {"--no-localize"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.err.find("1 labelled into the knowledge base, 1 the same fault"), std::string::npos) << fixed.err;
  auto list = run_spark({"audit", "--all", "--format", "json"}, dir.path());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto cases = nlohmann::json::parse(list.out)["cases"];
  ASSERT_EQ(cases.size(), 1u) << list.out;
  const std::string id = cases[0]["id"];
  EXPECT_EQ(cases[0]["status"], "labelled");
  for (const std::string& asked : {id, id.substr(0, id.size() - 4)}) {
    auto show = run_spark({"audit", "show", asked, "--color", "never"}, dir.path());
    ASSERT_EQ(show.exit_code, 0) << show.err;
    EXPECT_EQ(show.out.rfind(id + "  labelled\n", 0), 0u) << show.out;
    EXPECT_NE(show.out.find("failing:  " + cases[0]["faulty_commit"].get<std::string>()), std::string::npos)
        << show.out;
  }
}

// `spark record -r N` retrieves N similar cases, as `spark localize -r N` does.
TEST(spark_record_truth, record_takes_r_as_localize_does) {
  TempDir dir;
  repo(dir);
  std::string broken = kSums;
  broken.replace(broken.find("[1, 2, 3]"), 9, "[1, 2, 4]");
  write_file(dir / "tests" / "test_sums.py", broken);
  write_file(dir / "tests" / "test_more.py", "def test_more():\n    values = [2, 2]\n    assert sum(values) == 4\n");
  commit(dir, "broken", 1);
  ASSERT_EQ(record(dir, "r1.xml", {"--no-localize"}).exit_code, 0);
  write_file(dir / "tests" / "test_sums.py", kSums);
  commit(dir, "fix", 2);
  ASSERT_EQ(record(dir, "r2.xml", {"--no-localize"}).exit_code, 0);
  std::string more = "def test_more():\n    values = [2, 3]\n    assert sum(values) == 4\n";
  write_file(dir / "tests" / "test_more.py", more);
  commit(dir, "more", 3);
  ASSERT_EQ(record(dir, "r3.xml", {"--no-localize"}).exit_code, 0);
  write_file(dir / "tests" / "test_more.py", "def test_more():\n    values = [2, 2]\n    assert sum(values) == 4\n");
  commit(dir, "fix-more", 4);
  ASSERT_EQ(record(dir, "r4.xml", {"--no-localize"}).exit_code, 0);
  broken = kSums;
  broken.replace(broken.find("[1, 2, 3]"), 9, "[1, 2, 5]");
  write_file(dir / "tests" / "test_sums.py", broken);
  commit(dir, "again", 5);
  run_tests(dir, "r5.xml");
  for (const auto& [r, retrieved] : {std::pair{"1", 1u}, std::pair{"2", 2u}}) {
    auto rec = run_spark({"record", "--junit", "r5.xml", "--format", "json", "-r", r}, dir.path());
    ASSERT_EQ(rec.exit_code, 0) << rec.err;
    EXPECT_EQ(localization_of(rec.out, "tests/test_sums.py::test_sum")["retrieved"].size(), retrieved) << rec.out;
  }
  EXPECT_EQ(run_spark({"record", "--junit", "r5.xml", "-r", "0"}, dir.path()).exit_code, 2);
}

// `localize --junit --test-id X`: X's failure only; an error naming the report when it has no such failure.
TEST(spark_record_truth, localize_junit_with_a_test_id_localizes_that_test_or_says_why_not) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "test_two.py",
             "def test_a():\n    assert 1 == 2\n\n\ndef test_b():\n    assert 2 == 3\n\n\ndef test_ok():\n    assert 1\n");
  commit(dir, "two", 1);
  run_tests(dir, "r.xml");
  auto one = run_spark({"localize", "--junit", "r.xml", "--test-id", "tests/test_two.py::test_b", "--format", "json"},
                       dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto loc = nlohmann::json::parse(one.out);
  ASSERT_EQ(loc.size(), 1u) << one.out;
  EXPECT_EQ(loc[0]["test_id"], "tests/test_two.py::test_b");
  auto absent = run_spark({"localize", "--junit", "r.xml", "--test-id", "tests/test_two.py::test_z"}, dir.path());
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("r.xml: no test \"tests/test_two.py::test_z\" in the report (its failures: "
                            "tests/test_two.py::test_a, tests/test_two.py::test_b)"),
            std::string::npos)
      << absent.err;
  auto passed = run_spark({"localize", "--junit", "r.xml", "--test-id", "tests/test_two.py::test_ok"}, dir.path());
  EXPECT_EQ(passed.exit_code, 1);
  EXPECT_NE(passed.err.find("tests/test_two.py::test_ok passed there: nothing to localize"), std::string::npos)
      << passed.err;
}

// A failing `pytest.param(...)` row whose values the error does not repeat: it ranks right after the lines the
// traceback names, above the rest of its parametrize decorator (before: tied with the decorator's head, argnames and
// brackets, and below them, 6th).
TEST(spark_record_truth, a_failing_param_row_outranks_its_decorators_head_and_brackets) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "test_rows.py",
             "import pytest\n\n\ndef check(fmt, value):\n    if fmt.endswith(\"x}\"):\n"
             "        raise ValueError(\"unsupported format\")\n    return fmt.format(value)\n\n\n"
             "@pytest.mark.parametrize(\n    \"fmt, value, expected\",\n    [\n        (\"{}\", 1, \"1\"),\n"
             "        (\"{:d}\", 2, \"2\"),\n        pytest.param(\"{:x}\", 255, \"ff\", id=\"hex\"),\n"
             "        (\"{:>3}\", 7, \"  7\"),\n    ],\n)\ndef test_format(fmt, value, expected):\n"
             "    assert check(fmt, value) == expected\n");
  commit(dir, "rows", 1);
  auto r = record(dir, "r.xml", {"--format", "json", "-k", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto loc = localization_of(r.out, "tests/test_rows.py::test_format[hex]");
  ASSERT_TRUE(loc.is_object()) << r.out;
  std::map<int, size_t> rank;
  for (size_t i = 0; i < loc["ranked"].size(); ++i) rank[loc["ranked"][i]["line"].get<int>()] = i + 1;
  ASSERT_TRUE(rank.contains(15)) << loc.dump();
  EXPECT_EQ(rank[15], 3u) << loc.dump();  // after the raise (6) and the assertion (20)
  for (int frame : {10, 11, 12, 17, 18})
    if (rank.contains(frame)) {
      EXPECT_GT(rank[frame], rank[15]) << "line " << frame << ": " << loc.dump();
    }
}

// `spark hooks install` says what the hook will do after each commit, and what it will not without a test command.
TEST(spark_record_truth, hooks_install_says_what_the_hook_will_and_will_not_do) {
  TempDir dir;
  repo(dir);
  write_file(dir / "tests" / "test_sums.py", kSums);
  commit(dir, "sums", 1);
  auto bare = run_spark({"hooks", "install"}, dir.path());
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_NE(bare.err.find("record.test_command is not set: after each commit the hook only counts the tests with open "
                          "failures; it re-runs and records nothing"),
            std::string::npos)
      << bare.err;
  write_file(dir / ".spark.toml", "[record]\ntest_command = \"python3 -m pytest --junitxml={junit} {tests}\"\n");
  auto untrusted = run_spark({"hooks", "install"}, dir.path());
  EXPECT_NE(untrusted.err.find("record.test_command is not set"), std::string::npos) << untrusted.err;
  EXPECT_NE(untrusted.err.find("not used: record.test_command ("), std::string::npos) << untrusted.err;
  ASSERT_EQ(run_spark({"trust"}, dir.path()).exit_code, 0);
  auto set = run_spark({"hooks", "install"}, dir.path());
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.err.find("after each commit the hook re-runs the tests with open failures (python3 -m pytest "
                         "--junitxml={junit} {tests}) and records their outcomes"),
            std::string::npos)
      << set.err;
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
