// `--verify` (localizer/verify.h) end to end with real pytest at its defaults in a real git repository: a product
// rename fixed once in one test; the same rename then breaks two more tests. The edit spark suggests makes one pass
// (verified) and not the other (not verified, with its new message); a command that cannot run, and one out of time,
// leave the edits not run. The user's work tree, index and HEAD are byte-identical after every run.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::git;
using testing::TempDir;
using testing::write_file;

const std::string kPytest = "/usr/bin/python3 -B -m pytest -p no:cacheprovider {test_id}";

const std::string kOrders =
    "from shop import Order\n\n\ndef test_order_total():\n    order = Order([2, 3])\n    assert order.%s == 5\n";
const std::string kRefunds =
    "from shop import Order\n\n\ndef make_refund():\n    return Order([1, 1])\n\n\n"
    "def test_refund_total():\n    refund = make_refund()\n    assert refund.total_price == 2\n\n\n"
    "def test_refund_doubled():\n    refund = make_refund()\n    assert refund.total_price == 3\n";

std::string orders(const std::string& name) {
  std::string text = kOrders;
  text.replace(text.find("%s"), 2, name);
  return text;
}

// Every file under `dir` but the knowledge base (which record writes) and pytest's report, with its bytes; .git's
// index and HEAD among them.
std::map<std::string, std::string> snapshot(const TempDir& dir) {
  std::map<std::string, std::string> files;
  for (auto it = fs::recursive_directory_iterator(dir.path()); it != fs::recursive_directory_iterator(); ++it) {
    const std::string relative = fs::relative(it->path(), dir.path()).generic_string();
    if (relative == ".spark" || relative == ".git/objects" || relative == ".git/logs") {
      it.disable_recursion_pending();
      continue;
    }
    if (relative == "report.xml" || !it->is_regular_file()) continue;
    files[relative] = testing::slurp(it->path());
  }
  return files;
}

