// End-to-end: failures as Debian's pytest writes them at its default settings (--tb=auto: the test's frame and the
// one that raised in the long form), read from its JUnit XML and from its terminal output, by the real binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;
using testing::run_pytest;
using testing::run_spark;
using testing::slurp;
using testing::TempDir;
using testing::write_file;

// A project whose test_total fails in library code below the test (pkg/calc.py, not test code): the traceback's only
// frame in the test file is its line 7, which the default form prints as "tests/test_calc.py:7: " after the code.
// test_ratio fails in its own assertion (line 13).
const char* kTest =
    "from pkg.calc import total, ratio\n"                    // 1
    "\n"                                                     // 2
    "\n"                                                     // 3
    "def test_total():\n"                                    // 4
    "    prices = [3, 4]\n"                                  // 5
    "    tax = 1\n"                                          // 6
    "    assert total(prices, tax) == 9\n"                   // 7
    "\n"                                                     // 8
    "\n"                                                     // 9
    "class TestRatio:\n"                                     // 10
    "    def test_ratio(self):\n"                            // 11
    "        got = ratio(6, 3)\n"                            // 12
    "        assert got == 3\n";                             // 13
const char* kCalc =
    "def total(prices, tax):\n"
    "    if tax > 0:\n"
    "        raise ValueError('tax must be a rate below 1, got %r' % tax)\n"
    "    return sum(prices)\n"
    "\n"
    "\n"
    "def ratio(a, b):\n"
    "    return a / b\n";

void write_project(const TempDir& dir) {
  write_file(dir / "pkg" / "__init__.py", "");
  write_file(dir / "pkg" / "calc.py", kCalc);
  write_file(dir / "tests" / "test_calc.py", kTest);
  write_file(dir / "pytest.ini", "[pytest]\npythonpath = .\n");
}

const json* result_for(const json& all, const std::string& test_id) {
  for (const auto& r : all)
    if (r["test_id"] == test_id) return &r;
  return nullptr;
}

