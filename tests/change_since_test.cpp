// The change since a test last passed, as ranking evidence (miner/change_since.h), on real git repositories with real
// pytest at its defaults: `spark mine --discover` searches back for each fix's last pass and the commit that broke
// it and the case carries what changed between; `spark record` and `spark localize --since` give a failure the same
// evidence, a test edit that breaks a test on one side and a product rename on the other, with their reasons.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/case.h"
#include "miner/change_since.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using testing::commit;
using testing::git;
using testing::head_sha;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;
const auto replace_in = testing::replace_in_file;

const char* kCalc = "def total(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return total(xs) / len(xs)\n";
const char* kTests =
    "import calc\n\n\n"
    "def test_total():\n"       // 4
    "    values = [1, 2, 3]\n"  // 5
    "    extra = [4, 5]\n"      // 6
    "    values = values + extra\n"
    "    assert len(values) == 5\n"
    "    assert calc.total(values) == 15\n"  // 9
    "\n\n"
    "def test_mean():\n"  // 12
    "    values = [2, 4, 6]\n"
    "    assert calc.mean(values) == 4\n";

void project(const TempDir& dir) {
  git(dir, "init -q");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
  write_file(dir / "calc.py", kCalc);
  write_file(dir / "tests" / "test_calc.py", kTests);
  write_file(dir / "tests" / "conftest.py",
             "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))\n");
}

// pytest at its defaults, its JUnit report recorded.
testing::RunResult record(const TempDir& dir, const std::string& report) {
  (void)testing::run_pytest({"--junitxml=" + report, "tests"}, dir.path());
  EXPECT_TRUE(fs::exists(dir / report)) << report;
  return run_spark({"record", "--junit", report, "--format", "json"}, dir.path());
}

// The project committed and its tests passed once, recorded: the commit.
std::string passed_once(const TempDir& dir) {
  project(dir);
  commit(dir, "start", 1);
  auto passed = record(dir, "r1.xml");
  EXPECT_EQ(passed.exit_code, 0) << passed.err;
  return head_sha(dir);
}

// The reasons of the ranked line `line` of test `test_id` in a JSON report, joined; "" when it is not ranked.
std::string reasons_of(const std::string& out, const std::string& test_id, int line) {
  const auto all = nlohmann::json::parse(out, nullptr, false);
  if (!all.is_array()) return "";
  for (const auto& one : all)
    if (one.value("test_id", "") == test_id)
      for (const auto& r : one["ranked"])
        if (r.value("line", 0) == line) {
          std::string joined;
          for (const auto& why : r["reasons"]) joined += why.get<std::string>() + "\n";
          return joined;
        }
  return "";
}

