// Test ids of any length (a parametrize id made of a 1 MB string) and runs of any size: what spark stores and prints
// per id is kTestIdLimit bytes at most (a head and a hash, so distinct ids stay distinct), and the Markdown summary
// ($GITHUB_STEP_SUMMARY) stays within kMarkdownSummaryLimit whatever the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "formats/case.h"
#include "formats/junit.h"
#include "localizer/report.h"
#include "miner/miner.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

TEST(bounded_test_id, keeps_a_short_id_and_cuts_a_long_one_to_a_head_and_a_hash_that_tell_ids_apart) {
  const std::string short_id = "tests/test_a.py::test_f[" + std::string(kTestIdLimit - 25, 'x') + "]";
  ASSERT_EQ(short_id.size(), kTestIdLimit);
  EXPECT_EQ(bounded_test_id(short_id), short_id);
  const std::string long_a = "tests/test_a.py::test_f[" + std::string(300000, 'x') + "a]";
  const std::string long_b = "tests/test_a.py::test_f[" + std::string(300000, 'x') + "b]";
  const std::string a = bounded_test_id(long_a), b = bounded_test_id(long_b);
  EXPECT_LE(a.size(), kTestIdLimit);
  EXPECT_NE(a, b);  // they differ only in their last characters
  EXPECT_TRUE(a.starts_with("tests/test_a.py::test_f[xxxx")) << a;
  EXPECT_TRUE(a.ends_with("]")) << a;  // a parametrized row's id still ends as one
  EXPECT_NE(a.find("…#"), std::string::npos) << a;
  EXPECT_EQ(bounded_test_id(a), a);          // stable: a cut id is cut no more
  EXPECT_EQ(bounded_test_id(long_a), a);     // and the same id is cut the same way every time
  // Not a row: no ']' added. A cut falls between characters.
  const std::string accents = "tests/test_a.py::test_" + [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "é";
    return s;
  }();
  const std::string c = bounded_test_id(accents);
  EXPECT_LE(c.size(), kTestIdLimit);
  EXPECT_FALSE(c.ends_with("]"));
  EXPECT_FALSE(find_invalid_utf8(c).has_value()) << c;
}

// A JUnit report of pytest's form: `n` failing rows of tests/test_a.py::test_p, each with a parameter of
// `param_bytes` bytes (the row's number last).
void write_long_id_report(const fs::path& file, int n, size_t param_bytes) {
  std::ofstream xml(file);
  xml << "<?xml version=\"1.0\"?>\n<testsuite name=\"pytest\">\n";
  for (int i = 0; i < n; ++i) {
    xml << "<testcase classname=\"tests.test_a\" name=\"test_p[" << std::string(param_bytes, 'p') << i
        << "]\"><failure message=\"assert 1 == 2\">tests/test_a.py:5: in test_p\n    assert s == 'x'\n"
           "E   AssertionError: assert 1 == 2</failure></testcase>\n";
  }
  xml << "</testsuite>\n";
}

TEST(read_junit, a_long_test_id_is_cut_to_the_limit_and_distinct_ids_stay_distinct) {
  TempDir dir;
  write_file(dir / "tests" / "test_a.py", "import pytest\n\n\n@pytest.mark.parametrize('s', [])\ndef test_p(s):\n"
                                          "    assert s == 'x'\n");
  write_long_id_report(dir / "r.xml", 4, 300000);
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 4u);  // none merged as "reported again"
  std::set<std::string> ids;
  for (const auto& o : r->outcomes) {
    EXPECT_LE(o.test_id.size(), kTestIdLimit);
    EXPECT_TRUE(o.test_id.starts_with("tests/test_a.py::test_p[ppp")) << o.test_id.substr(0, 40);
    EXPECT_TRUE(o.test_id.ends_with("]"));
    EXPECT_EQ(o.file, "tests/test_a.py");
    ids.insert(o.test_id);
  }
  EXPECT_EQ(ids.size(), 4u);
  // A warning quotes a name in part: a report naming no test file here.
  write_file(dir / "w.xml", "<testsuite><testcase classname=\"nowhere." + std::string(500000, 'c') +
                                "\" name=\"test_x\"/></testsuite>\n");
  auto w = read_junit(dir / "w.xml", dir.path());
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_EQ(w->warnings.size(), 1u);
  EXPECT_LT(w->warnings[0].size(), 1000u);
  ASSERT_EQ(w->outcomes.size(), 1u);
  EXPECT_LE(w->outcomes[0].test_id.size(), kTestIdLimit);
}

