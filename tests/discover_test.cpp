// `spark mine --discover` (issue 35): the test-code fixes of a history that never recorded an outcome, found by running
// the candidate tests with real pytest in real git repositories the tests make; and its bad inputs.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "base/text.h"
#include "formats/case.h"
#include "miner/discover.h"
#include "miner/git_history.h"
#include "miner/mining_store.h"
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

const auto edit = testing::replace_in_file;

// A repository of two commits: `path` holds `before` (a failing test), then a fix writes `after`.
void one_fix(const TempDir& dir, const std::string& path, const std::string& before, const std::string& after) {
  git(dir, "init -q");
  write_file(dir / path, before);
  commit(dir, "start", 1);
  write_file(dir / path, after);
  commit(dir, "fix", 2);
}

// pytest at its defaults, the test named by its id.
const char* kPytest = "/usr/bin/python3 -B -m pytest {test_id}";

// A history of product commits and four test-code fixes: a test's own assertion (test_add), a conftest.py fixture
// (test_base), a helper module (test_sum), and a test changed once without being fixed, then fixed (test_div). A
// test that fails every other run (test_coin, its counter in `coin`) changes once: never a case.
struct Fixes {
  std::map<std::string, std::string> fix_of;  // test id → the sha that fixed it
};
Fixes make_history(const TempDir& dir) {
  Fixes f;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "calc" / "__init__.py", "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n");
  write_file(dir / "tests" / "test_calc.py",
             "from calc import add, div\n\n\ndef test_add():\n    assert add(2, 2) == 5\n\n\n"
             "def test_base(base):\n    assert add(base, 1) == 11\n\n\ndef test_div():\n    assert div(6, 3) == 3\n");
  write_file(dir / "tests" / "conftest.py", "import pytest\n\n\n@pytest.fixture\ndef base():\n    return 10\n");
  write_file(dir / "tests" / "helpers.py", "def expected_sum():\n    return 7\n");
  write_file(dir / "tests" / "test_sum.py",
             "from helpers import expected_sum\n\n\ndef test_sum():\n    assert sum([1, 2, 3]) == expected_sum()\n");
  write_file(dir / "tests" / "test_coin.py",
             "import os\nimport pathlib\n\n\ndef test_coin():\n    p = pathlib.Path(os.environ['COIN'])\n"
             "    n = int(p.read_text()) if p.exists() else 0\n    p.write_text(str(n + 1))\n"
             "    assert n % 2 == 1\n");
  commit(dir, "start", 1);
  write_file(dir / "calc" / "__init__.py", testing::slurp(dir / "calc" / "__init__.py") + "\n\ndef sub(a, b):\n    return a - b\n");
  commit(dir, "product: sub", 2);
  edit(dir / "tests" / "test_calc.py", "== 5", "== 4");
  commit(dir, "fix test_add", 3);
  f.fix_of["tests/test_calc.py::test_add"] = head_sha(dir);
  edit(dir / "tests" / "conftest.py", "return 10", "return 11");
  edit(dir / "calc" / "__init__.py", "return a - b", "return a - b  # sub");
  commit(dir, "product and a broken fixture", 4);
  edit(dir / "tests" / "conftest.py", "return 11", "return 10");
  commit(dir, "fix the base fixture", 5);
  f.fix_of["tests/test_calc.py::test_base"] = head_sha(dir);
  edit(dir / "tests" / "test_coin.py", "n % 2 == 1", "n % 2 == 1, n");
  commit(dir, "touch the coin test", 6);
  edit(dir / "tests" / "helpers.py", "return 7", "return 6");
  commit(dir, "fix the helper", 7);
  f.fix_of["tests/test_sum.py::test_sum"] = head_sha(dir);
  edit(dir / "tests" / "test_calc.py", "div(6, 3) == 3", "div(6, 3) == 2.5");
  commit(dir, "test_div: still wrong", 8);
  edit(dir / "tests" / "test_calc.py", "div(6, 3) == 2.5", "div(6, 3) == 2");
  commit(dir, "fix test_div", 9);
  f.fix_of["tests/test_calc.py::test_div"] = head_sha(dir);
  write_file(dir / "tests" / "test_more.py", "def test_more():\n    assert True\n");
  commit(dir, "a new test only", 10);
  write_file(dir / "README", "calc\n");
  commit(dir, "docs", 11);
  return f;
}