TEST(pytest_defaults, an_exception_below_the_test_is_localized_at_the_tests_own_lines_from_junit) {
  TempDir dir;
  write_project(dir);
  const auto run = run_pytest({"--junitxml=report.xml", "tests"}, dir.path());
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  // The default form: the test's frame ends "tests/test_calc.py:7: " with nothing after it.
  ASSERT_NE(slurp(dir / "report.xml").find("tests/test_calc.py:7: \n"), std::string::npos) << slurp(dir / "report.xml");
  auto r = run_spark({"localize", "--junit", "report.xml", "-k", "3", "--format", "json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("names no line of the test files"), std::string::npos) << r.err;
  const json all = json::parse(r.out);
  const json* below = result_for(all, "tests/test_calc.py::test_total");
  ASSERT_NE(below, nullptr) << r.out;
  ASSERT_FALSE((*below)["ranked"].empty());
  EXPECT_EQ((*below)["ranked"][0]["path"], "tests/test_calc.py");
  EXPECT_EQ((*below)["ranked"][0]["line"], 7) << below->dump(1);
  const json* method = result_for(all, "tests/test_calc.py::TestRatio::test_ratio");
  ASSERT_NE(method, nullptr) << r.out;
  EXPECT_EQ((*method)["ranked"][0]["line"], 13) << method->dump(1);
}

TEST(pytest_defaults, terminal_output_gives_the_failing_test_its_id_and_its_own_section) {
  TempDir dir;
  write_project(dir);
  const auto run = run_pytest({"tests"}, dir.path());
  ASSERT_EQ(run.exit_code, 1) << run.err;
  write_file(dir / "out.txt", run.out);
  // The first failure of the file, its id from the summary line.
  auto first = run_spark({"localize", "--test", "tests/test_calc.py", "--error", "out.txt", "--format", "json"},
                         dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const json j = json::parse(first.out);
  EXPECT_EQ(j["test_id"], "tests/test_calc.py::test_total");
  EXPECT_EQ(j["ranked"][0]["line"], 7) << j.dump(1);
  EXPECT_NE(first.err.find("out.txt: pytest's output holds 2 failures; localizing tests/test_calc.py::test_total"),
            std::string::npos)
      << first.err;
  // Another one by --test-id: its own section, not the first one's traceback.
  auto second = run_spark({"localize", "--test", "tests/test_calc.py", "--error", "-", "--test-id",
                           "tests/test_calc.py::TestRatio::test_ratio", "--format", "json"},
                          dir.path(), run.out);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(json::parse(second.out)["ranked"][0]["line"], 13) << second.out;
  // An id the output does not hold is an error naming the file and what it holds.
  auto missing = run_spark({"localize", "--test", "tests/test_calc.py", "--error", "out.txt", "--test-id",
                            "tests/test_calc.py::test_nope"},
                           dir.path());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("out.txt: pytest's output has no failure of tests/test_calc.py::test_nope (it has "
                             "tests/test_calc.py::test_total, tests/test_calc.py::TestRatio::test_ratio)"),
            std::string::npos)
      << missing.err;
  // A 50 MB log (the test printed 50 MB, which pytest shows as its captured output): the same answer.
  std::string big = run.out;
  const size_t banner = big.find("_ TestRatio.test_ratio _");
  ASSERT_NE(banner, std::string::npos) << run.out;
  std::string captured = "----------------------------- Captured stdout call -----------------------------\n";
  for (int i = 0; i < 500'000; ++i) captured += "E   line " + std::to_string(i) + " of what the test printed\n";
  while (captured.size() < (size_t{50} << 20)) captured += std::string(99, 'x') + "\n";
  big.insert(big.rfind('\n', banner) + 1, captured);
  write_file(dir / "big.txt", big);
  auto from_big = run_spark({"localize", "--test", "tests/test_calc.py", "--error", "big.txt", "--format", "json"},
                            dir.path());
  ASSERT_EQ(from_big.exit_code, 0) << from_big.err;
  EXPECT_EQ(json::parse(from_big.out)["test_id"], "tests/test_calc.py::test_total");
  EXPECT_EQ(json::parse(from_big.out)["ranked"][0]["line"], 7) << from_big.out;
  // --tb=line prints no sections: the summary's id and the line it names.
  const auto line = run_pytest({"--tb=line", "tests/test_calc.py::TestRatio"}, dir.path());
  auto from_line = run_spark({"localize", "--test", "tests/test_calc.py", "--error", "-", "--format", "json"},
                             dir.path(), line.out);
  ASSERT_EQ(from_line.exit_code, 0) << from_line.err << line.out;
  const json l = json::parse(from_line.out);
  EXPECT_EQ(l["test_id"], "tests/test_calc.py::TestRatio::test_ratio") << line.out;
  EXPECT_EQ(l["ranked"][0]["line"], 13) << l.dump(1);
}

TEST(pytest_defaults, a_failure_whose_tear_down_also_fails_is_one_failure_read_from_its_failure) {
  TempDir dir;
  write_file(dir / "tests" / "test_t.py",
             "import pytest\n\n\n@pytest.fixture\ndef res():\n    yield 1\n    raise RuntimeError('teardown broke')\n\n\n"
             "def test_t(res):\n    assert res == 2\n");
  // pytest writes two <testcase>s of one id: the call's <failure>, the tear-down's <error>.
  ASSERT_EQ(run_pytest({"--junitxml=report.xml", "tests"}, dir.path()).exit_code, 1);
  auto r = run_spark({"localize", "--junit", "report.xml", "-k", "1", "--format", "json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json all = json::parse(r.out);
  ASSERT_EQ(all.size(), 1u) << r.out;
  EXPECT_EQ(all[0]["ranked"][0]["line"], 11) << r.out;
  EXPECT_NE(r.err.find("tests/test_t.py::test_t is reported again (error: failed on teardown with \"RuntimeError: "
                       "teardown broke\"); the failure at line 1 is read"),
            std::string::npos)
      << r.err;
  // Another runner's one <testcase> with both: the <failure> is read, and said.
  write_file(dir / "both.xml",
             "<testsuite><testcase classname=\"tests.test_t\" name=\"test_t\"><failure message=\"assert 1 == 2\">"
             "tests/test_t.py:11: in test_t\n    assert res == 2\nE   assert 1 == 2</failure><error message=\"boom\">"
             "E   RuntimeError: boom</error></testcase></testsuite>");
  auto both = run_spark({"localize", "--junit", "both.xml", "-k", "1", "--format", "json"}, dir.path());
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(json::parse(both.out)[0]["ranked"][0]["line"], 11) << both.out;
  EXPECT_NE(both.err.find("both.xml:1: a <testcase> with both a <failure> and an <error> (boom); the <failure> is read"),
            std::string::npos)
      << both.err;
}

TEST(pytest_defaults, a_conftest_that_does_not_parse_is_localized_from_pytests_output_at_its_line) {
  TempDir dir;
  write_file(dir / "tests" / "conftest.py", "import pytest\n\n\n@pytest.fixture\ndef a(:\n    return 1\n");
  write_file(dir / "tests" / "test_a.py", "def test_a(a):\n    assert a == 1\n");
  // pytest stops before collecting (exit 4) and writes no JUnit report: its output is all there is.
  const auto run = run_pytest({"--junitxml=report.xml", "tests"}, dir.path());
  ASSERT_EQ(run.exit_code, 4) << run.out << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "report.xml"));
  auto r = run_spark({"localize", "--test", "tests/conftest.py", "--error", "-", "-k", "1", "--format", "json"},
                     dir.path(), run.out + run.err);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ranked"][0]["line"], 5) << r.out << run.out << run.err;
}

TEST(pytest_defaults, an_index_an_older_embedder_made_is_rebuilt_by_the_next_localize) {
  TempDir dir;
  write_project(dir);
  json c = testing::sample_case("c1", kTest, 6, "tests/test_calc.py:7: in test_total\nE   ValueError: tax");
  c["test_id"] = "tests/test_calc.py::test_total";
  write_file(dir / "cases.jsonl", c.dump() + "\n");
  ASSERT_EQ(run_spark({"import", "cases.jsonl"}, dir.path()).exit_code, 0);
  ASSERT_EQ(run_spark({"index"}, dir.path()).exit_code, 0);
  const auto manifest_path = dir / ".spark" / "index" / "manifest.json";
  json manifest = json::parse(slurp(manifest_path));
  std::string embedder = manifest["embedder"];
  ASSERT_TRUE(embedder.starts_with("builtin-tfidf-v2/")) << embedder;
  manifest["embedder"] = "builtin-tfidf-v1/" + embedder.substr(embedder.find('/') + 1);
  write_file(manifest_path, manifest.dump());
  write_file(dir / "f.txt", "tests/test_calc.py:7: in test_total\nE   ValueError: tax\n");
  auto r = run_spark({"localize", "--test", "tests/test_calc.py", "--error", "f.txt"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the vector index was made by an older embedder (builtin-tfidf-v1): rebuilt it over 1 case(s)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(json::parse(slurp(manifest_path))["embedder"].get<std::string>().starts_with("builtin-tfidf-v2/"));
  // `spark index` does not call such an index up to date.
  manifest = json::parse(slurp(manifest_path));
  manifest["embedder"] = "builtin-tfidf-v1/x";
  write_file(manifest_path, manifest.dump());
  auto idx = run_spark({"index"}, dir.path());
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  EXPECT_NE(idx.err.find("made by an older embedder (builtin-tfidf-v1): rebuilding it"), std::string::npos) << idx.err;
  EXPECT_NE(idx.out.find("indexed 1 case(s)"), std::string::npos) << idx.out;
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
