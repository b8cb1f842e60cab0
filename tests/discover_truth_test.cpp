// What `spark mine --discover` and the miner learn must be true: a case's faulty lines are the failing test's own
// reach, a failure raised in product code the fix changed is no test fix, test code is what the project itself
// says it is (pytest's configuration at each commit, a top-level tests.py, test data, doctests of text files), a
// change of a module's imports reaches only the tests that use the names it changed, and a merge-heavy history
// says that --all-parents finds what its side branches fixed. Real git repositories, real pytest at its defaults.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "formats/case.h"
#include "miner/import_change.h"
#include "miner/mining_store.h"
#include "miner/project_tests.h"
#include "store/knowledge_base.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::git;
using testing::head_sha;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

namespace fs = std::filesystem;

using testing::day;

using testing::commit;

const char* kPytest = "/usr/bin/python3 -B -m pytest -p no:cacheprovider {test_id}";

std::vector<Case> read_cases(const fs::path& file) {
  auto cases = read_cases_jsonl(file);
  EXPECT_TRUE(cases) << cases.error().message;
  return cases ? cases->cases : std::vector<Case>{};
}

std::vector<std::string> lines_of(const Case& c) {
  std::vector<std::string> out;
  for (const auto& l : c.faulty_lines) out.push_back(l.path + ":" + std::to_string(l.line));
  return out;
}

std::vector<StoredFailure> failures_with(const TempDir& dir, FailureStatus status) {
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  EXPECT_TRUE(kb) << kb.error().message;
  if (!kb) return {};
  MiningStore store(**kb);
  auto found = store.failures({status});
  EXPECT_TRUE(found);
  return found ? *found : std::vector<StoredFailure>{};
}