std::string coin_command(const TempDir& dir) {
  return "COIN='" + (dir / ".git" / "coin").string() + "' " + kPytest;  // outside the work tree
}

std::vector<Case> read_cases(const fs::path& file) {
  auto cases = read_cases_jsonl(file);
  EXPECT_TRUE(cases) << cases.error().message;
  return cases ? cases->cases : std::vector<Case>{};
}

TEST(spark_mine_discover, finds_exactly_the_test_code_fixes_of_a_history_and_never_the_flaky_test) {
  TempDir dir;
  const Fixes fixes = make_history(dir);
  // The scan alone: the candidates, nothing run.
  auto dry = run_spark({"mine", "--discover", "--dry-run"}, dir.path());
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  for (const auto& [test, sha] : fixes.fix_of) {
    EXPECT_NE(dry.out.find(sha.substr(0, 10)), std::string::npos) << dry.out;
    EXPECT_NE(dry.out.find(test), std::string::npos) << dry.out;
  }
  EXPECT_NE(dry.out.find("tests/conftest.py it uses changed"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("its module uses tests/helpers.py"), std::string::npos) << dry.out;
  EXPECT_NE(dry.err.find("scanned 11 commits"), std::string::npos) << dry.err;
  EXPECT_FALSE(fs::exists(dir / ".spark")) << "a dry run stores nothing";

  auto r = run_spark({"mine", "--discover", "--run", coin_command(dir), "-j", "2", "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  std::map<std::string, const Case*> by_test;
  for (const auto& c : cases) by_test[c.test_id] = &c;
  ASSERT_EQ(by_test.size(), fixes.fix_of.size()) << r.err;
  EXPECT_EQ(cases.size(), fixes.fix_of.size()) << r.err;
  for (const auto& [test, sha] : fixes.fix_of) {
    ASSERT_TRUE(by_test.count(test)) << test << "\n" << r.err;
    EXPECT_EQ(*by_test[test]->fixed_commit, sha) << test;
  }
  const auto line_of = [&](const std::string& test) {
    const auto& l = by_test[test]->faulty_lines.at(0);
    return l.path + ":" + std::to_string(l.line);
  };
  EXPECT_EQ(line_of("tests/test_calc.py::test_add"), "tests/test_calc.py:5");
  EXPECT_EQ(line_of("tests/test_calc.py::test_base"), "tests/conftest.py:6");
  EXPECT_EQ(line_of("tests/test_sum.py::test_sum"), "tests/helpers.py:2");
  EXPECT_EQ(line_of("tests/test_calc.py::test_div"), "tests/test_calc.py:13");
  // Each faulty line keeps its replacement in the fix.
  const auto fix_of = [&](const std::string& test) {
    const Case& c = *by_test[test];
    return c.fixes.count(c.faulty_lines.at(0)) ? c.fixes.at(c.faulty_lines.at(0)) : std::vector<std::string>{"?"};
  };
  EXPECT_EQ(fix_of("tests/test_calc.py::test_add"), (std::vector<std::string>{"    assert add(2, 2) == 4"}));
  EXPECT_EQ(fix_of("tests/test_calc.py::test_base"), (std::vector<std::string>{"    return 10"}));
  // The failure message is the parent's pytest output, in pytest's own form.
  EXPECT_NE(by_test["tests/test_calc.py::test_div"]->error_message.find("assert 2.0 == 2.5"), std::string::npos)
      << by_test["tests/test_calc.py::test_div"]->error_message;
  EXPECT_NE(r.err.find("4 fixes"), std::string::npos) << r.err;
  // Each (commit, test) ran once, though test_div's commit before its fix is one candidate's commit and the next
  // one's parent, which two workers may reach at once: 4 runs per fix and for the coin (3 at the parent, 1 at the
  // commit), 1 for test_base passing at its parent, 2 for test_div failing at both, 3 for its fix (the parent known);
  // and 6 searching back for each fix's last pass: test_base's fixture broke in commit 4 (it passed at 3); the others
  // failed since the first commit, where the search ends (no commit before it).
  EXPECT_NE(r.err.find("ran 28 test runs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the last pass before each fix's failure (6 runs): found for 1 of 4, not within 64 commits for "
                       "0, unknown for 3"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 flaky"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 failed at the commit too"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("4 labelled into the knowledge base"), std::string::npos) << r.err;
  // The flaky failure is kept as flaky, never learnt.
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  ASSERT_TRUE(kb) << kb.error().message;
  MiningStore store(**kb);
  auto flaky = store.failures({FailureStatus::flaky});
  ASSERT_TRUE(flaky);
  ASSERT_EQ(flaky->size(), 1u);
  EXPECT_EQ(flaky->front().test_id, "tests/test_coin.py::test_coin");
  // A trim keeps the fix of each line it keeps.
  const Case& add_case = *by_test["tests/test_calc.py::test_add"];
  auto trimmed = store.decide(add_case.id, Decision::trim, "t", "why", {add_case.faulty_lines.at(0)});
  ASSERT_TRUE(trimmed) << trimmed.error().message;
  ASSERT_TRUE(trimmed->labelled);
  EXPECT_EQ(trimmed->labelled->fixes.at(add_case.faulty_lines.at(0)),
            (std::vector<std::string>{"    assert add(2, 2) == 4"}));
  // The user's work tree was not touched, and no work tree is left behind.
  auto status = testing::run_program("/usr/bin/git", {"status", "--porcelain"}, dir.path());
  EXPECT_EQ(status.out, "?? found.jsonl\n");

  // Again: every (commit, test) is in the store; nothing runs, nothing is added.
  auto again = run_spark({"mine", "--discover", "--run", coin_command(dir), "-o", "again.jsonl"}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("ran 0 test runs"), std::string::npos) << again.err;
  EXPECT_EQ(read_cases(dir / "again.jsonl").size(), fixes.fix_of.size());
}

TEST(spark_mine_discover, a_killed_discovery_continues_where_it_stopped_with_no_duplicate_and_no_lost_case) {
  TempDir dir;
  const Fixes fixes = make_history(dir);
  // Slow runs, so that the kill lands in the middle.
  const std::string slow = "sleep 0.4; " + coin_command(dir);
  const std::string binary = SPARK_BINARY;
  const pid_t child = fork();
  if (child == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(127);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(binary.c_str(), binary.c_str(), "mine", "--discover", "--run", slow.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for some outcomes to be stored, then kill -9.
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto kb = KnowledgeBase::open(dir / ".spark", false);
    if (!kb) continue;
    MiningStore store(**kb);
    auto n = store.outcome_count();
    if (n && *n >= 3) break;
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  auto r = run_spark({"mine", "--discover", "--run", coin_command(dir), "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("(0 more outcomes reused"), std::string::npos) << "the first run's outcomes are reused\n" << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  std::set<std::string> tests;
  for (const auto& c : cases) tests.insert(c.test_id);
  EXPECT_EQ(cases.size(), fixes.fix_of.size()) << r.err;
  for (const auto& [test, sha] : fixes.fix_of) EXPECT_TRUE(tests.count(test)) << test << "\n" << r.err;
}

// A repository whose test_x fails from its first commit on `main` and is fixed on branch `topic` on day `fix_day`;
// `main` checked out again. The fix's commit.
std::string fixed_on_a_topic_branch(const TempDir& dir, int fix_day) {
  git(dir, "init -q -b main");
  write_file(dir / "tests" / "test_x.py", "def test_x():\n    assert 1 + 1 == 3\n");
  commit(dir, "start", 1);
  git(dir, "checkout -q -b topic");
  write_file(dir / "tests" / "test_x.py", "def test_x():\n    assert 1 + 1 == 2\n");
  commit(dir, "fix test_x", fix_day);
  const std::string side = head_sha(dir);
  git(dir, "checkout -q main");
  return side;
}

TEST(spark_mine_discover, a_merge_only_history_finds_the_fix_in_the_merge_and_all_parents_in_its_side_commit) {
  TempDir dir;
  const std::string side = fixed_on_a_topic_branch(dir, 2);
  git(dir, "merge -q --no-ff -m 'merge topic' topic", day(3));
  const std::string merge = head_sha(dir);
  auto first = run_spark({"mine", "--discover", "--run", kPytest, "-o", "a.jsonl"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto a = read_cases(dir / "a.jsonl");
  ASSERT_EQ(a.size(), 1u) << first.err;
  EXPECT_EQ(*a[0].fixed_commit, merge);
  TempDir other;
  git(other, "clone -q '" + dir.path().string() + "' c");
  auto all = run_spark({"mine", "--discover", "--all-parents", "--repo", "c", "--run", kPytest, "-o", "b.jsonl"},
                       other.path());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.err.find("1 merge skipped"), std::string::npos) << all.err;
  auto b = read_cases(other / "b.jsonl");
  ASSERT_EQ(b.size(), 1u) << all.err;
  EXPECT_EQ(*b[0].fixed_commit, side);
}

// A first-parent discovery labels the fix at the merge (the test failed at main's last commit before it); an
// `--all-parents` one over the same store then finds it at the side-branch commit (the test failed at the branch
// point): the same faulty version of the same lines, one fault, one case — not one per line of history.
TEST(spark_mine_discover, a_fix_found_at_a_merge_and_again_at_its_side_commit_is_one_case) {
  TempDir dir;
  fixed_on_a_topic_branch(dir, 3);
  write_file(dir / "README", "main goes on\n");
  commit(dir, "docs", 2);
  git(dir, "merge -q --no-ff -m 'merge topic' topic", day(4));
  auto first = run_spark({"mine", "--discover", "--run", kPytest, "-o", "a.jsonl"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(read_cases(dir / "a.jsonl").size(), 1u) << first.err;
  auto all = run_spark({"mine", "--discover", "--all-parents", "--run", kPytest, "-o", "b.jsonl"}, dir.path());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  auto b = read_cases(dir / "b.jsonl");
  ASSERT_EQ(b.size(), 1u) << all.err;
  EXPECT_EQ(b[0].faulty_lines, (std::vector<LineRef>{{"tests/test_x.py", 2}}));
  EXPECT_EQ(b[0].record["meta"]["occurrences"]["count"], 2) << b[0].record.dump();
  auto exported = run_spark({"export", "-o", "all.jsonl"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(read_cases(dir / "all.jsonl").size(), 1u);
  // A schema-7 store keyed each by its fix and held both cases: opening it merges them.
  {
    auto kb = KnowledgeBase::open(dir / ".spark", false);
    ASSERT_TRUE(kb);
    auto dups = MiningStore(**kb).failures({FailureStatus::duplicate});
    ASSERT_TRUE(dups);
    ASSERT_EQ(dups->size(), 1u);
    ASSERT_TRUE((*kb)->import_cases({*(*dups)[0].labelled}, {}, false));
  }
  testing::run_sql(dir / ".spark" / "kb.sqlite",
                   "UPDATE failures SET status = 'labelled', duplicate_of = NULL, fault_key = 'old-' || commit_sha "
                   "WHERE record IS NOT NULL; PRAGMA user_version = 7;");
  auto upgraded = run_spark({"export", "-o", "upgraded.jsonl"}, dir.path());
  ASSERT_EQ(upgraded.exit_code, 0) << upgraded.err;
  EXPECT_EQ(read_cases(dir / "upgraded.jsonl").size(), 1u);
}

TEST(spark_mine_discover, bad_input_is_refused_or_reported_and_never_becomes_a_case) {
  TempDir dir;
  // A repository with no commits.
  git(dir, "init -q");
  auto empty = run_spark({"mine", "--discover", "--run", kPytest}, dir.path());
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("has no commits"), std::string::npos) << empty.err;
  // A test file whose name holds shell metacharacters: quoted, run as named.
  const std::string odd = "tests/test_it's $(touch pwned) `x`;y.py";
  write_file(dir / odd, "def test_q():\n    assert 'a' == 'b'\n");
  commit(dir, "start", 1);
  write_file(dir / odd, "def test_q():\n    assert 'a' == 'a'\n");
  commit(dir, "fix", 2);
  // Bad commands and job counts.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"mine", "--discover", "--run", "/usr/bin/python3 -m pytest"},
           {"mine", "--discover"},
           {"mine", "--discover", "--run", kPytest, "-j", "0"},
           {"mine", "--discover", "--run", kPytest, "-j", "10000"},
           {"mine", "--discover", "--run", kPytest, "--shard", "3/2"},
           {"mine", "--discover", "--run", kPytest, "--test", "t", "--from", "HEAD"}}) {
    auto bad = run_spark(args, dir.path());
    EXPECT_EQ(bad.exit_code, 2) << args.back() << "\n" << bad.err;
    EXPECT_FALSE(bad.err.empty());
  }
  const std::string log = (dir / "ids.log").string();
  auto quoted =
      run_spark({"mine", "--discover", "--run", "printf '%s|%s\\n' {file} {test_id} >> '" + log + "'; exit 1"},
                dir.path());
  ASSERT_EQ(quoted.exit_code, 0) << quoted.err;
  EXPECT_FALSE(fs::exists(dir / "pwned"));
  EXPECT_NE(testing::slurp(log).find(odd + "|" + odd + "::test_q\n"), std::string::npos) << testing::slurp(log);
  EXPECT_NE(quoted.err.find("1 failed at the commit too"), std::string::npos) << quoted.err;

  // A command that never returns: timed out, counted, no case.
  TempDir hang;
  one_fix(hang, "tests/test_h.py", "def test_h():\n    assert 0\n", "def test_h():\n    assert 1\n");
  auto slept = run_spark({"mine", "--discover", "--run", "sleep 30 # {test_id}", "--run-timeout", "0.3"}, hang.path());
  ASSERT_EQ(slept.exit_code, 0) << slept.err;
  EXPECT_NE(slept.err.find("1 test could not run (never a case)"), std::string::npos) << slept.err;
  EXPECT_NE(slept.err.find("timed out after"), std::string::npos) << slept.err;
  EXPECT_NE(slept.err.find("0 fixes"), std::string::npos) << slept.err;
  // A runner that prints hundreds of megabytes: the capture is bounded, and so is the memory.
  auto loud = run_spark({"mine", "--discover", "--retry-unrunnable", "--run",
                         "head -c 300000000 /dev/zero | tr '\\0' x; echo; echo {test_id}; exit 1"},
                        hang.path());
  ASSERT_EQ(loud.exit_code, 0) << loud.err;
#if !defined(SPARK_ASAN)  // a sanitizer's allocator keeps freed memory in quarantine
  // Against the same discovery of a runner that prints one line, into another store: far less than the 300 MB more.
  auto quiet = run_spark({"--kb", (hang / "quiet-kb").string(), "mine", "--discover", "--run",
                          "echo {test_id}; exit 1"},
                         hang.path());
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_LT(loud.peak_rss_kib - quiet.peak_rss_kib, 64 * 1024)
      << "peak RSS " << loud.peak_rss_kib << " KiB, " << quiet.peak_rss_kib << " KiB for a runner of one line";
#endif
  auto kb = KnowledgeBase::open(hang / ".spark", false);
  ASSERT_TRUE(kb);
  MiningStore store(**kb);
  auto outcomes = store.outcomes_at(head_sha(hang));
  ASSERT_TRUE(outcomes);
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_LE(outcomes->begin()->second.message.size(), size_t{70} * 1024);
  EXPECT_NE(outcomes->begin()->second.message.find("tests/test_h.py::test_h"), std::string::npos);
  // A module the tests import that is not installed: could not run, grouped by its reason.
  write_file(hang / "tests" / "test_h.py", "import no_such_module_here\n\n\ndef test_h():\n    assert 0\n");
  commit(hang, "break", 3);
  write_file(hang / "tests" / "test_h.py", "import no_such_module_here\n\n\ndef test_h():\n    assert 1\n");
  commit(hang, "fix it", 4);
  auto missing = run_spark({"mine", "--discover", "--run", kPytest}, hang.path());
  ASSERT_EQ(missing.exit_code, 0) << missing.err;
  EXPECT_NE(missing.err.find("No module named 'no_such_module_here'"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("0 fixes"), std::string::npos) << missing.err;
}

TEST(spark_mine_discover, a_commit_that_does_not_check_out_is_named_and_skipped) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / "tests" / "test_a.py", "def test_a():\n    assert 1 == 2\n");
  commit(dir, "start", 1);
  write_file(dir / "tests" / "test_a.py", "def test_a():\n    assert 1 == 1\n");
  write_file(dir / "data.txt", "a blob that goes missing\n");
  commit(dir, "fix, and a data file", 2);
  const std::string broken = head_sha(dir);
  // Remove the data file's object: the commit's tree no longer checks out.
  auto blob = testing::run_program("/usr/bin/git", {"rev-parse", "HEAD:data.txt"}, dir.path());
  const std::string oid(trim(blob.out));
  ASSERT_EQ(oid.size(), 40u);
  fs::remove(dir / ".git" / "objects" / oid.substr(0, 2) / oid.substr(2));
  auto r = run_spark({"mine", "--discover", "--run", kPytest}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("candidate skipped: commit " + broken.substr(0, 10) + " does not check out"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("0 fixes"), std::string::npos) << r.err;
}

TEST(spark_mine_discover, a_shallow_clone_says_how_much_history_it_saw_and_how_to_deepen_it) {
  TempDir dir;
  make_history(dir);
  TempDir clone;
  git(clone, "clone -q --depth 3 'file://" + dir.path().string() + "' c");
  auto r = run_spark({"mine", "--discover", "--dry-run", "--repo", "c"}, clone.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("shallow clone"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(3 commits seen)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("git fetch --deepen"), std::string::npos) << r.err;
}

TEST(spark_mine_discover, shards_split_the_commits_and_together_find_every_fix_once) {
  TempDir dir;
  const Fixes fixes = make_history(dir);
  size_t candidates = 0;
  for (const char* shard : {"1/2", "2/2"}) {
    auto r = run_spark({"mine", "--discover", "--shard", shard, "--run", coin_command(dir)}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.err.find(" fix candidate");
    ASSERT_NE(at, std::string::npos) << r.err;
    candidates += std::stoul(r.err.substr(r.err.rfind(' ', at - 1) + 1));
  }
  auto all = run_spark({"mine", "--discover", "--dry-run"}, dir.path());
  const size_t at = all.err.find(" fix candidate");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(candidates, std::stoul(all.err.substr(all.err.rfind(' ', at - 1) + 1)));
  auto out = run_spark({"export", "-o", "all.jsonl"}, dir.path());
  ASSERT_EQ(out.exit_code, 0) << out.err;
  std::set<std::string> tests;
  const auto cases = read_cases(dir / "all.jsonl");
  for (const auto& c : cases) tests.insert(c.test_id);
  EXPECT_EQ(cases.size(), fixes.fix_of.size());
  EXPECT_EQ(tests.size(), fixes.fix_of.size());
}

TEST(spark_mine_discover, node_test_runs_one_test_by_its_title_and_the_case_names_repository_paths) {
  TempDir dir;
  git(dir, "init -q");
  const std::string file =
      "const test = require('node:test');\nconst assert = require('node:assert');\n\n"
      "test('adds', () => {\n  assert.strictEqual(1 + 1, 3);\n});\n\n"
      "test('subtracts', () => {\n  assert.strictEqual(2 - 1, 1);\n});\n";
  write_file(dir / "tests" / "calc.test.js", file);
  commit(dir, "start", 1);
  edit(dir / "tests" / "calc.test.js", "1 + 1, 3", "1 + 1, 2");
  commit(dir, "fix adds", 2);
  auto r = run_spark(
      {"mine", "--discover", "--run", "node --test --test-name-pattern={function} {file}", "-o", "found.jsonl"},
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  ASSERT_EQ(cases.size(), 1u) << r.err;
  EXPECT_EQ(cases[0].test_id, "tests/calc.test.js > adds");
  EXPECT_EQ(cases[0].faulty_lines.at(0).line, 5);
  EXPECT_NE(cases[0].error_message.find("(tests/calc.test.js:5:"), std::string::npos) << cases[0].error_message;
  EXPECT_EQ(cases[0].error_message.find("spark-discover"), std::string::npos) << cases[0].error_message;
}

TEST(spark_mine_discover, junit5s_console_launcher_runs_one_method_and_its_colours_stay_out_of_the_case) {
  TempDir dir;
  git(dir, "init -q");
  const std::string path = "src/test/java/com/x/CalcTest.java";
  write_file(dir / path,
             "package com.x;\n\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n\n"
             "import org.junit.jupiter.api.Test;\n\nclass CalcTest {\n    @Test\n    void adds() {\n"
             "        assertEquals(3, 1 + 1);\n    }\n\n    @Test\n    void subtracts() {\n"
             "        assertEquals(1, 2 - 1);\n    }\n}\n");
  commit(dir, "start", 1);
  edit(dir / path, "assertEquals(3, 1 + 1)", "assertEquals(2, 1 + 1)");
  commit(dir, "fix adds", 2);
  const std::string run =
      "javac -d out -cp /usr/share/java/junit-jupiter-api.jar:/usr/share/java/apiguardian-api.jar "
      "$(find src -name '*.java') && java -jar /usr/share/java/junit-platform-console-standalone.jar -cp out "
      "--select-method {test_id} --disable-banner --details=tree";
  auto r = run_spark({"mine", "--discover", "--run", run, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cases = read_cases(dir / "found.jsonl");
  ASSERT_EQ(cases.size(), 1u) << "javac or JUnit 5 missing? (scripts/setup.sh --tests installs them)\n" << r.err;
  EXPECT_EQ(cases[0].test_id, "com.x.CalcTest#adds");
  EXPECT_EQ(cases[0].faulty_lines.at(0).path + ":" + std::to_string(cases[0].faulty_lines.at(0).line), path + ":10");
  EXPECT_NE(cases[0].error_message.find("expected: <3> but was: <2>"), std::string::npos) << cases[0].error_message;
  EXPECT_EQ(cases[0].error_message.find('\x1b'), std::string::npos) << cases[0].error_message;
}

TEST(spark_mine_discover, a_change_every_test_reaches_is_left_out_above_the_bound_and_dates_bound_the_range) {
  TempDir dir;
  git(dir, "init -q");
  std::string tests = "LIMIT = 3\n\n\n";
  for (int i = 0; i < 4; ++i) tests += "def test_" + std::to_string(i) + "():\n    assert LIMIT == 4\n\n\n";
  write_file(dir / "tests" / "test_all.py", tests);
  commit(dir, "start", 1);
  edit(dir / "tests" / "test_all.py", "LIMIT = 3", "LIMIT = 4");  // module-level: every test of the file
  commit(dir, "fix the limit", 3);
  auto wide = run_spark({"mine", "--discover", "--dry-run", "--max-tests-per-commit", "3"}, dir.path());
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_NE(wide.err.find("0 fix candidates"), std::string::npos) << wide.err;
  EXPECT_NE(wide.err.find("1 commit left out as too wide"), std::string::npos) << wide.err;
  EXPECT_NE(wide.err.find("(fix the limit): more than 3 tests"), std::string::npos) << wide.err;
  auto all = run_spark({"mine", "--discover", "--dry-run", "--max-tests-per-commit", "0"}, dir.path());
  EXPECT_NE(all.out.find("tests/test_all.py::test_3  (a line of its module outside every test changed)"),
            std::string::npos)
      << all.out;
  // A date bounds the range at its midnight (UTC); a word that is no time is refused, naming it.
  auto since = run_spark({"mine", "--discover", "--dry-run", "--since", day(2).substr(0, 10)}, dir.path());
  ASSERT_EQ(since.exit_code, 0) << since.err;
  EXPECT_NE(since.err.find("scanned 1 commit "), std::string::npos) << since.err;
  auto bad = run_spark({"mine", "--discover", "--dry-run", "--since", "yesterday"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("\"yesterday\" is neither a date"), std::string::npos) << bad.err;
}

TEST(spark_mine_discover, several_repositories_in_one_command_each_keep_their_project) {
  TempDir top;
  for (const char* name : {"a", "b"}) {
    TempDir dir;  // made in place, then moved under `top`
    one_fix(dir, "tests/test_" + std::string(name) + ".py", "def test_x():\n    assert 1 == 2\n",
            "def test_x():\n    assert 1 == 1\n");
    fs::rename(dir.path(), top / name);
    fs::create_directories(dir.path());  // for TempDir's own clean-up
  }
  auto r = run_spark({"--kb", "kb", "mine", "--discover", "--repo", "a", "--repo", "b", "--run", kPytest, "-o",
                      "found.jsonl"},
                     top.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("discover a: scanned 2 commits"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("discover b: scanned 2 commits"), std::string::npos) << r.err;
  const auto cases = read_cases(top / "found.jsonl");
  ASSERT_EQ(cases.size(), 2u) << r.err;
  EXPECT_NE(cases[0].project, cases[1].project);
  // --repo twice is --discover's alone.
  auto twice = run_spark({"--kb", "kb", "mine", "--repo", "a", "--repo", "b", "--run", kPytest, "--test", "t", "--from",
                          "HEAD"},
                         top.path());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("--repo may be given several times only with --discover"), std::string::npos) << twice.err;
}

TEST(spark_mine_discover, a_failing_test_the_commit_removes_is_said_so_and_no_case) {
  TempDir dir;
  one_fix(dir, "tests/test_x.py", "def test_keep():\n    assert True\n\n\ndef test_gone():\n    assert 1 == 2\n",
          "def test_keep():\n    assert True\n");
  auto r = run_spark({"mine", "--discover", "--run", kPytest}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("0 fixes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 removed or renamed by the commit"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("could not run"), std::string::npos) << r.err;
}

TEST(spark_mine_discover, a_pair_whose_confirming_run_cannot_run_is_no_fix) {
  TempDir dir;
  one_fix(dir, "tests/test_c.py", "def test_c():\n    assert 1 == 2\n", "def test_c():\n    assert 1 == 1\n");
  // Passes where the fix is; elsewhere fails the first time, then cannot find the test.
  const std::string count = (dir / ".git" / "runs").string();
  const std::string run = "grep -q '1 == 1' {file} && exit 0; n=$(cat '" + count + "' 2>/dev/null || echo 0); echo "
                          "$((n + 1)) > '" + count + "'; [ \"$n\" -ge 1 ] && { echo 'ERROR: not found: x'; exit 4; }; "
                          "echo 'E   assert 1 == 2'; exit 1";
  auto r = run_spark({"mine", "--discover", "--run", run}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("0 fixes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a run to confirm the failure at the parent could not run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("settled 0 failures"), std::string::npos) << r.err;
}

TEST(discover, tests_in_file_names_tests_as_their_runners_do) {
  const auto ids = [](const std::string& path, const std::string& content) {
    std::vector<std::string> out;
    for (const auto& t : tests_in_file(path, content)) out.push_back(t.test_id);
    return out;
  };
  EXPECT_EQ(ids("tests/test_a.py",
                "def helper():\n    pass\n\n\ndef test_one():\n    def test_inner():\n        pass\n\n\n"
                "class TestBox:\n    def test_two(self):\n        pass\n\n\nclass Other:\n    def test_no(self):\n"
                "        pass\n\n\nclass CalcTests(unittest.TestCase):\n    def test_three(self):\n        pass\n"),
            (std::vector<std::string>{"tests/test_a.py::test_one", "tests/test_a.py::TestBox::test_two",
                                      "tests/test_a.py::CalcTests::test_three"}));
  EXPECT_EQ(ids("src/test/java/com/x/FooTest.java",
                "package com.x;\nclass FooTest {\n  @Test\n  void adds() {}\n  void helper() {}\n"
                "  @ParameterizedTest\n  void rows(int a) {}\n}\n"),
            (std::vector<std::string>{"com.x.FooTest#adds", "com.x.FooTest#rows"}));
  EXPECT_EQ(ids("tests/a.test.js", "describe('box', () => {\n  test('adds', () => {\n  });\n});\n"),
            (std::vector<std::string>{"tests/a.test.js > box > adds"}));
  CandidateTest t{"tests/a b.py::test_x", "tests/a b.py", "test_x", "", "", 1, 2};
  EXPECT_EQ(expand_test_command("run {file} -k {function} # {test_id}", t),
            "run 'tests/a b.py' -k 'test_x' # 'tests/a b.py::test_x'");
  EXPECT_EQ(shard_of("00000003" + std::string(32, '0'), 2), 1u);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