// The repository: the rename fixed once in test_orders.py (recorded failing, then passing: one labelled case), then
// test_refunds.py committed, failing twice; its pytest report in report.xml.
void rename_history(const TempDir& dir) {
  git(dir, "init");
  write_file(dir / ".gitignore", ".spark/\nreport.xml\n__pycache__/\n");
  write_file(dir / "conftest.py", "");
  write_file(dir / "shop.py",
             "class Order:\n    def __init__(self, prices):\n        self.prices = prices\n"
             "        self.total = sum(prices)\n");
  const auto run_and_record = [&] {
    testing::run_pytest({"--junitxml=report.xml", "tests"}, dir.path());
    auto r = testing::run_spark({"record", "--junit", "report.xml", "--no-localize"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  write_file(dir / "tests" / "test_orders.py", orders("total_price"));
  git(dir, "add -A");
  git(dir, "commit -m orders");
  run_and_record();
  write_file(dir / "tests" / "test_orders.py", orders("total"));
  git(dir, "commit -am rename", "2026-01-02T00:00:00Z");
  run_and_record();
  ASSERT_EQ(testing::run_spark({"export"}, dir.path()).out.find("test_order_total") != std::string::npos, true);
  write_file(dir / "tests" / "test_refunds.py", kRefunds);
  git(dir, "add -A");
  git(dir, "commit -m refunds", "2026-01-03T00:00:00Z");
  auto tested = testing::run_pytest({"--junitxml=report.xml", "tests"}, dir.path());
  ASSERT_EQ(tested.exit_code, 1) << tested.out;
}

// The suggestion of `test_id`'s localization in spark's JSON (its first), or null.
json first_suggestion(const json& run, const std::string& test_id) {
  for (const auto& loc : run)
    if (loc.is_object() && loc["test_id"] == test_id && !loc["suggestions"].empty()) return loc["suggestions"][0];
  return nullptr;
}

TEST(verify, a_rename_fixed_once_is_verified_a_wrong_edit_is_not_and_the_work_tree_is_untouched) {
  TempDir dir;
  rename_history(dir);
  const auto before = snapshot(dir);
  auto r = testing::run_spark({"record", "--junit", "report.xml", "--format", "json", "--verify", kPytest, "-j", "2"},
                              dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json run = json::parse(r.out);
  const json total = first_suggestion(run, "tests/test_refunds.py::test_refund_total");
  ASSERT_TRUE(total.is_object()) << r.out;
  EXPECT_EQ(total["new"], "    assert refund.total == 2");
  EXPECT_EQ(total["verification"]["status"], "verified") << total;
  EXPECT_EQ(total["verification"]["message"], "");
  const json doubled = first_suggestion(run, "tests/test_refunds.py::test_refund_doubled");
  ASSERT_TRUE(doubled.is_object()) << r.out;
  EXPECT_EQ(doubled["new"], "    assert refund.total == 3");
  EXPECT_EQ(doubled["verification"]["status"], "not verified") << doubled;
  // The new failure's message: the renamed attribute is found now, the expected value is still wrong. (Each test's
  // file holds the other's line too: the same edit there is suggested as well, and does not make this test pass.)
  EXPECT_NE(doubled["verification"]["message"].get<std::string>().find("assert 2 == 3"), std::string::npos) << doubled;
  EXPECT_NE(r.err.find("spark: verify: 4 suggested edits of 2 failures: 1 verified, 3 not verified, 0 not run"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(snapshot(dir), before) << "the user's work tree, index or HEAD changed";

  // The text report marks each, verified first.
  auto text = testing::run_spark({"localize", "--junit", "report.xml", "--verify", kPytest}, dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("  verified: the test passes with this edit\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  not verified: AssertionError: assert 2 == 3"), std::string::npos) << text.out;
  // The Markdown summary and the SARIF fix say it too.
  auto md = testing::run_spark({"localize", "--junit", "report.xml", "--format", "markdown", "--verify", kPytest},
                               dir.path());
  EXPECT_NE(md.out.find("**verified**"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("(not verified)"), std::string::npos) << md.out;
  auto sarif =
      testing::run_spark({"localize", "--junit", "report.xml", "--format", "sarif", "--verify", kPytest}, dir.path());
  EXPECT_NE(sarif.out.find("; verified: the test passes with this edit"), std::string::npos) << sarif.out;
  // From a subfolder, the report's test ids still name files from the repository's top: the command runs there.
  auto below = testing::run_spark(
      {"localize", "--junit", "../report.xml", "--root", "..", "--format", "json", "--verify", kPytest}, dir / "tests");
  ASSERT_EQ(below.exit_code, 0) << below.err;
  EXPECT_EQ(
      first_suggestion(json::parse(below.out), "tests/test_refunds.py::test_refund_total")["verification"]["status"],
      "verified")
      << below.out;
  EXPECT_EQ(snapshot(dir), before);
  EXPECT_TRUE(testing::run_program("/usr/bin/git", {"status", "--porcelain"}, dir.path()).out.empty());
}

TEST(verify, a_localization_of_an_edited_work_tree_verifies_against_its_files_and_leaves_them_alone) {
  TempDir dir;
  rename_history(dir);
  // Not committed: the test's expected value edited in the work tree (both refund tests now expect 2).
  std::string edited = kRefunds;
  edited.replace(edited.rfind("== 3"), 4, "== 2");
  write_file(dir / "tests" / "test_refunds.py", edited);
  testing::run_pytest({"--junitxml=report.xml", "tests"}, dir.path());
  const auto before = snapshot(dir);
  auto r =
      testing::run_spark({"localize", "--junit", "report.xml", "--format", "json", "--verify", kPytest}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json run = json::parse(r.out);
  EXPECT_EQ(first_suggestion(run, "tests/test_refunds.py::test_refund_doubled")["verification"]["status"], "verified")
      << r.out;
  EXPECT_EQ(snapshot(dir), before);
}

TEST(verify, a_command_that_cannot_run_or_runs_out_of_time_leaves_the_edits_not_run) {
  TempDir dir;
  rename_history(dir);
  const auto before = snapshot(dir);
  auto missing = testing::run_spark(
      {"localize", "--junit", "report.xml", "--format", "json", "--verify", "no-such-test-runner {test_id}"},
      dir.path());
  ASSERT_EQ(missing.exit_code, 0) << missing.err;
  const json m = first_suggestion(json::parse(missing.out), "tests/test_refunds.py::test_refund_total");
  EXPECT_EQ(m["verification"]["status"], "not run") << m;
  EXPECT_NE(m["verification"]["message"].get<std::string>().find("could not run the test"), std::string::npos) << m;
  auto slow = testing::run_spark({"localize", "--junit", "report.xml", "--format", "json", "--verify",
                                  "sleep 5; " + kPytest, "--verify-timeout", "1"},
                                 dir.path());
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  const json s = first_suggestion(json::parse(slow.out), "tests/test_refunds.py::test_refund_total");
  EXPECT_EQ(s["verification"]["status"], "not run") << s;
  EXPECT_NE(s["verification"]["message"].get<std::string>().find("timed out"), std::string::npos) << s;
  EXPECT_EQ(snapshot(dir), before);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