TEST(spark_change_since, discover_finds_each_fixs_last_pass_and_break_and_the_case_carries_the_change) {
  TempDir dir;
  project(dir);
  commit(dir, "start", 1);
  const std::string start = head_sha(dir);
  write_file(dir / "calc.py", std::string(kCalc) + "\n\ndef sub(a, b):\n    return a - b\n");
  commit(dir, "product: sub", 2);
  const std::string last_pass = head_sha(dir);
  replace_in(dir / "tests" / "test_calc.py", "extra = [4, 5]", "extra = [4, 6]");
  commit(dir, "test: other data", 3);
  const std::string breaking = head_sha(dir);
  write_file(dir / "README", "calc\n");
  commit(dir, "docs", 4);
  write_file(dir / "NOTES", "notes\n");
  commit(dir, "notes", 5);
  const std::string parent_of_fix = head_sha(dir);
  replace_in(dir / "tests" / "test_calc.py", "extra = [4, 6]", "extra = [4, 5]");
  commit(dir, "fix the data", 6);
  const std::string fix = head_sha(dir);

  auto r = run_spark({"mine", "--discover", "--run", "/usr/bin/python3 -B -m pytest {test_id}", "-o", "found.jsonl"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // From the fix's parent (5) back: 4 and 3 fail, 1 passes; the bisection reads 2 (passed: 3's own candidate run
  // there is reused): 2 is the last pass, 3 the break.
  EXPECT_NE(r.err.find("the last pass before each fix's failure (3 runs): found for 1 of 1"), std::string::npos)
      << r.err;
  auto found = read_cases_jsonl(dir / "found.jsonl");
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->cases.size(), 1u) << r.err;
  const Case& c = found->cases[0];
  EXPECT_EQ(c.fixed_commit.value_or(""), fix);
  ASSERT_TRUE(c.change.has_value());
  EXPECT_EQ(c.change->last_pass, last_pass);
  EXPECT_NE(c.change->last_pass, start);
  EXPECT_EQ(c.change->break_commit, breaking);
  ASSERT_EQ(c.change->lines.size(), 1u);
  EXPECT_EQ(c.change->lines[0].at, (LineRef{"tests/test_calc.py", 6}));
  EXPECT_EQ(c.change->lines[0].commit, breaking);
  EXPECT_TRUE(c.change->product.empty()) << "nothing of the product changed between the pass and the break";
  // The record keeps the keys as docs/FORMATS.md writes them.
  EXPECT_EQ(c.record.value("last_pass_commit", ""), last_pass);
  EXPECT_EQ(c.record.value("break_commit", ""), breaking);
  EXPECT_FALSE(c.record.contains("meta")) << c.record.dump();

  // Without the search: the outcomes the candidates' runs stored still know a pass (at 2, 3's parent), but the first
  // failure they know after it is the fix's parent: the same lines changed, the break not found.
  TempDir again;
  git(again, "clone -q " + dir.path().string() + " .");
  auto off = run_spark({"mine", "--discover", "--run", "/usr/bin/python3 -B -m pytest {test_id}", "--break-search",
                        "0", "-o", "found.jsonl"},
                       again.path());
  ASSERT_EQ(off.exit_code, 0) << off.err;
  auto plain = read_cases_jsonl(again / "found.jsonl");
  ASSERT_TRUE(plain) << plain.error().message;
  ASSERT_EQ(plain->cases.size(), 1u);
  ASSERT_TRUE(plain->cases[0].change.has_value());
  EXPECT_EQ(plain->cases[0].change->last_pass, last_pass);
  EXPECT_EQ(plain->cases[0].change->break_commit, parent_of_fix);
  EXPECT_EQ(plain->cases[0].change->lines.size(), 1u);
  EXPECT_EQ(off.err.find("the last pass before"), std::string::npos) << off.err;
}

// A store whose case was labelled before its last pass was known (a discovery without the search, or by an older
// spark): the next discovery's search finds the pass, and the stored case gains what changed since.
TEST(spark_change_since, an_earlier_case_gains_the_change_when_a_later_discovery_finds_its_last_pass) {
  TempDir dir;
  project(dir);
  commit(dir, "start", 1);
  const std::string start = head_sha(dir);
  replace_in(dir / "calc.py", "    return sum(xs)\n", "    return sum(xs) + 1\n");
  commit(dir, "product: total counts one more", 2);
  const std::string product = head_sha(dir);
  replace_in(dir / "tests" / "test_calc.py", "calc.total(values) == 15", "calc.total(values) == 16");
  commit(dir, "test: the new total", 3);
  const std::string run = "/usr/bin/python3 -B -m pytest {test_id}";
  auto first = run_spark({"mine", "--discover", "--run", run, "--break-search", "0", "-o", "first.jsonl"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto before = read_cases_jsonl(dir / "first.jsonl");
  ASSERT_TRUE(before) << before.error().message;
  ASSERT_EQ(before->cases.size(), 1u) << first.err;
  EXPECT_FALSE(before->cases[0].change.has_value()) << "no run knew a pass of test_total";

  auto again = run_spark({"mine", "--discover", "--run", run}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("found for 1 of 1"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("discover: 1 case labelled before gained what changed since the last pass"),
            std::string::npos)
      << again.err;
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto after = case_from_json(nlohmann::json::parse(exported.out.substr(0, exported.out.find('\n'))));
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->id, before->cases[0].id);
  EXPECT_EQ(after->faulty_lines, before->cases[0].faulty_lines);
  ASSERT_TRUE(after->change.has_value()) << exported.out;
  EXPECT_EQ(after->change->last_pass, start);
  EXPECT_EQ(after->change->break_commit, product);
  EXPECT_TRUE(after->change->lines.empty());
  ASSERT_FALSE(after->change->product.empty());
  EXPECT_EQ(after->change->product[0].token, "total") << "the function whose body the product changed";
  EXPECT_EQ(after->change->product[0].commit, product);
  // A third discovery changes nothing more.
  auto third = run_spark({"mine", "--discover", "--run", run}, dir.path());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.err.find("gained what changed"), std::string::npos) << third.err;
}

TEST(spark_change_since, record_ranks_a_test_edit_and_a_product_rename_with_their_reasons) {
  TempDir dir;
  const std::string c1 = passed_once(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());

  // Test side: a set-up line of test_total edited; the assertion below it fails.
  replace_in(dir / "tests" / "test_calc.py", "extra = [4, 5]", "extra = [4, 6]");
  commit(dir, "test: other data", 2);
  const std::string c2 = head_sha(dir);
  auto broken = record(dir, "r2.xml");
  ASSERT_EQ(broken.exit_code, 0) << broken.err;
  const std::string edited = reasons_of(broken.out, "tests/test_calc.py::test_total", 6);
  EXPECT_NE(edited.find("changed in " + c2.substr(0, 10) + " since the test last passed at " + c1.substr(0, 10)),
            std::string::npos)
      << broken.out;
  // Lines the edit did not touch say nothing of it.
  EXPECT_EQ(reasons_of(broken.out, "tests/test_calc.py::test_total", 5).find("since the test last passed"),
            std::string::npos);
  // The verdict reads the same evidence: a line the test runs changed.
  const auto broken_report = nlohmann::json::parse(broken.out, nullptr, false);
  ASSERT_TRUE(broken_report.is_array()) << broken.out;
  EXPECT_NE(broken_report[0]["verdict"].dump().find(
                "its test code changed between its last pass at " + c1.substr(0, 10) + " and its failure at " +
                c2.substr(0, 10) + ", lines it runs (tests/test_calc.py:6 in " + c2.substr(0, 10) + ", +1.5)"),
            std::string::npos)
      << broken_report[0]["verdict"].dump();
  EXPECT_EQ(broken_report[0]["change"]["changed_lines"],
            nlohmann::json::parse(R"([{"path": "tests/test_calc.py", "line": 6, "commit": ")" + c2 + R"("}])"));

  // The same failure through `localize --since`, from the test's folder; an unknown commit is an error.
  TempDir outside;  // the failure's text, out of the repository's commits
  const auto error_file = outside / "failure.txt";
  write_file(error_file, nlohmann::json::parse(broken.out)[0].value("error_message", "") + "\n");
  auto since = run_spark({"localize", "--test", "test_calc.py", "--test-id", "tests/test_calc.py::test_total",
                          "--error", error_file.string(), "--since", c1, "--format", "json"},
                         dir / "tests");
  ASSERT_EQ(since.exit_code, 0) << since.err;
  const auto loc = nlohmann::json::parse(since.out, nullptr, false);
  ASSERT_TRUE(loc.is_object()) << since.out;
  bool said = false;
  for (const auto& r : loc["ranked"])
    for (const auto& why : r["reasons"])
      said = said || (r.value("line", 0) == 6 && why.get<std::string>().find("changed in " + c2.substr(0, 10)) !=
                                                     std::string::npos);
  EXPECT_TRUE(said) << since.out;
  auto unknown = run_spark({"localize", "--test", "tests/test_calc.py", "--error", error_file.string(), "--since",
                            "no-such-commit"},
                           dir.path());
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
  EXPECT_NE(unknown.err.find("--since no-such-commit"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("no commit \"no-such-commit\""), std::string::npos) << unknown.err;
  // A --test path written "./tests/…" from the top names the same file: only the edited line changed since.
  auto dotted = run_spark({"localize", "--test", "./tests/test_calc.py", "--test-id", "tests/test_calc.py::test_total",
                           "--error", error_file.string(), "--since", c1, "--format", "json"},
                          dir.path());
  ASSERT_EQ(dotted.exit_code, 0) << dotted.err;
  size_t changed_lines = 0;
  const auto dotted_report = nlohmann::json::parse(dotted.out);
  for (const auto& r : dotted_report["ranked"])
    for (const auto& why : r["reasons"])
      if (why.get<std::string>().find("since the test last passed") != std::string::npos) {
        ++changed_lines;
        EXPECT_EQ(r.value("line", 0), 6) << dotted.out;
      }
  EXPECT_EQ(changed_lines, 1u) << dotted.out;
  // A "last pass" on another branch is no last pass of this failure.
  git(dir, "checkout -q -b side " + c1);
  write_file(dir / "side.txt", "side\n");
  commit(dir, "a side branch", 9);
  const std::string side = head_sha(dir);
  git(dir, "checkout -q -");
  auto off_line = run_spark(
      {"localize", "--test", "tests/test_calc.py", "--error", error_file.string(), "--since", side}, dir.path());
  EXPECT_EQ(off_line.exit_code, 1) << off_line.err;
  EXPECT_NE(off_line.err.find("is not an ancestor of the failing commit"), std::string::npos) << off_line.err;

  // Product side: the test fixed, then the product renames total(); test_total still calls it.
  replace_in(dir / "tests" / "test_calc.py", "extra = [4, 6]", "extra = [4, 5]");
  commit(dir, "fix the data", 3);
  const std::string c3 = head_sha(dir);
  auto fixed = record(dir, "r3.xml");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  write_file(dir / "calc.py",
             "def sum_values(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return sum_values(xs) / len(xs)\n");
  commit(dir, "product: rename total", 4);
  const std::string c4 = head_sha(dir);
  auto renamed = record(dir, "r4.xml");
  ASSERT_EQ(renamed.exit_code, 0) << renamed.err;
  const std::string uses = reasons_of(renamed.out, "tests/test_calc.py::test_total", 9);
  EXPECT_NE(uses.find("uses total, which " + c4.substr(0, 10) + " changed in calc.py since the test last passed at " +
                      c3.substr(0, 10)),
            std::string::npos)
      << renamed.out;
  // The labelled case of the first fault knows its last pass and what changed since.
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const auto mined = nlohmann::json::parse(exported.out.substr(0, exported.out.find('\n')));
  EXPECT_EQ(mined.value("last_pass_commit", ""), c1);
  EXPECT_EQ(mined.value("break_commit", ""), c2);
  EXPECT_EQ(mined["change"]["lines"],
            nlohmann::json::parse(R"([{"path": "tests/test_calc.py", "line": 6, "commit": ")" + c2 + R"("}])"));
}

// Another test's lines in the failing test's file changed, and the product renamed what the failing test calls: its
// file changed, but not the lines it runs, so the verdict weighs the product's change, naming the line that uses it.
TEST(spark_change_since, a_change_of_another_tests_lines_is_not_the_failing_tests_change) {
  TempDir dir;
  const std::string c1 = passed_once(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  replace_in(dir / "tests" / "test_calc.py", "values = [2, 4, 6]", "values = [3, 4, 5]");  // test_mean, still 4
  write_file(dir / "calc.py",
             "def sum_values(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return sum_values(xs) / len(xs)\n");
  commit(dir, "rename total; other data for test_mean", 2);
  const std::string c2 = head_sha(dir);
  auto renamed = record(dir, "r2.xml");
  ASSERT_EQ(renamed.exit_code, 0) << renamed.err;
  const auto report = nlohmann::json::parse(renamed.out, nullptr, false);
  ASSERT_TRUE(report.is_array() && report.size() == 1u) << renamed.out;
  const auto& change = report[0]["change"];
  EXPECT_EQ(change.value("last_pass_commit", ""), c1) << change.dump();
  EXPECT_EQ(change.value("break_commit", ""), c2) << change.dump();
  EXPECT_TRUE(change["changed_lines"].empty()) << change.dump();
  EXPECT_EQ(change.value("changed_lines_elsewhere", 0), 1) << change.dump();
  ASSERT_EQ(change["uses_product_change"].size(), 1u) << change.dump();
  EXPECT_EQ(change["uses_product_change"][0].value("line", 0), 9) << change.dump();
  EXPECT_EQ(change["uses_product_change"][0].value("name", ""), "total") << change.dump();
  const std::string verdict = report[0]["verdict"].dump();
  EXPECT_EQ(verdict.find("+1.5"), std::string::npos) << verdict;  // not "its test code changed"
  EXPECT_NE(verdict.find("only code outside its test code changed between its last pass at " + c1.substr(0, 10) +
                         " and its failure at " + c2.substr(0, 10) +
                         " (calc.py, -2.0); other tests' lines of its files changed too; the lines it runs use what "
                         "changed: total (line 9)"),
            std::string::npos)
      << verdict;
  // The text answer says the change once.
  auto text = run_spark({"localize", "--junit", "r2.xml"}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("  change: since the last pass at " + c1.substr(0, 10) + " (first failing at " +
                          c2.substr(0, 10) + "): 0 lines it runs changed, 1 of other tests; "),
            std::string::npos)
      << text.out;
}

TEST(spark_change_since, a_change_of_every_line_the_test_reaches_points_at_none_of_them) {
  TempDir dir;
  passed_once(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  // A reformat: every non-blank line of the test's files gets a comment, and test_total's data breaks with it. The
  // change covers all the test reaches, so it says nothing of any one line (weigh_change_by_specificity).
  for (const auto* file : {"test_calc.py", "conftest.py"}) {
    const fs::path path = dir / "tests" / file;
    std::string text = testing::slurp(path), out;
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end - start);
      out += line + (line.find_first_not_of(' ') == std::string::npos ? "" : "  # reformatted") + "\n";
      start = end + 1;
    }
    write_file(path, out);
  }
  replace_in(dir / "tests" / "test_calc.py", "extra = [4, 5]", "extra = [4, 6]");
  commit(dir, "reformat the tests", 2);
  auto broken = record(dir, "r2.xml");
  ASSERT_EQ(broken.exit_code, 0) << broken.err;
  ASSERT_NE(reasons_of(broken.out, "tests/test_calc.py::test_total", 9), "") << broken.out;
  for (int line = 1; line <= 14; ++line)
    EXPECT_EQ(reasons_of(broken.out, "tests/test_calc.py::test_total", line).find("since the test last passed"),
              std::string::npos)
        << line << "\n"
        << broken.out;
}

TEST(change_since, product_tokens_are_the_changed_definitions_the_names_removed_and_the_old_literals) {
  const auto tokens = product_tokens(
      "LIMIT = 10\n\n\ndef total(xs, start=0):\n    return sum(xs, start)\n\n\ndef label():\n    return 'old text'\n",
      "LIMIT = 10\n\n\ndef sum_values(xs, start=1):\n    return sum(xs, start)\n\n\ndef label():\n"
      "    return 'new text'\n",
      "calc.py", "abc");
  std::vector<std::string> names, literals;
  for (const auto& t : tokens) {
    (t.literal ? literals : names).push_back(t.token);
    EXPECT_EQ(t.path, "calc.py");
    EXPECT_EQ(t.commit, "abc");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"total", "sum_values", "label"}));  // label: its body changed
  EXPECT_EQ(literals, (std::vector<std::string>{"'old text'"}));
}

TEST(change_since, a_case_checks_its_change_against_its_files) {
  const auto with = [](const std::string& extra) {
    auto record = nlohmann::json::parse(
        R"({"id": "c", "project": "p", "test_id": "t.py::test_a", "language": "python",
            "failure_time": "2026-01-01T00:00:00Z", "error_message": "E", "files": [{"path": "t.py",
            "content": "def test_a():\n    assert 1 == 2\n"}]})");
    record.update(nlohmann::json::parse(extra));
    return case_from_json(record);
  };
  auto good = with(R"({"last_pass_commit": "aaa", "break_commit": "bbb", "change": {"lines": [{"path": "t.py",
                       "line": 2, "commit": "bbb"}], "product": [{"name": "total", "path": "calc.py"},
                       {"literal": "'x y'"}]}})");
  ASSERT_TRUE(good) << good.error().message;
  ASSERT_TRUE(good->change);
  EXPECT_EQ(good->change->lines.at(0).at, (LineRef{"t.py", 2}));
  EXPECT_EQ(good->change->product.at(1).token, "'x y'");
  EXPECT_TRUE(good->change->product.at(1).literal);
  // Written back as read.
  nlohmann::json again = nlohmann::json::object();
  put_change(again, *good->change);
  EXPECT_EQ(again["change"]["product"][0], nlohmann::json::parse(R"({"name": "total", "path": "calc.py"})"));
  EXPECT_FALSE(with("{}")->change.has_value());
  const auto error_of = [&](const std::string& extra) {
    auto c = with(extra);
    return c ? std::string("accepted") : c.error().message;
  };
  EXPECT_EQ(error_of(R"({"change": {"lines": []}})"),
            "\"change\" needs \"last_pass_commit\" (the commit it is measured from)");
  EXPECT_EQ(error_of(R"({"last_pass_commit": "a", "change": {"lines": [{"path": "t.py", "line": 3}]}})"),
            "change.lines[0]: line 3 is out of range (t.py has 2 lines)");
  EXPECT_EQ(error_of(R"({"last_pass_commit": "a", "change": {"lines": [{"path": "u.py", "line": 1}]}})"),
            "change.lines[0]: path \"u.py\" is not in files");
  EXPECT_EQ(error_of(R"({"last_pass_commit": "a", "change": {"product": [{"name": "a", "literal": "1"}]}})"),
            "change.product[0] must have one of \"name\" and \"literal\"");
  EXPECT_EQ(error_of(R"({"last_pass_commit": 3})"), "\"last_pass_commit\" must be a string or null, not number");
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