TEST(discover_truth, a_fix_that_repairs_one_test_and_deletes_another_labels_only_the_repaired_tests_lines) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "tests" / "test_x.py",
             "def test_a():\n    assert 1 + 1 == 3\n\n\ndef test_b():\n    values = [1, 2]\n    total = sum(values)\n"
             "    assert total == 4\n");
  commit(dir, "start", 1);
  write_file(dir / "tests" / "test_x.py", "def test_a():\n    assert 1 + 1 == 2\n");
  commit(dir, "fix test_a, drop test_b", 2);
  auto r = run_spark({"mine", "--discover", "--run", kPytest, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  ASSERT_EQ(cases.size(), 1u) << r.err;
  EXPECT_EQ(cases[0].test_id, "tests/test_x.py::test_a");
  EXPECT_EQ(lines_of(cases[0]), (std::vector<std::string>{"tests/test_x.py:2"})) << "test_b's deleted lines are not "
                                                                                    "test_a's faulty lines";
}

TEST(discover_truth, a_failure_raised_in_product_code_the_fix_changed_is_no_test_fix) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  // The product module forgets an import; its fix also reshapes the test's data.
  write_file(dir / "calc.py", "import collections\n\n\ndef count(xs):\n    return collections.Counterr(xs)\n");
  write_file(dir / "tests" / "test_calc.py",
             "from calc import count\n\n\ndef test_count():\n    data = ['a', 'b', 'a']\n"
             "    assert count(data)['a'] == 2\n");
  commit(dir, "start", 1);
  write_file(dir / "calc.py", "import collections\n\n\ndef count(xs):\n    return collections.Counter(xs)\n");
  write_file(dir / "tests" / "test_calc.py",
             "from calc import count\n\n\ndef test_count():\n    data = ['a', 'a', 'b']\n"
             "    assert count(data)['a'] == 2\n");
  commit(dir, "fix count", 2);
  auto r = run_spark({"mine", "--discover", "--run", kPytest, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 fix"), std::string::npos) << "the runs see a fix\n" << r.err;
  EXPECT_TRUE(read_cases(dir / "found.jsonl").empty()) << r.err;
  const auto product = failures_with(dir, FailureStatus::not_test_fault);
  ASSERT_EQ(product.size(), 1u) << r.err;
  EXPECT_EQ(product[0].test_id, "tests/test_calc.py::test_count");
  EXPECT_NE(product[0].reason.find("raised in product code (calc.py:5)"), std::string::npos) << product[0].reason;
}

TEST(discover_truth, a_top_level_tests_py_and_the_projects_pytest_configuration_at_each_commit_are_test_code) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  // A top-level tests.py (unittest's convention), and check_*.py files that pytest.ini names, at that commit only.
  write_file(dir / "tests.py", "def test_top():\n    assert 2 * 2 == 5\n");
  write_file(dir / "pytest.ini", "[pytest]\npython_files =\n    check_*.py\n    tests.py\n");
  write_file(dir / "check_math.py", "def test_check():\n    assert 3 - 1 == 1\n");
  commit(dir, "start", 1);
  write_file(dir / "tests.py", "def test_top():\n    assert 2 * 2 == 4\n");
  commit(dir, "fix tests.py", 2);
  write_file(dir / "check_math.py", "def test_check():\n    assert 3 - 1 == 2\n");
  commit(dir, "fix check_math", 3);
  fs::remove(dir / "pytest.ini");
  fs::create_directories(dir / "tests");
  git(dir, "mv check_math.py tests/test_math.py");
  commit(dir, "the default names of pytest", 4);
  auto r = run_spark({"mine", "--discover", "--run", kPytest, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::vector<std::string>> lines;
  for (const auto& c : read_cases(dir / "found.jsonl")) lines[c.test_id] = lines_of(c);
  EXPECT_EQ(lines["tests.py::test_top"], (std::vector<std::string>{"tests.py:2"})) << r.err;
  EXPECT_EQ(lines["check_math.py::test_check"], (std::vector<std::string>{"check_math.py:2"})) << r.err;
  EXPECT_EQ(lines.size(), 2u) << r.err;
}

TEST(discover_truth, test_data_under_a_test_folder_that_a_test_reads_is_test_code_and_labels_the_data_line) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "tests" / "test_cases.py",
             "import json\nimport os\n\nHERE = os.path.join(os.path.dirname(__file__), 'cases')\n\n\n"
             "def test_cases():\n    for name in sorted(os.listdir(HERE)):\n"
             "        with open(os.path.join(HERE, name)) as f:\n            for case in json.load(f):\n"
             "                assert case['a'] + case['b'] == case['sum'], case\n");
  write_file(dir / "tests" / "cases" / "add.json",
             "[\n  {\"a\": 1, \"b\": 2, \"sum\": 3},\n  {\"a\": 2, \"b\": 2, \"sum\": 5}\n]\n");
  commit(dir, "start", 1);
  write_file(dir / "tests" / "cases" / "add.json",
             "[\n  {\"a\": 1, \"b\": 2, \"sum\": 3},\n  {\"a\": 2, \"b\": 2, \"sum\": 4}\n]\n");
  commit(dir, "fix the data", 2);
  auto dry = run_spark({"mine", "--discover", "--dry-run"}, dir.path());
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("tests/test_cases.py::test_cases  (its module reads tests/cases/add.json, which changed)"),
            std::string::npos)
      << dry.out << dry.err;
  auto r = run_spark({"mine", "--discover", "--run", kPytest, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  ASSERT_EQ(cases.size(), 1u) << r.err;
  EXPECT_EQ(lines_of(cases[0]), (std::vector<std::string>{"tests/cases/add.json:3"})) << r.err;
}

TEST(discover_truth, a_failing_doctest_of_a_text_file_is_not_expired_at_its_own_commit_and_labels_its_own_lines) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n*.xml\n");
  write_file(dir / "pytest.ini", "[pytest]\npython_files = tests.py\naddopts = --doctest-glob=*.md\n");
  write_file(dir / "pkg" / "tests" / "__init__.py", "");
  write_file(dir / "pkg" / "tests" / "tests.py", "def test_plain():\n    x = 1\n    assert x == 1\n");
  write_file(dir / "pkg" / "tests" / "tests.md", "Adding:\n\n>>> 1 + 1\n3\n");
  commit(dir, "start", 1);
  const auto pytest_to = [&](const std::string& report) {
    testing::run_pytest({"--junitxml=" + report, "pkg/tests"}, dir.path());
  };
  pytest_to("r1.xml");
  auto first = run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err.find("no longer defines"), std::string::npos) << first.err;
  EXPECT_TRUE(failures_with(dir, FailureStatus::expired).empty()) << first.err;
  ASSERT_EQ(failures_with(dir, FailureStatus::open).size(), 1u) << first.err;
  // The fix edits the doctest, and a line of tests.py that the doctest never runs.
  write_file(dir / "pkg" / "tests" / "tests.md", "Adding:\n\n>>> 1 + 1\n2\n");
  write_file(dir / "pkg" / "tests" / "tests.py", "def test_plain():\n    x = 2\n    assert x == 2\n");
  commit(dir, "fix the doctest", 2);
  pytest_to("r2.xml");
  auto second = run_spark({"record", "--junit", "r2.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto labelled = failures_with(dir, FailureStatus::labelled);
  ASSERT_EQ(labelled.size(), 1u) << second.err;
  ASSERT_TRUE(labelled[0].labelled);
  EXPECT_EQ(lines_of(*labelled[0].labelled), (std::vector<std::string>{"pkg/tests/tests.md:4"})) << labelled[0].test_id;
}

TEST(discover_truth, an_import_line_change_reaches_only_the_tests_that_use_the_names_it_changed) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "mathlib.py", "def double(x):\n    return x * 3\n\n\ndef twice(x):\n    return x * 2\n");
  std::string tests = "import os\nfrom mathlib import double\n\n\ndef test_double():\n    assert double(2) == 4\n";
  for (int i = 0; i < 5; ++i) tests += "\n\ndef test_other_" + std::to_string(i) + "():\n    assert os.sep\n";
  write_file(dir / "tests" / "test_m.py", tests);
  commit(dir, "start", 1);
  std::string fixed = tests;
  fixed.replace(fixed.find("from mathlib import double"), 26, "from mathlib import twice as double");
  write_file(dir / "tests" / "test_m.py", fixed);
  commit(dir, "import the right function", 2);
  auto dry = run_spark({"mine", "--discover", "--dry-run", "--max-tests-per-commit", "3"}, dir.path());
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.err.find("too wide"), std::string::npos) << dry.err;
  EXPECT_NE(dry.out.find("tests/test_m.py::test_double  (it uses a name whose import changed (double))"),
            std::string::npos)
      << dry.out;
  EXPECT_EQ(dry.out.find("test_other_"), std::string::npos) << dry.out;
  auto r = run_spark({"mine", "--discover", "--run", kPytest, "--max-tests-per-commit", "3", "-o", "found.jsonl"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  ASSERT_EQ(cases.size(), 1u) << r.err;
  EXPECT_EQ(lines_of(cases[0]), (std::vector<std::string>{"tests/test_m.py:2"}));
}

TEST(discover_truth, a_merge_heavy_history_says_all_parents_finds_what_its_side_branches_fixed) {
  TempDir dir;
  git(dir, "init -q -b main");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "tests" / "test_base.py", "def test_base():\n    assert True\n");
  commit(dir, "start", 1);
  // Three topics, each breaking and fixing its own test before it is merged.
  for (int t = 0; t < 3; ++t) {
    const std::string name = "test_t" + std::to_string(t);
    git(dir, "checkout -q -b topic" + std::to_string(t));
    write_file(dir / "tests" / (name + ".py"), "def " + name + "():\n    assert 1 + 1 == 3\n");
    commit(dir, "add " + name, 2 + 3 * t);
    write_file(dir / "tests" / (name + ".py"), "def " + name + "():\n    assert 1 + 1 == 2\n");
    commit(dir, "fix " + name, 3 + 3 * t);
    git(dir, "checkout -q main");
    git(dir, "merge -q --no-ff -m 'merge topic" + std::to_string(t) + "' topic" + std::to_string(t), day(4 + 3 * t));
  }
  auto first = run_spark({"mine", "--discover", "--run", kPytest, "-o", "a.jsonl"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(read_cases(dir / "a.jsonl").empty()) << first.err;
  EXPECT_NE(first.err.find("the first-parent line has 3 merges; 6 commits of their side branches are not walked"),
            std::string::npos)
      << first.err;
  EXPECT_NE(first.err.find("--all-parents walks them"), std::string::npos) << first.err;
  auto all = run_spark({"mine", "--discover", "--all-parents", "--run", kPytest, "-o", "b.jsonl"}, dir.path());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(read_cases(dir / "b.jsonl").size(), 3u) << all.err;
  EXPECT_EQ(all.err.find("--all-parents walks them"), std::string::npos) << all.err;
}

TEST(project_tests, read_pytest_config_reads_the_file_pytest_would_and_its_globs) {
  const auto config = [](std::map<std::string, std::string> files) {
    return read_pytest_config([files](const std::string& p) -> std::optional<std::string> {
      auto it = files.find(p);
      return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
  };
  auto toml = config({{"pyproject.toml",
                       "[project]\nname = \"x\"\n\n[tool.pytest.ini_options]\n"
                       "python_files = \"tests.py\"\ntestpaths = [\n  \"pkg/tests\",\n  'more'\n]\n"},
                      {"setup.cfg", "[tool:pytest]\ntestpaths = other\n"}});
  EXPECT_EQ(toml.source, "pyproject.toml [tool.pytest.ini_options]");
  EXPECT_EQ(toml.python_files, (std::vector<std::string>{"tests.py"}));
  EXPECT_EQ(toml.testpaths, (std::vector<std::string>{"pkg/tests", "more"}));
  auto cfg = config({{"pyproject.toml", "[tool.black]\nline-length = 88\n"},
                     {"tox.ini", "[tox]\nenvlist = py3\n"},
                     {"setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests.py\n"}});
  EXPECT_EQ(cfg.source, "setup.cfg [tool:pytest]");
  EXPECT_EQ(project_test_globs(cfg), (std::vector<std::string>{"tests.py"}));
  // A pytest.ini without the section is still pytest's (and stops the search); a stranger's path is left out.
  auto ini = config({{"pytest.ini", "[other]\n"}, {"setup.cfg", "[tool:pytest]\ntestpaths = t\n"}});
  EXPECT_EQ(ini.source, "pytest.ini [pytest]");
  EXPECT_TRUE(ini.testpaths.empty());
  PytestConfig hostile;
  hostile.testpaths = {"/etc", "../up", "ok/"};
  EXPECT_EQ(project_test_globs(hostile), (std::vector<std::string>{"ok/**", "tests.py"}));
}

TEST(project_tests, doctest_text_file_reads_pytests_ids_and_their_junit_form) {
  EXPECT_EQ(doctest_text_file("pkg/tests/tests.md::tests.md"), std::optional<std::string>("pkg/tests/tests.md"));
  EXPECT_EQ(doctest_text_file("pkg/tests/tests.py::md::tests.md"), std::optional<std::string>("pkg/tests/tests.md"));
  EXPECT_EQ(doctest_text_file("README.rst::README.rst"), std::optional<std::string>("README.rst"));
  EXPECT_EQ(doctest_text_file("pkg/mod.py::pkg.mod.f"), std::nullopt);
  EXPECT_EQ(doctest_text_file("tests/test_x.py::TestC::test_f"), std::nullopt);
  EXPECT_EQ(doctest_text_file("tests/test_x.py::test_f[a.b]"), std::nullopt);
}

TEST(import_change, python_import_change_names_only_the_bindings_that_differ) {
  const std::string before = "import os\nfrom m import (\n    a,\n    b,\n)\nimport x.y as z\n\nK = a + 1\n";
  const std::string after = "import os\nfrom m import (\n    a,\n    c as b,\n)\nimport x.y as z\n\nK = a + 1\n";
  const auto sb = analyze_code(before, Language::python);
  const auto sa = analyze_code(after, Language::python);
  const auto change = python_import_change(before, sb, after, sa, {4});
  EXPECT_EQ(change.names, (std::set<std::string>{"b"}));
  EXPECT_EQ(change.import_lines, (std::set<int>{4}));
  EXPECT_FALSE(change.used_at_module_level);
  const std::string renamed = "import os\nfrom m import (\n    d,\n    b,\n)\nimport x.y as z\n\nK = a + 1\n";
  const auto used = python_import_change(before, sb, renamed, analyze_code(renamed, Language::python), {3});
  EXPECT_EQ(used.names, (std::set<std::string>{"a", "d"}));
  EXPECT_TRUE(used.used_at_module_level) << "K = a + 1 uses a";
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