TEST(read_outcomes_jsonl, a_long_test_id_is_cut_as_a_reports_is) {
  TempDir dir;
  const std::string id = "tests/test_a.py::test_p[" + std::string(200000, 'p') + "]";
  write_file(dir / "o.jsonl",
             nlohmann::json({{"commit", "abc1234"}, {"test_id", id}, {"outcome", "failed"}}).dump() + "\n");
  auto r = read_outcomes_jsonl(dir / "o.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].test_id, bounded_test_id(id));
  EXPECT_LE((*r)[0].test_id.size(), kTestIdLimit);
}

TEST(read_cases_jsonl, a_long_test_id_is_cut_as_a_reports_is) {
  TempDir dir;
  auto c = testing::sample_case("c1", "def test_a():\n    assert 1 == 2\n", 2);
  const std::string id = "tests/test_x.py::test_a[" + std::string(200000, 'p') + "]";
  c["test_id"] = id;
  write_file(dir / "c.jsonl", c.dump() + "\n");
  auto r = read_cases_jsonl(dir / "c.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->cases.size(), 1u);
  EXPECT_EQ(r->cases[0].test_id, bounded_test_id(id));
}

// A failure as the summary sees it, with a test id of `id_bytes` of characters Markdown cells escape (each "_" is
// written as 5 bytes) and a suggested edit whose line is `line_bytes` long.
Localization failure(int i, size_t id_bytes, size_t line_bytes) {
  Localization l;
  l.test_id = "tests/test_a.py::test_" + std::to_string(i) + "[" + std::string(id_bytes, '_') + "]";
  RankedElement e;
  e.path = "tests/test_a.py";
  e.line = 3;
  e.code = "assert total == 5";
  l.ranked.push_back(e);
  Suggestion s;
  s.line = {"tests/test_a.py", 3 + i};
  s.old_line = std::string(line_bytes, 'o');
  s.new_line = std::string(line_bytes, 'n');
  s.old_tokens = std::string(line_bytes, 'o');
  s.new_tokens = "total";
  s.from_case = "case-1";
  l.suggestions.push_back(s);
  return l;
}

TEST(report_markdown, stays_within_its_limit_whatever_the_run_and_counts_what_it_leaves_out) {
  const ReportContext ctx{"all", Level::line, 5, 0.05, "test"};
  // A few failures fit whole.
  std::vector<Localization> few = {failure(0, 100, 100), failure(1, 100, 100)};
  const std::string small = report_markdown({&few[0], &few[1]}, {}, ctx);
  EXPECT_EQ(small.find("more failure"), std::string::npos) << small;
  EXPECT_NE(small.find("tests/test&#95;a.py::test&#95;1"), std::string::npos);
  // Edits of 1 MB lines: each line cut.
  std::vector<Localization> wide = {failure(0, 100, 1u << 20), failure(1, 100, 1u << 20)};
  const std::string cut = report_markdown({&wide[0], &wide[1]}, {}, ctx);
  EXPECT_LE(cut.size(), 20000u);
  EXPECT_NE(cut.find("#### Suggested edits"), std::string::npos) << cut.substr(0, 2000);
  EXPECT_EQ(cut.find(std::string(3000, 'o')), std::string::npos);
  // 2,000 failures of 1,000-byte ids (5,000 bytes each in a cell) and an error of 1 MB: within the limit, the rest
  // counted.
  std::vector<Localization> many;
  for (int i = 0; i < 2000; ++i) many.push_back(failure(i, 1000, 100));
  std::vector<const Localization*> run;
  for (const auto& l : many) run.push_back(&l);
  const std::string out = report_markdown(run, {"an error of " + std::string(1u << 20, 'e')}, ctx);
  EXPECT_LE(out.size(), kMarkdownSummaryLimit);
  size_t rows = 0;
  for (size_t at = 0; (at = out.find("\n| <code>tests/test&#95;a.py::test&#95;", at)) != std::string::npos; ++at)
    ++rows;
  ASSERT_GT(rows, 20u);
  ASSERT_LT(rows, 2000u);
  EXPECT_NE(out.find("… and " + std::to_string(2001 - rows) + " more failures"), std::string::npos)
      << out.substr(out.size() - 600);
  EXPECT_NE(out.find("more suggested edits"), std::string::npos);
}

TEST(spark_record, ids_of_a_megabyte_are_stored_and_summed_up_within_their_caps) {
  TempDir dir;
  testing::git(dir, "init -q .");
  write_file(dir / "tests" / "test_a.py", "import pytest\n\n\n@pytest.mark.parametrize('s', [])\ndef test_p(s):\n"
                                          "    assert s == 'x'\n");
  testing::git(dir, "add .");
  testing::git(dir, "commit -qm a");
  write_long_id_report(dir / "r.xml", 10, 1u << 20);  // 10 ids of 1 MB
  auto r = run_spark({"record", "--junit", "r.xml", "--markdown", "summary.md", "--format", "text"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_LT(r.out.size() + r.err.size(), 200000u) << "the log holds the ids whole";
  uintmax_t store = 0;
  for (const auto& e : fs::directory_iterator(dir / ".spark"))
    if (e.is_regular_file() && e.path().filename().string().starts_with("kb.sqlite")) store += e.file_size();
  EXPECT_LT(store, 4u << 20) << "the store holds the ids whole";
  const std::string summary = testing::slurp(dir / "summary.md");
  EXPECT_LE(summary.size(), kMarkdownSummaryLimit);
  EXPECT_NE(summary.find("### spark: 10 failing tests"), std::string::npos) << summary.substr(0, 300);
  auto listed = run_spark({"failures", "list", "--format", "json"}, dir.path());
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto j = nlohmann::json::parse(listed.out);
  std::set<std::string> ids;
  for (const auto& f : j.at("failures")) {
    const auto id = f.at("test_id").get<std::string>();
    EXPECT_LE(id.size(), kTestIdLimit);
    EXPECT_TRUE(id.starts_with("tests/test_a.py::test_p[ppp")) << id.substr(0, 40);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 10u);
  // The same report again: the same tests (their cut ids are stable), no new failures.
  auto again = run_spark({"record", "--junit", "r.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err.substr(0, 2000);
  auto relisted = run_spark({"failures", "list", "--format", "json"}, dir.path());
  EXPECT_EQ(nlohmann::json::parse(relisted.out).at("failures").size(), 10u);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
