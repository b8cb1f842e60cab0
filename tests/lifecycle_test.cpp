// The miner's lifecycle on real repositories the tests make: mining into the knowledge base (incremental, resumable
// after a kill), the recomputed 3-sigma rule, the audit, `spark record` in CI (also two at once), the post-commit
// hook, and `--run` bisection with real pytest.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <cstdlib>
#include <set>
#include <ctime>
#include <thread>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "base/text.h"
#include "chat_server.h"
#include "formats/case.h"
#include "json_schema.h"
#include "miner/git_history.h"
#include "miner/mining_store.h"
#include "miner/runner.h"
#include "retrieval/vector_index.h"
#include "store/knowledge_base.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::run_spark;
using testing::TempDir;
using testing::write_file;

using testing::git;
using testing::head_sha;
using testing::fix_history;

using testing::day;

std::string joined(const std::vector<std::string>& v, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to && i < v.size(); ++i) s += v[i];
  return s;
}

// An export's records with each faulty line's `fix` left out: these tests check which lines are faulty (the fixes are
// checked in discover_test.cpp, case_test.cpp and miner_test.cpp).
nlohmann::json without_fixes(nlohmann::json c) {
  if (c.contains("faulty_lines") && c["faulty_lines"].is_array())
    for (auto& line : c["faulty_lines"]) line.erase("fix");
  return c;
}
std::string without_fixes(const std::string& jsonl) {
  std::string out;
  for (std::string_view line : split_lines(jsonl))
    if (!line.empty()) out += without_fixes(nlohmann::json::parse(line)).dump() + "\n";
  return out;
}

size_t stored_cases(const TempDir& dir) {
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  if (!kb) return 0;
  return *(*kb)->count();
}

TEST(spark_mine_store, incremental_runs_and_the_rule_recomputed_as_the_corpus_grows) {
  TempDir dir;
  std::vector<int> sizes(12, 1);
  sizes.push_back(30);
  const auto outcomes = fix_history(dir, sizes);
  // Twelve one-line fixes: all equal, nothing is an outlier.
  write_file(dir / "o1.jsonl", joined(outcomes, 0, 12));
  auto r1 = run_spark({"mine", "--outcomes", "o1.jsonl"}, dir.path());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("stored 24 outcomes"), std::string::npos) << r1.err;
  EXPECT_NE(r1.err.find("12 labelled into the knowledge base"), std::string::npos) << r1.err;
  EXPECT_EQ(stored_cases(dir), 12u);
  // The same file again: nothing new.
  auto again = run_spark({"mine", "--outcomes", "o1.jsonl"}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("stored 0 outcomes (new or changed); opened 0 failures"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("settled 0 failures"), std::string::npos) << again.err;
  // The thirty-line rewrite arrives: the rule over all thirteen quarantines it.
  write_file(dir / "o2.jsonl", joined(outcomes, 12, 13));
  auto r2 = run_spark({"mine", "--outcomes", "o2.jsonl"}, dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("1 quarantined for audit"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("(over 13 mined cases)"), std::string::npos) << r2.err;
  EXPECT_EQ(stored_cases(dir), 12u);
  // A looser rule releases it into the knowledge base; the default rule moves it back.
  auto loose = run_spark({"mine", "--outcomes", "o2.jsonl", "--sigma", "10"}, dir.path());
  ASSERT_EQ(loose.exit_code, 0) << loose.err;
  EXPECT_NE(loose.err.find("back in the knowledge base by the recomputed rule"), std::string::npos) << loose.err;
  EXPECT_EQ(stored_cases(dir), 13u);
  auto strict = run_spark({"mine", "--outcomes", "o2.jsonl", "-o", "-", "--quarantine", "q.jsonl"}, dir.path());
  ASSERT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_NE(strict.err.find("moved to quarantine by the recomputed rule"), std::string::npos) << strict.err;
  EXPECT_EQ(stored_cases(dir), 12u);
  // -o - writes the mined corpus (all twelve), --quarantine the quarantine.
  size_t lines = 0;
  for (char c : strict.out) lines += c == '\n';
  EXPECT_EQ(lines, 12u);
  EXPECT_NE(testing::slurp(dir / "q.jsonl").find("\"tests/test_m.py::test_12\""), std::string::npos);
}

TEST(spark_mine_store, a_killed_mine_leaves_a_consistent_store_and_resumes) {
  TempDir dir;
  std::vector<int> sizes;
  for (int i = 0; i < 36; ++i) sizes.push_back(1 + i % 3);
  const auto outcomes = fix_history(dir, sizes);
  write_file(dir / "all.jsonl", joined(outcomes, 0, outcomes.size()));
  // A reference run in a copy of the knowledge base folder.
  auto ref = run_spark({"--kb", "ref", "mine", "--outcomes", "all.jsonl", "-o", "ref.jsonl"}, dir.path());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  // Kill -9 at varying moments; after each, the store is consistent: every case in the knowledge base belongs to a
  // settled failure, and no failure is settled without its case.
  int killed = 0;  // runs the kill really interrupted (not ones that had finished)
  for (int delay_ms : {2, 5, 10, 20, 40}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (chdir(dir.path().c_str()) != 0) _exit(127);
      execl(SPARK_BINARY, SPARK_BINARY, "mine", "--outcomes", "all.jsonl", static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status) ? 1 : 0;
    auto kb = KnowledgeBase::open(dir / ".spark", true);
    ASSERT_TRUE(kb) << kb.error().message;
    MiningStore store(**kb);
    auto labelled = store.failures({FailureStatus::labelled});
    ASSERT_TRUE(labelled);
    EXPECT_EQ(*(*kb)->count(), labelled->size()) << "after a kill at " << delay_ms << " ms";
  }
  EXPECT_GE(killed, 1);
  auto done = run_spark({"mine", "--outcomes", "all.jsonl", "-o", "resumed.jsonl"}, dir.path());
  ASSERT_EQ(done.exit_code, 0) << done.err;
  EXPECT_EQ(testing::slurp(dir / "resumed.jsonl"), testing::slurp(dir / "ref.jsonl"));
  EXPECT_EQ(stored_cases(dir), 36u);
}

TEST(spark_audit, lists_shows_and_records_decisions_with_author_and_time) {
  TempDir dir;
  std::vector<int> sizes(12, 1);
  sizes.push_back(30);
  const auto outcomes = fix_history(dir, sizes);
  git(dir, "config user.name Auditor");
  git(dir, "config user.email audit@example.org");
  write_file(dir / "all.jsonl", joined(outcomes, 0, outcomes.size()));
  ASSERT_EQ(run_spark({"mine", "--outcomes", "all.jsonl"}, dir.path()).exit_code, 0);
  auto list = run_spark({"audit", "--format", "json"}, dir.path());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j["cases"].size(), 1u);
  const std::string id = j["cases"][0]["id"];
  EXPECT_EQ(j["cases"][0]["status"], "quarantined");
  EXPECT_EQ(j["cases"][0]["faulty_lines_mined"], 30);
  EXPECT_NEAR(j["rule"]["threshold"].get<double>(), 26.41, 0.01);
  // show: the fix's diff, git's format.
  auto show = run_spark({"audit", "show", id.substr(0, id.size() - 3), "--color", "never"}, dir.path());
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("--- a/tests/test_m.py"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("-x0 = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 0"), std::string::npos) << show.out;
  // HTML with side-by-side diffs.
  ASSERT_EQ(run_spark({"audit", "--html", "audit.html"}, dir.path()).exit_code, 0);
  const std::string html = testing::slurp(dir / "audit.html");
  EXPECT_NE(html.find("<table class=diff>"), std::string::npos);
  EXPECT_NE(html.find("class='del faulty'"), std::string::npos);
  // trim: only lines the fix touched may be kept.
  auto bad_trim = run_spark({"audit", "trim", id, "--keep", "35"}, dir.path());
  EXPECT_EQ(bad_trim.exit_code, 1);
  EXPECT_NE(bad_trim.err.find("tests/test_m.py:35 is not one of"), std::string::npos) << bad_trim.err;
  auto trim = run_spark({"audit", "trim", id, "--keep", "1-2,tests/test_m.py:5", "--reason", "only the first matter"},
                        dir.path());
  ASSERT_EQ(trim.exit_code, 0) << trim.err;
  EXPECT_NE(trim.err.find("trimmed by Auditor <audit@example.org>"), std::string::npos) << trim.err;
  EXPECT_EQ(stored_cases(dir), 13u);
  auto exported = run_spark({"export"}, dir.path());
  EXPECT_NE(without_fixes(exported.out).find("\"faulty_lines\":[{\"line\":1,\"path\":\"tests/test_m.py\"},{\"line\":2,"),
            std::string::npos);
  // A person's decision survives a re-mine with any rule; a rejection takes the case out of the knowledge base.
  ASSERT_EQ(run_spark({"mine", "--outcomes", "all.jsonl", "--sigma", "1"}, dir.path()).exit_code, 0);
  auto after = nlohmann::json::parse(run_spark({"audit", "--all", "--format", "json"}, dir.path()).out);
  bool found = false;
  for (const auto& c : after["cases"])
    if (c["id"] == id) {
      found = true;
      EXPECT_EQ(c["status"], "trimmed");
      EXPECT_EQ(c["faulty_lines"].size(), 3u);
      EXPECT_EQ(c["reason"], "only the first matter");
    }
  EXPECT_TRUE(found);
  auto reject = run_spark({"audit", "reject", id, "--author", "Reviewer", "--reason", "refactoring"}, dir.path());
  ASSERT_EQ(reject.exit_code, 0) << reject.err;
  EXPECT_NE(reject.err.find("rejected by Reviewer"), std::string::npos);
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  ASSERT_TRUE(kb);
  EXPECT_FALSE(*(*kb)->find(id));
  // Bad input: an unknown id, a missing --keep.
  auto unknown = run_spark({"audit", "accept", "nope"}, dir.path());
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no mined case \"nope\""), std::string::npos);
  EXPECT_EQ(run_spark({"audit", "trim", id}, dir.path()).exit_code, 2);
}

// ---------------------------------------------------------------------------------------------------------------
// spark record, with real pytest.

const char* kGood = "def test_sum():\n    values = [1, 2, 3]\n    assert sum(values) == 6\n\n\ndef test_len():\n"
                    "    assert len('abc') == 3\n";

void pytest(const TempDir& dir, const std::string& report, const std::string& tests = "tests") {
  const std::string cmd = "cd '" + dir.path().string() + "' && /usr/bin/python3 -B -m pytest -q -p no:cacheprovider " +
                          "--junitxml=" + report + " " + tests + " > /dev/null 2>&1";
  (void)std::system(cmd.c_str());
  ASSERT_TRUE(std::filesystem::exists(dir / report)) << cmd;
}

// A repository whose first commit breaks test_sum (its input sums to 7, not 6) on line 2 of tests/test_calc.py.
// `ignore` is the .gitignore (empty: none); the sums are fixed by writing kGood.
void broken_calc_repo(const TempDir& dir, const std::string& ignore) {
  git(dir, "init");
  if (!ignore.empty()) write_file(dir / ".gitignore", ignore);
  std::string broken = kGood;
  broken.replace(broken.find("[1, 2, 3]"), 9, "[1, 2, 4]");
  write_file(dir / "tests" / "test_calc.py", broken);
  git(dir, "add -A");
  git(dir, "commit -m broken", day(1));
}

// Records `first` (a run at HEAD), then a commit that touches no test (NOTES, on `d`), its run (`second`) and records
// that too: the failing tests fail again at a new commit.
void record_twice(const TempDir& dir, const std::string& first, const std::string& second, int d) {
  ASSERT_EQ(run_spark({"record", "--junit", first, "--no-localize"}, dir.path()).exit_code, 0);
  write_file(dir / "NOTES", "x\n");
  git(dir, "add -A");
  git(dir, "commit -m notes", day(d));
  pytest(dir, second);
  ASSERT_EQ(run_spark({"record", "--junit", second, "--no-localize"}, dir.path()).exit_code, 0);
}

TEST(spark_record, opens_localizes_and_labels_on_the_first_pass) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n.spark/\n__pycache__/\n");
  pytest(dir, "r1.xml");
  auto r1 = run_spark({"record", "--junit", "r1.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("recorded 2 outcomes"), std::string::npos) << r1.err;
  EXPECT_NE(r1.err.find("opened 1 failure"), std::string::npos) << r1.err;
  // No mined case yet: the outlier rule says it quarantines nothing (not "above 0.00 faulty lines").
  EXPECT_NE(r1.err.find("outlier rule: none yet (0 mined cases; it needs two or more)"), std::string::npos) << r1.err;
  EXPECT_EQ(r1.err.find("quarantine above"), std::string::npos) << r1.err;
  const auto loc = nlohmann::json::parse(r1.out);
  ASSERT_TRUE(loc.is_array());
  for (const auto& one : loc)
    for (const auto& problem : testing::schema_problems(one, "localize.schema.json"))
      ADD_FAILURE() << problem;
  ASSERT_EQ(loc.size(), 1u);
  EXPECT_EQ(loc[0]["test_id"], "tests/test_calc.py::test_sum") << r1.out;
  // The failure stays open while the test is not fixed.
  write_file(dir / "NOTES", "x\n");
  git(dir, "add -A");
  git(dir, "commit -m notes", day(2));
  pytest(dir, "r2.xml");
  auto r2 = run_spark({"record", "--junit", "r2.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("opened 1 failure\n"), std::string::npos) << r2.err;  // the same test, failing at a new commit
  // The fix: the first passing run labels the failure(s) at once.
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(3));
  pytest(dir, "r3.xml");
  auto r3 = run_spark({"record", "--junit", "r3.xml"}, dir.path());
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  // It failed at two commits with the same test code, and one fix mended it: one fault, one case, both commits behind it.
  EXPECT_NE(r3.err.find("settled 2 failures: 1 labelled into the knowledge base, 1 the same fault as an earlier failure"),
            std::string::npos) << r3.err;
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0);
  EXPECT_NE(without_fixes(exported.out).find("\"faulty_lines\":[{\"line\":2,\"path\":\"tests/test_calc.py\"}]"),
            std::string::npos)
      << exported.out;
  EXPECT_NE(exported.out.find("assert 7 == 6"), std::string::npos);
  EXPECT_EQ(stored_cases(dir), 1u);
  const auto occurrences = nlohmann::json::parse(exported.out)["meta"]["occurrences"];
  EXPECT_EQ(occurrences["count"], 2) << exported.out;
  EXPECT_EQ(occurrences["commits"].size(), 2u);
  EXPECT_EQ(occurrences["first_commit"], occurrences["commits"][0]);
  EXPECT_NE(occurrences["first_commit"], occurrences["last_commit"]);
  auto audit = run_spark({"audit", "--all", "--format", "json"}, dir.path());
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  for (const auto& problem :
       testing::schema_problems(nlohmann::json::parse(audit.out), "audit.schema.json"))
    ADD_FAILURE() << problem;
  const auto listed = nlohmann::json::parse(audit.out)["cases"];
  ASSERT_EQ(listed.size(), 1u) << audit.out;
  EXPECT_EQ(listed[0]["occurrences"]["count"], 2);
  // The first learned case and no vector index yet: the next failure's record builds the index and uses the case
  // (no manual `spark index`).
  EXPECT_FALSE(std::filesystem::exists(dir / ".spark" / "index" / "manifest.json"));
  std::string again = kGood;
  again.replace(again.find("[1, 2, 3]"), 9, "[1, 2, 5]");
  write_file(dir / "tests" / "test_calc.py", again);
  git(dir, "commit -am again", day(4));
  pytest(dir, "r4.xml");
  auto r4 = run_spark({"record", "--junit", "r4.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r4.exit_code, 0) << r4.err;
  EXPECT_NE(r4.err.find("no vector index: built it over 1 case(s)"), std::string::npos) << r4.err;
  const auto loc4 = nlohmann::json::parse(r4.out);
  ASSERT_EQ(loc4.size(), 1u);
  EXPECT_EQ(loc4[0]["retrieved"].size(), 1u) << r4.out;
  EXPECT_TRUE(std::filesystem::exists(dir / ".spark" / "index" / "manifest.json"));
  // Bad input: a truncated report is an error naming it, and nothing stored is lost.
  write_file(dir / "cut.xml", testing::slurp(dir / "r3.xml").substr(0, 120));
  auto cut = run_spark({"record", "--junit", "cut.xml"}, dir.path());
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("cut.xml"), std::string::npos) << cut.err;
  EXPECT_EQ(stored_cases(dir), 1u);
  // A report naming a test file outside the repository: warned about, never read.
  write_file(dir / "outside" / "test_evil.py", "def test_x():\n    assert False\n");
  write_file(dir / "evil.xml",
             "<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\" tests=\"1\">"
             "<testcase classname=\"x\" name=\"test_x\" file=\"../outside/test_evil.py\" line=\"1\">"
             "<failure message=\"boom\">E boom</failure></testcase></testsuite></testsuites>");
  auto evil = run_spark({"record", "--junit", "evil.xml", "--format", "json"}, dir.path());
  EXPECT_EQ(evil.exit_code, 0) << evil.err;
  EXPECT_NE(evil.err.find("outside the repository"), std::string::npos) << evil.err;
  EXPECT_EQ(evil.out.find("test_evil"), std::string::npos) << evil.out;
  auto bad_commit = run_spark({"record", "--junit", "r3.xml", "--commit", "feedfacefeedface"}, dir.path());
  EXPECT_EQ(bad_commit.exit_code, 1);
  EXPECT_NE(bad_commit.err.find("no commit \"feedfacefeedface\""), std::string::npos) << bad_commit.err;
}

// Issue 40: a JUnit report whose test names carry GitHub workflow commands on lines of their own and terminal escapes,
// and an LLM whose answers hold bytes that are not UTF-8. Every format's stdout and stderr stay free of both; the JSON
// output is JSON and falls back to the built-in ranking (before: type_error.316, exit 1, nothing printed, the
// outcomes stored without a word).
TEST(spark_record, hostile_test_names_and_an_answer_not_utf8_reach_no_log_raw_and_json_stays_json) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n.spark/\n__pycache__/\n");
  pytest(dir, "r1.xml");
  std::string report = testing::slurp(dir / "r1.xml");
  const std::string hostile =
      "<testcase classname=\"tests.test_calc&#10;::error file=evil.py,line=1::owned\" "
      "name=\"test_x&#10;::add-mask::s3cr3t&#13;::warning::y &#27;]52;c;ZXZpbA==&#7;&#27;]0;title&#7;&#27;[2J\">"
      "<failure message=\"boom&#10;::error::in the message\">E   boom&#10;::error::in the text</failure></testcase>";
  report.insert(report.rfind("</testsuite>"), hostile);
  write_file(dir / "r1.xml", report);
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content("{\"choices\": [{\"message\": {\"content\": \"line 2 \xff\xfe\"}}]}", "application/json");
  });
  const std::vector<std::string> llm = {"--llm-url", server.url(), "--model", "m", "--retries", "0"};
  for (const std::string format : {"json", "text", "github"}) {
    SCOPED_TRACE(format);
    std::vector<std::string> args = {"record", "--junit", "r1.xml", "--format", format};
    args.insert(args.end(), llm.begin(), llm.end());
    auto r = run_spark(args, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("the LLM could not be used"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not localized"), std::string::npos) << r.err;  // the hostile test's file is not in the commit
    for (const auto& line : testing::unsafe_log_lines(r.err)) ADD_FAILURE() << "stderr: " << line;
    for (const auto& line : testing::unsafe_log_lines(r.out, format == "github")) ADD_FAILURE() << "stdout: " << line;
    if (format != "json") continue;
    const auto loc = nlohmann::json::parse(r.out);
    ASSERT_EQ(loc.size(), 1u) << r.out;
    EXPECT_EQ(loc[0]["test_id"], "tests/test_calc.py::test_sum");
    EXPECT_FALSE(loc[0]["llm"]["used"].get<bool>());
    EXPECT_NE(loc[0]["llm"]["error"].get<std::string>().find("line 2 \xef\xbf\xbd"), std::string::npos) << r.out;
  }
}

// Issue 40: `localize --test` refuses a test file past the limits (docs/RELIABILITY.md, "Hostile input"), and
// `record` localized the same file from git: one test file cost what the limit is there to bound. Now record records
// the failure and says why it is not localized.
TEST(spark_record, a_test_file_past_the_limits_is_recorded_not_localized_as_localize_refuses_it) {
  TempDir dir;
  git(dir, "init");
  std::string big = "def test_big():\n    assert 1 == 2\n";
  for (size_t i = 0; i < kMaxTestFileLines; ++i) big += "x = 1\n";
  write_file(dir / "tests" / "test_big.py", big);
  write_file(dir / ".gitignore", "*.xml\n.spark/\n");
  git(dir, "add -A");
  git(dir, "commit -m big", day(1));
  write_file(dir / "r.xml",
             "<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\" tests=\"1\">"
             "<testcase classname=\"tests.test_big\" name=\"test_big\" file=\"tests/test_big.py\" line=\"0\">"
             "<failure message=\"assert 1 == 2\">tests/test_big.py:2: in test_big\n    assert 1 == 2\nE   assert 1 == 2"
             "</failure></testcase></testsuite></testsuites>");
  const std::string why = std::to_string(kMaxTestFileLines + 2) + " lines; spark reads test files of up to";
  auto refused = run_spark({"localize", "--test", "tests/test_big.py", "--error", "-"}, dir.path(),
                           "tests/test_big.py:2: in test_big\n    assert 1 == 2\nE   assert 1 == 2\n");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find(why), std::string::npos) << refused.err;
  auto r = run_spark({"record", "--junit", "r.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("opened 1 failure"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tests/test_big.py::test_big: tests/test_big.py: " + why), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not localized"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::array()) << r.out;
}

TEST(spark_record, a_schema_2_store_with_one_fault_twice_is_upgraded_to_one_case_losing_nothing) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n.spark/\n__pycache__/\n");
  pytest(dir, "r1.xml");
  record_twice(dir, "r1.xml", "r2.xml", 2);
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(3));
  pytest(dir, "r3.xml");
  ASSERT_EQ(run_spark({"record", "--junit", "r3.xml", "--no-localize"}, dir.path()).exit_code, 0);
  ASSERT_EQ(stored_cases(dir), 1u);
  // Turn the store into what schema 2 made of this history: two labelled failures, two cases in the corpus, no
  // occurrences; a person had accepted the later one.
  std::string earlier_id;
  {
    auto kb = KnowledgeBase::open(dir / ".spark", false);
    ASSERT_TRUE(kb);
    MiningStore store(**kb);
    auto dups = store.failures({FailureStatus::duplicate});
    ASSERT_TRUE(dups);
    ASSERT_EQ(dups->size(), 1u);
    ASSERT_TRUE((*dups)[0].labelled);  // the corpus's case, labelled from the last failing commit: the later one's
    auto kept = store.failures({FailureStatus::labelled});
    ASSERT_TRUE(kept);
    ASSERT_EQ(kept->size(), 1u);
    // Schema 2 labelled each failure from its own commit, under an id of its own.
    Case own = *(*kept)[0].labelled;
    const std::string from = own.faulty_commit.value_or("").substr(0, 10), to = (*kept)[0].commit.substr(0, 10);
    ASSERT_NE(from, to);
    own.id.replace(own.id.find(from), from.size(), to);
    own.faulty_commit = (*kept)[0].commit;
    own.record.erase("meta");
    own.record["id"] = own.id;
    earlier_id = own.id;
    ASSERT_TRUE((*kb)->import_cases({own}, {}, false));
  }
  const auto db = dir / ".spark" / "kb.sqlite";
  testing::run_sql(db,
      "UPDATE failures SET record = json_remove(record, '$.meta') WHERE record IS NOT NULL;"
      "UPDATE failures SET case_id = '" + earlier_id + "', record = json_set(record, '$.id', '" + earlier_id +
      "') WHERE status = 'labelled';"
      "UPDATE failures SET status = 'accepted', decided_by = 'Reviewer', decided_at = 1770000000, reason = 'real', "
      "duplicate_of = NULL WHERE status = 'duplicate';"
      "DROP INDEX failures_fault; ALTER TABLE failures DROP COLUMN fault_key; "
      "ALTER TABLE failures DROP COLUMN duplicate_of; PRAGMA user_version = 2;");
  {  // Before the upgrade (opening the store would upgrade it): two cases.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT count(*) FROM cases", -1, &st, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), 2);
    sqlite3_finalize(st);
    sqlite3_close(raw);
  }
  // Any command upgrades the store: one case, both failing commits behind it, the decision carried over.
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const auto c = nlohmann::json::parse(exported.out);
  EXPECT_EQ(c["meta"]["occurrences"]["count"], 2) << exported.out;
  EXPECT_EQ(stored_cases(dir), 1u);
  auto audit = run_spark({"audit", "--all", "--format", "json"}, dir.path());
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const auto listed = nlohmann::json::parse(audit.out)["cases"];
  ASSERT_EQ(listed.size(), 1u) << audit.out;
  EXPECT_EQ(listed[0]["status"], "accepted");
  EXPECT_EQ(listed[0]["decided_by"], "Reviewer");
  EXPECT_EQ(listed[0]["id"], c["id"]);
  // Nothing is lost: both failures are still stored, the later one pointing at the case kept.
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  ASSERT_TRUE(kb);
  MiningStore store(**kb);
  auto all = store.failures();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].status, FailureStatus::duplicate);
  EXPECT_EQ((*all)[1].duplicate_of, c["id"].get<std::string>());
}

TEST(spark_record, two_processes_at_once_lose_and_duplicate_nothing) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
  std::string tests;
  for (int i = 0; i < 30; ++i)
    tests += "def test_" + std::to_string(i) + "():\n    assert " + std::to_string(i) + " % 3 != 0\n\n\n";
  write_file(dir / "tests" / "test_many.py", tests);
  git(dir, "add -A");
  git(dir, "commit -m many", day(1));
  pytest(dir, "a.xml", "tests/test_many.py -k 'test_1 or test_2'");
  pytest(dir, "b.xml", "tests/test_many.py");
  // Four recorders at once, two of them on the same report.
  std::string cmd = "cd '" + dir.path().string() + "'";
  int n = 0;
  for (const char* r : {"a.xml", "b.xml", "b.xml", "a.xml"}) {
    ++n;
    cmd += "\n(" SPARK_BINARY " record --no-localize --junit " + std::string(r) + " 2> err" + std::to_string(n) +
           "; echo $? > rc" + std::to_string(n) + ") &";
  }
  cmd += "\nwait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (int i = 1; i <= 4; ++i)
    EXPECT_EQ(testing::slurp(dir / ("rc" + std::to_string(i))), "0\n") << testing::slurp(dir / ("err" + std::to_string(i)));
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  ASSERT_TRUE(kb) << kb.error().message;
  MiningStore store(**kb);
  EXPECT_EQ(*store.outcome_count(), 30u);
  auto open = store.failures({FailureStatus::open});
  ASSERT_TRUE(open);
  EXPECT_EQ(open->size(), 10u);  // 0, 3, …, 27: once each
}

// Cases learnt one at a time by `spark record`: the run whose fix labels the 20th case retrains the ranker, though it
// localizes nothing, and says so; no `spark index`.
TEST(spark_record, the_fix_that_labels_the_twentieth_case_retrains_the_ranker) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n*.jsonl\n.spark/\n__pycache__/\n");
  std::string earlier;  // 19 cases learnt before (imported), and an index over them: the prior ranker
  for (int i = 0; i < 19; ++i) earlier += testing::numbered_case(i).dump() + "\n";
  write_file(dir / "earlier.jsonl", earlier);
  ASSERT_EQ(run_spark({"import", "earlier.jsonl"}, dir.path()).exit_code, 0);
  pytest(dir, "r1.xml");
  auto r1 = run_spark({"record", "--junit", "r1.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_EQ(nlohmann::json::parse(r1.out)[0]["ranker"], "builtin (prior)") << r1.out;
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(2));
  pytest(dir, "r2.xml");
  auto r2 = run_spark({"record", "--junit", "r2.xml"}, dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("1 labelled into the knowledge base"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("spark: ranker retrained on 20 labelled cases (was prior) in "), std::string::npos) << r2.err;
  auto status = run_spark({"kb", "status"}, dir.path());
  EXPECT_NE(status.out.find("ranker: trained on 20 labelled cases (learnt at 20 labelled cases, "), std::string::npos)
      << status.out;
  // The next run has nothing new to learn from.
  auto r3 = run_spark({"record", "--junit", "r2.xml"}, dir.path());
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_EQ(r3.err.find("ranker"), std::string::npos) << r3.err;
}

// ---------------------------------------------------------------------------------------------------------------
// The post-commit hook.

TEST(spark_hooks, install_chains_an_existing_hook_and_records_after_each_commit) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n.spark/\n__pycache__/\nhook-ran\n");
  write_file(dir / ".spark.toml",
             "[record]\ntest_command = \"/usr/bin/python3 -B -m pytest -q -p no:cacheprovider --junitxml={junit} {tests}\"\n");
  ASSERT_EQ(run_spark({"trust"}, dir.path()).exit_code, 0);  // a command from the repository's file runs once trusted
  git(dir, "add -A");
  git(dir, "commit -m config", day(1));
  // The user's own hook, which must survive.
  const auto hooks = dir / ".git" / "hooks";
  write_file(hooks / "post-commit", "#!/bin/sh\necho ran >> hook-ran\n");
  ASSERT_EQ(std::system(("chmod +x '" + (hooks / "post-commit").string() + "'").c_str()), 0);
  auto install = run_spark({"hooks", "install"}, dir.path());
  ASSERT_EQ(install.exit_code, 0) << install.err;
  EXPECT_NE(install.err.find("kept your post-commit hook"), std::string::npos) << install.err;
  auto twice = run_spark({"hooks", "install"}, dir.path());
  ASSERT_EQ(twice.exit_code, 0) << twice.err;
  EXPECT_NE(twice.err.find("already installed"), std::string::npos) << twice.err;
  EXPECT_NE(testing::slurp(hooks / "post-commit.spark-chained").find("echo ran"), std::string::npos);
  // CI recorded the failure; the fix is committed locally; the hook re-runs the test and labels the failure.
  pytest(dir, "r1.xml");
  ASSERT_EQ(run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path()).exit_code, 0);
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(2));
  EXPECT_NE(testing::slurp(dir / "hook-ran").find("ran"), std::string::npos);  // the chained hook ran
  EXPECT_EQ(stored_cases(dir), 1u);
  // Uninstall puts the user's hook back.
  ASSERT_EQ(run_spark({"hooks", "uninstall"}, dir.path()).exit_code, 0);
  EXPECT_NE(testing::slurp(hooks / "post-commit").find("echo ran"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(hooks / "post-commit.spark-chained"));
}

// ---------------------------------------------------------------------------------------------------------------
// The CI loop on failures as pytest reports them at its defaults: test code beyond the test file, parametrized rows,
// collection errors.

// A repository for the CI loop's tests: reports, the knowledge base and Python's caches ignored.
void ci_repo(const TempDir& dir) {
  git(dir, "init");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
}

// Runs pytest at its defaults into `report` and records it with `args`.
testing::RunResult pytest_and_record(const TempDir& dir, const std::string& report, std::vector<std::string> args) {
  pytest(dir, report);
  args.insert(args.begin(), {"record", "--junit", report});
  return run_spark(args, dir.path());
}

// The exported cases by test id.
std::map<std::string, nlohmann::json> exported_cases(const TempDir& dir) {
  auto exported = run_spark({"export"}, dir.path());
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  std::map<std::string, nlohmann::json> out;
  for (std::string_view line : split_lines(exported.out))
    if (!line.empty()) {
      auto c = without_fixes(nlohmann::json::parse(line));
      out[c["test_id"].get<std::string>()] = c;
    }
  return out;
}

TEST(spark_record, a_fixture_fault_fixed_in_conftest_and_a_helper_fault_fixed_in_its_module_are_test_code_faults) {
  TempDir dir;
  ci_repo(dir);
  const std::string conftest =
      "import pytest\n\n\n@pytest.fixture\ndef prices():\n    return {'apple': 3, 'pear': 2}\n\n\n@pytest.fixture\n"
      "def colors():\n    return ['red']\n";
  write_file(dir / "tests" / "conftest.py", conftest);
  write_file(dir / "tests" / "helpers.py", "def double(x):\n    return x * 3\n");
  write_file(dir / "tests" / "test_shop.py",
             "from helpers import double\n\n\ndef test_apple(prices):\n    assert prices['apple'] == 2\n\n\n"
             "def test_total(prices):\n    assert sum(prices.values()) == 4\n\n\ndef test_pear(prices):\n"
             "    assert prices['pear'] == 2\n\n\ndef test_double():\n    assert double(2) == 4\n");
  git(dir, "add -A");
  git(dir, "commit -m shop", day(1));
  auto r1 = pytest_and_record(dir, "r1.xml", {"--no-localize"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("opened 3 failures"), std::string::npos) << r1.err;
  // The fixture is fixed in conftest.py (and another fixture changed there, which these tests do not use): both
  // failures it caused are labelled there, at the fixture's line.
  std::string fixed = conftest;
  fixed.replace(fixed.find("'apple': 3"), 10, "'apple': 2");
  fixed.replace(fixed.find("['red']"), 7, "['red', 'green']");
  write_file(dir / "tests" / "conftest.py", fixed);
  git(dir, "commit -am fix-fixture", day(2));
  auto r2 = pytest_and_record(dir, "r2.xml", {"--no-localize"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  // One fault, one case: the fixture's line for both tests, the case naming both.
  EXPECT_NE(r2.err.find("settled 2 failures: 1 labelled into the knowledge base, 1 the same fault as an earlier "
                        "failure"),
            std::string::npos)
      << r2.err;
  auto cases = exported_cases(dir);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases.begin()->second["tests"],
            nlohmann::json({"tests/test_shop.py::test_apple", "tests/test_shop.py::test_total"}));
  {
    const char* id = "tests/test_shop.py::test_apple";  // the earliest failure (same time: the first id) keeps it
    ASSERT_TRUE(cases.contains(id)) << id;
    EXPECT_EQ(cases[id]["faulty_lines"], nlohmann::json::parse(R"([{"path":"tests/conftest.py","line":6}])"))
        << cases[id].dump();
    // The case holds the test file and the fixed conftest.py; helpers.py, unchanged, is not part of it.
    ASSERT_EQ(cases[id]["files"].size(), 2u);
    EXPECT_EQ(cases[id]["files"][0]["path"], "tests/test_shop.py");
    EXPECT_EQ(cases[id]["files"][1]["path"], "tests/conftest.py");
    EXPECT_NE(cases[id]["files"][1]["content"].get<std::string>().find("'apple': 3"), std::string::npos);
  }
  // The helper module the test imports is fixed: labelled at its line.
  write_file(dir / "tests" / "helpers.py", "def double(x):\n    return x * 2\n");
  git(dir, "commit -am fix-helper", day(3));
  auto r3 = pytest_and_record(dir, "r3.xml", {"--no-localize"});
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  // test_double failed at both commits with the same test code (the fixture it does not use changed in between):
  // one fault, labelled at the helper's line.
  EXPECT_NE(r3.err.find("settled 2 failures: 1 labelled into the knowledge base, 1 the same fault"),
            std::string::npos) << r3.err;
  cases = exported_cases(dir);
  ASSERT_TRUE(cases.contains("tests/test_shop.py::test_double"));
  EXPECT_EQ(cases["tests/test_shop.py::test_double"]["faulty_lines"],
            nlohmann::json::parse(R"([{"path":"tests/helpers.py","line":2}])"));
  // The helper breaks again, below an assertion whose traceback names only the test: the imported module is read
  // with the test, the function it calls ranked as its set-up, and the helper's learnt line weighs for it.
  write_file(dir / "tests" / "helpers.py",
             "def double(x):\n    return x * 2.5\n\n\ndef triple(x):\n    return x + x + x\n");
  git(dir, "commit -am break-helper", day(4));
  auto r4 = pytest_and_record(dir, "r4.xml", {"--format", "json"});
  ASSERT_EQ(r4.exit_code, 0) << r4.err;
  const auto localized = nlohmann::json::parse(r4.out);
  ASSERT_EQ(localized.size(), 1u) << r4.out;
  std::vector<std::string> ranked;
  for (const auto& e : localized[0]["ranked"]) {
    ranked.push_back(e["path"].get<std::string>() + ":" + std::to_string(e["line"].get<int>()));
    if (ranked.back() == "tests/helpers.py:2") {
      std::string reasons;
      for (const auto& why : e["reasons"]) reasons += why.get<std::string>() + "\n";
      EXPECT_NE(reasons.find("in set-up, a fixture or a helper the failing test uses"), std::string::npos) << reasons;
    }
  }
  const auto helper = std::find(ranked.begin(), ranked.end(), "tests/helpers.py:2");
  EXPECT_LT(helper - ranked.begin(), 3) << r4.out;
  // Another helper, which the test does not call, is other tests' code.
  EXPECT_LT(helper, std::find(ranked.begin(), ranked.end(), "tests/helpers.py:6")) << r4.out;
  // mine.test_code names what test code is: with only the test files, the helper's fix is outside the test code.
  TempDir other;
  ci_repo(other);
  for (const char* f : {"tests/conftest.py", "tests/test_shop.py"})
    write_file(other / f, testing::slurp(dir / f));
  write_file(other / "tests" / "helpers.py", "def double(x):\n    return x * 3\n");
  write_file(other / ".spark.toml", "[mine]\ntest_code = \"test_*.py, conftest.py\"\n");
  git(other, "add -A");
  git(other, "commit -m shop", day(1));
  ASSERT_EQ(pytest_and_record(other, "r1.xml", {"--no-localize"}).exit_code, 0);
  write_file(other / "tests" / "helpers.py", "def double(x):\n    return x * 2\n");
  git(other, "commit -am fix-helper", day(2));
  auto narrow = pytest_and_record(other, "r2.xml", {"--no-localize"});
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_NE(narrow.err.find("1 fixed outside the test code"), std::string::npos) << narrow.err;
  write_file(other / ".spark.toml", "[mine]\ntest_code = \"/etc/**\"\n");
  auto bad = run_spark({"record", "--junit", "r2.xml", "--no-localize"}, other.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("mine.test_code: \"/etc/**\" is not a glob of paths inside the repository"),
            std::string::npos) << bad.err;
}

const char* kTable =
    "import pytest\n\n\n@pytest.mark.parametrize('a,b,c', [\n    (1, 2, 2),\n    (2, 3, 7),\n    (3, 3, 9),\n])\n"
    "def test_table(a, b, c):\n    assert a * b == c\n";

TEST(spark_record, a_parametrized_rows_fault_is_closed_by_its_functions_pass_and_labelled_at_the_row) {
  TempDir dir;
  ci_repo(dir);
  write_file(dir / ".spark.toml",
             "[record]\ntest_command = \"/usr/bin/python3 -B -m pytest -q -p no:cacheprovider --junitxml={junit} "
             "{tests}\"\n");
  ASSERT_EQ(run_spark({"trust"}, dir.path()).exit_code, 0);
  write_file(dir / "tests" / "test_table.py", kTable);
  write_file(dir / "tests" / "test_other.py", "def test_other():\n    assert 'x'.upper() == 'Y'\n");
  git(dir, "add -A");
  git(dir, "commit -m table", day(1));
  auto r1 = pytest_and_record(dir, "r1.xml", {"--format", "json"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("opened 2 failures"), std::string::npos) << r1.err;
  // A note both failures share is said once, with their count.
  const std::string empty_kb = "the knowledge base has no labelled case yet";
  EXPECT_NE(r1.err.find("2 failures: " + empty_kb), std::string::npos) << r1.err;
  EXPECT_EQ(r1.err.find(empty_kb), r1.err.rfind(empty_kb)) << r1.err;
  const auto all = nlohmann::json::parse(r1.out);
  ASSERT_EQ(all.size(), 2u) << r1.out;
  nlohmann::json table;
  for (const auto& one : all)
    if (one["test_id"] == "tests/test_table.py::test_table[2-3-7]") table = one;
  ASSERT_TRUE(table.is_object()) << r1.out;
  // The other rows are another test's data: ranked after the failing row and the rest of the test's own lines (the
  // decorator's first and last lines).
  std::map<int, size_t> rank;
  for (size_t i = 0; i < table["ranked"].size(); ++i) rank.emplace(table["ranked"][i]["line"].get<int>(), i);
  ASSERT_TRUE(rank.contains(6)) << table.dump();
  for (int sibling : {5, 7})
    for (int own : {4, 6, 8})
      if (rank.contains(sibling) && rank.contains(own)) {
        EXPECT_LT(rank[own], rank[sibling]) << table.dump();
      }
  // The row is fixed, so its id is gone; the post-commit hook re-runs the function (not the stale id pytest cannot
  // find), the function passes, and both open failures are labelled.
  ASSERT_EQ(run_spark({"hooks", "install"}, dir.path()).exit_code, 0);
  std::string fixed = kTable;
  fixed.replace(fixed.find("(2, 3, 7)"), 9, "(2, 3, 6)");
  write_file(dir / "tests" / "test_table.py", fixed);
  write_file(dir / "tests" / "test_other.py", "def test_other():\n    assert 'x'.upper() == 'X'\n");
  git(dir, "commit -am fix-row", day(2));
  auto cases = exported_cases(dir);
  ASSERT_EQ(cases.size(), 2u) << testing::slurp(dir / ".git" / "hooks" / "post-commit");
  ASSERT_TRUE(cases.contains("tests/test_table.py::test_table[2-3-7]"));
  EXPECT_EQ(cases["tests/test_table.py::test_table[2-3-7]"]["faulty_lines"],
            nlohmann::json::parse(R"([{"path":"tests/test_table.py","line":6}])"));
  EXPECT_EQ(cases["tests/test_other.py::test_other"]["faulty_lines"],
            nlohmann::json::parse(R"([{"path":"tests/test_other.py","line":2}])"));
}

TEST(spark_record, a_parametrized_failure_stays_open_while_a_row_of_its_function_fails_and_ids_may_hold_anything) {
  TempDir dir;
  ci_repo(dir);
  const std::string odd =
      "import pytest\n\n\n@pytest.mark.parametrize('x,y', [\n    ('a::b[c', 'é\\nz'),\n    (1, 2),\n])\n"
      "def test_odd(x, y):\n    assert x * 2 == y\n";
  write_file(dir / "tests" / "test_odd.py", odd);
  git(dir, "add -A");
  git(dir, "commit -m odd", day(1));
  auto r1 = pytest_and_record(dir, "r1.xml", {"--format", "json"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("opened 1 failure"), std::string::npos) << r1.err;
  const auto loc = nlohmann::json::parse(r1.out);
  ASSERT_EQ(loc.size(), 1u);
  EXPECT_EQ(loc[0]["test_id"], "tests/test_odd.py::test_odd[a::b[c-\\xe9\\nz]");
  // The failing row changes (a new id), but another row of the function now fails: not fixed yet.
  std::string half = odd;
  const std::string row = "('a::b[c', 'é\\nz')";
  half.replace(half.find(row), row.size(), "('q', 'qq')");
  half.replace(half.find("(1, 2)"), 6, "(1, 3)");
  write_file(dir / "tests" / "test_odd.py", half);
  git(dir, "commit -am half", day(2));
  auto r2 = pytest_and_record(dir, "r2.xml", {"--no-localize"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("settled 0 failures; 2 tests still open (not fixed yet)"), std::string::npos) << r2.err;
  half.replace(half.find("(1, 3)"), 6, "(1, 2)");
  write_file(dir / "tests" / "test_odd.py", half);
  git(dir, "commit -am whole", day(3));
  auto r3 = pytest_and_record(dir, "r3.xml", {"--no-localize"});
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_NE(r3.err.find("2 labelled into the knowledge base; 0 tests still open"), std::string::npos) << r3.err;
  auto cases = exported_cases(dir);
  ASSERT_TRUE(cases.contains("tests/test_odd.py::test_odd[a::b[c-\\xe9\\nz]"));
  EXPECT_EQ(cases["tests/test_odd.py::test_odd[a::b[c-\\xe9\\nz]"]["faulty_lines"][0]["line"], 5);
}

TEST(spark_record, a_list_built_by_a_call_gets_a_note) {
  TempDir dir;
  ci_repo(dir);
  write_file(dir / "tests" / "test_built.py",
             "import pytest\n\n\ndef rows():\n    return [(1, 2), (2, 5)]\n\n\n@pytest.mark.parametrize('x,y', rows())\n"
             "def test_built(x, y):\n    assert x * 2 == y\n");
  git(dir, "add -A");
  git(dir, "commit -m built", day(1));
  auto r1 = pytest_and_record(dir, "r1.xml", {"--format", "json"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("test_built: its parametrize list is not written as rows (rows()); the failing row of 2-5 is "
                        "not known"),
            std::string::npos)
      << r1.err;
  EXPECT_EQ(nlohmann::json::parse(r1.out).size(), 1u);
}

TEST(spark_record, a_collection_error_is_localized_at_the_import_and_closed_when_the_module_collects_and_passes) {
  TempDir dir;
  ci_repo(dir);
  write_file(dir / "tests" / "calc_helpers.py", "def halve(x):\n    return x / 2\n");
  const std::string good = "import math\nfrom calc_helpers import halve\n\n\ndef test_halve():\n    assert halve(4) == 2\n"
                           "\n\ndef test_sqrt():\n    assert math.sqrt(halve(8)) == 2\n";
  std::string broken = good;
  broken.replace(broken.find("import halve\n"), 13, "import half\n");
  write_file(dir / "tests" / "test_calc.py", broken);
  write_file(dir / "tests" / "test_more.py", "def test_more():\n    assert True\n");
  git(dir, "add -A");
  git(dir, "commit -m calc", day(1));
  // pytest stops at the collection error: the report holds only it.
  auto r1 = pytest_and_record(dir, "r1.xml", {"--format", "json"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_NE(r1.err.find("recorded 1 outcome (new or changed); opened 1 failure"), std::string::npos) << r1.err;
  EXPECT_EQ(r1.err.find("not localized"), std::string::npos) << r1.err;
  const auto loc = nlohmann::json::parse(r1.out);
  ASSERT_EQ(loc.size(), 1u) << r1.out;
  EXPECT_EQ(loc[0]["test_id"], "tests/test_calc.py");
  ASSERT_FALSE(loc[0]["ranked"].empty());
  EXPECT_EQ(loc[0]["ranked"][0]["line"], 2) << loc[0].dump();
  // A commit that changes nothing in the module: still a collection error, still open.
  write_file(dir / "NOTES", "x\n");
  git(dir, "add -A");
  git(dir, "commit -m notes", day(2));
  auto r2 = pytest_and_record(dir, "r2.xml", {"--no-localize"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("settled 0 failures; 1 test still open (2 failures at 2 commits; not fixed yet)"),
            std::string::npos)
      << r2.err;
  // The import is fixed: the module collects, its tests pass, the failures close, labelled at the import.
  write_file(dir / "tests" / "test_calc.py", good);
  git(dir, "commit -am fix-import", day(3));
  auto r3 = pytest_and_record(dir, "r3.xml", {"--no-localize"});
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_NE(r3.err.find("0 tests still open"), std::string::npos) << r3.err;
  auto cases = exported_cases(dir);
  ASSERT_EQ(cases.size(), 1u);
  ASSERT_TRUE(cases.contains("tests/test_calc.py"));
  EXPECT_EQ(cases["tests/test_calc.py"]["faulty_lines"],
            nlohmann::json::parse(R"([{"path":"tests/test_calc.py","line":2}])"));
}

// `path` committed with `bad` put in place of `good_part` in `good`: recorded, the failure of `test_id` is localized
// at `line` first; `good` committed: the failure closes, labelled at `line`.
void localized_and_labelled_at(const std::string& path, const std::string& good, const std::string& good_part,
                               const std::string& bad, const std::string& test_id, int line) {
  TempDir dir;
  ci_repo(dir);
  std::string broken = good;
  broken.replace(broken.find(good_part), good_part.size(), bad);
  write_file(dir / path, broken);
  git(dir, "add -A");
  git(dir, "commit -m broken", day(1));
  auto r1 = pytest_and_record(dir, "r1.xml", {"--format", "json"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  const auto loc = nlohmann::json::parse(r1.out);
  ASSERT_EQ(loc.size(), 1u) << r1.out;
  EXPECT_EQ(loc[0]["test_id"], test_id);
  ASSERT_FALSE(loc[0]["ranked"].empty());
  EXPECT_EQ(loc[0]["ranked"][0]["line"], line) << loc[0].dump();
  write_file(dir / path, good);
  git(dir, "commit -am fix", day(2));
  auto r2 = pytest_and_record(dir, "r2.xml", {"--no-localize"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("settled 1 failure: 1 labelled into the knowledge base; 0 tests still open"), std::string::npos)
      << r2.err;
  EXPECT_EQ(exported_cases(dir)[test_id]["faulty_lines"],
            nlohmann::json::array({{{"path", path}, {"line", line}}}));
}

TEST(spark_record, a_syntax_error_in_a_test_file_is_localized_at_its_line_and_closed_by_its_fix) {
  localized_and_labelled_at("tests/test_path.py",
                            "import os\n\n\ndef test_path(tmp_path):\n    assert os.path.isdir(tmp_path)\n",
                            "(tmp_path):", "(tmp_path:", "tests/test_path.py", 4);
}

// A fixture not found: the signature is what failed, a header not demoted there.
TEST(spark_record, a_fixture_not_found_is_localized_at_the_def_line_and_labelled_there) {
  localized_and_labelled_at("tests/test_cart.py",
                            "import pytest\n\n\n@pytest.fixture\ndef cart():\n    return []\n\n\n"
                            "def test_empty(cart):\n    size = len(cart)\n    assert size == 0\n",
                            "test_empty(cart)", "test_empty(carts)", "tests/test_cart.py::test_empty", 9);
}

// ---------------------------------------------------------------------------------------------------------------
// The knowledge base found like .git, from any subdirectory.

std::string git_output(const TempDir& dir, const std::string& args) {
  std::FILE* p = ::popen(("git -C '" + dir.path().string() + "' " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[256];
  for (size_t n; p && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (p) ::pclose(p);
  return out;
}

TEST(spark_kb_found, record_from_a_subdirectory_uses_the_repository_tops_store_with_its_gitignore) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n__pycache__/\n");  // .spark/ not ignored here: its own .gitignore does it
  pytest(dir, "r1.xml");
  const auto tests = dir / "tests";
  auto r1 = run_spark({"record", "--junit", "../r1.xml", "--no-localize"}, tests);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_TRUE(std::filesystem::exists(dir / ".spark" / "kb.sqlite"));
  EXPECT_FALSE(std::filesystem::exists(tests / ".spark"));
  EXPECT_EQ(testing::slurp(dir / ".spark" / ".gitignore"), "*\n");
  EXPECT_EQ(git_output(dir, "status --porcelain --untracked-files=all"), "");
  // Which store, and why, from the subdirectory.
  auto status = run_spark({"kb", "status"}, tests);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("store: " + (dir / ".spark" / "kb.sqlite").string()), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("chosen by: default: the nearest .spark holding a knowledge base, up to the git work "
                            "tree's top " + dir.path().string()),
            std::string::npos) << status.out;
  EXPECT_NE(status.out.find("open failures: 1 (in 1 test(s)"), std::string::npos) << status.out;
  // Bad input: a subdirectory with its own unrelated .spark folder (no knowledge base in it) is passed by.
  const auto sub = tests / "data";
  write_file(sub / ".spark" / "notes.txt", "not spark's\n");
  auto from_sub = run_spark({"record", "--junit", "../../r1.xml", "--no-localize"}, sub);
  ASSERT_EQ(from_sub.exit_code, 0) << from_sub.err;
  EXPECT_NE(from_sub.err.find("recorded 0 outcomes"), std::string::npos) << from_sub.err;  // the top's, seen before
  EXPECT_FALSE(std::filesystem::exists(sub / ".spark" / "kb.sqlite"));
  EXPECT_FALSE(std::filesystem::exists(sub / ".spark" / ".gitignore"));
  // A nearer .spark that holds a knowledge base wins, as the nearest .git does; `spark config` says which.
  ASSERT_EQ(run_spark({"--kb", (sub / ".spark").string(), "kb", "init"}, dir.path()).exit_code, 0);
  auto nearest = run_spark({"config"}, sub);
  EXPECT_NE(nearest.out.find("kb = \".spark\"    # from default: the nearest .spark"), std::string::npos)
      << nearest.out;  // the working directory's own (the top's would be named by its absolute path)
  auto top = run_spark({"config"}, tests);
  EXPECT_NE(top.out.find("kb = \"" + (dir / ".spark").string() + "\""), std::string::npos) << top.out;
  // --kb and SPARK_KB still win.
  ::setenv("SPARK_KB", "from-env", 1);
  auto env = run_spark({"config"}, sub);
  ::unsetenv("SPARK_KB");
  EXPECT_NE(env.out.find("kb = \"from-env\"    # from env SPARK_KB"), std::string::npos) << env.out;
  // .spark.toml marks the project's top too (nearest wins), and a relative kb in it is the file's folder's.
  write_file(tests / ".spark.toml", "kb = \"store\"\n");
  auto toml = run_spark({"config"}, sub);
  EXPECT_NE(toml.out.find("kb = \"" + (tests / "store").string() + "\""), std::string::npos) << toml.out;
  std::filesystem::remove(tests / ".spark.toml");
  write_file(tests / ".spark.toml", "[localize]\nk = 3\n");
  auto beside = run_spark({"config"}, tests);
  EXPECT_NE(beside.out.find("kb = \".spark\"    # from default: the folder of " +
                            (tests / ".spark.toml").string()),
            std::string::npos) << beside.out;
}

// ---------------------------------------------------------------------------------------------------------------
// spark failures: the open failures, dismissed and expired.

TEST(spark_failures, lists_shows_dismisses_and_expires_open_failures) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n.spark/\n__pycache__/\n");
  write_file(dir / "tests" / "test_old.py", "def test_gone():\n    assert 1 == 2\n");
  write_file(dir / "tests" / "test_ren.py", "def test_renamed():\n    assert 0, 'renamed soon'\n");
  write_file(dir / "tests" / "test_p.py",
             "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2])\ndef test_rows(n):\n    assert n == 1\n");
  git(dir, "add -A");
  git(dir, "commit -m more", day(2));
  pytest(dir, "r1.xml");
  {  // The first run as if it had been on 2026-02-02 (pytest writes local time without a zone, read as UTC).
    std::string report = testing::slurp(dir / "r1.xml");
    const size_t at = report.find("timestamp=\"") + 11;
    report.replace(at, report.find('"', at) - at, "2026-02-02T00:00:00");
    write_file(dir / "r1.xml", report);
  }
  record_twice(dir, "r1.xml", "r2.xml", 3);
  // Four tests failing at two commits each: four open failures, one commit old.
  auto list = run_spark({"failures", "list", "--format", "json"}, dir.path());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto j = nlohmann::json::parse(list.out);
  for (const auto& problem : testing::validate_json(j, testing::schema_file("failures.schema.json")))
    ADD_FAILURE() << problem;
  EXPECT_EQ(j["head"], testing::head_sha(dir));
  std::map<std::string, nlohmann::json> by_test;
  for (const auto& f : j["failures"]) by_test[f["test_id"]] = f;
  ASSERT_EQ(by_test.size(), 4u) << list.out;
  const auto& rows = by_test["tests/test_p.py::test_rows[2]"];
  EXPECT_EQ(rows["commits"], 2);
  EXPECT_EQ(rows["age_commits"], 1);
  EXPECT_NEAR(rows["age_days"].get<double>(), static_cast<double>(std::time(nullptr) - 1769990400) / 86400, 0.2);
  EXPECT_EQ(rows["last_commit"], testing::head_sha(dir));
  EXPECT_EQ(by_test["tests/test_calc.py::test_sum"]["error_line"], "AssertionError: assert 7 == 6") << list.out;
  auto text = run_spark({"failures"}, dir.path());
  EXPECT_NE(text.out.find("4 test(s) with open failures"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(rows["id"].get<std::string>() + "  tests/test_p.py::test_rows[2]\n    first failed at "),
            std::string::npos) << text.out;
  // show: the whole record.
  const std::string calc = by_test["tests/test_calc.py::test_sum"]["id"];
  auto show = run_spark({"failures", "show", calc.substr(0, 8)}, dir.path());
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("failed at:     2 commit(s)"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("assert 7 == 6"), std::string::npos) << show.out;
  auto show_json = run_spark({"failures", "show", "tests/test_calc.py::test_sum", "--format", "json"}, dir.path());
  const auto shown = nlohmann::json::parse(show_json.out);
  for (const auto& problem : testing::validate_json(shown, testing::schema_file("failures.schema.json")))
    ADD_FAILURE() << problem;
  EXPECT_EQ(shown["failures"][0]["id"], calc);
  // dismiss: closed, kept, no longer listed nor counted.
  auto dismiss = run_spark({"failures", "dismiss", calc, "--author", "Me", "--reason", "won't fix"}, dir.path());
  ASSERT_EQ(dismiss.exit_code, 0) << dismiss.err;
  EXPECT_NE(dismiss.err.find("dismissed 2 open failure(s) of tests/test_calc.py::test_sum"), std::string::npos)
      << dismiss.err;
  auto closed = nlohmann::json::parse(run_spark({"failures", "show", calc, "--format", "json"}, dir.path()).out);
  EXPECT_EQ(closed["failures"][0]["status"], "dismissed");
  EXPECT_EQ(closed["failures"][0]["closed_by"], "Me");
  EXPECT_EQ(closed["failures"][0]["reason"], "won't fix");
  auto again = run_spark({"failures", "dismiss", calc}, dir.path());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("only open failures can be dismissed"), std::string::npos) << again.err;
  EXPECT_NE(run_spark({"kb", "status"}, dir.path()).out.find("open failures: 6 (in 3 test(s)"), std::string::npos);
  // record expires the failures of a test whose file is gone, with a note.
  std::filesystem::remove(dir / "tests" / "test_old.py");
  git(dir, "add -A");
  git(dir, "commit -m drop-old", day(4));
  pytest(dir, "r3.xml");
  auto r3 = run_spark({"record", "--junit", "r3.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_NE(r3.err.find("expired 2 open failure(s) of tests/test_old.py::test_gone: its test file "
                        "tests/test_old.py is not in commit"),
            std::string::npos) << r3.err;
  // expire: a test function renamed away; a parametrized row whose function is still there stays open.
  write_file(dir / "tests" / "test_ren.py", "def test_new_name():\n    assert 0, 'renamed soon'\n");
  git(dir, "commit -am rename", day(5));
  auto expire = run_spark({"failures", "expire"}, dir.path());
  ASSERT_EQ(expire.exit_code, 0) << expire.err;
  EXPECT_NE(expire.err.find("expired 3 open failure(s) of tests/test_ren.py::test_renamed: tests/test_ren.py no "
                            "longer defines test_renamed"),
            std::string::npos) << expire.err;
  // Left open: the row (failing at three commits), and test_sum, which failed again after its dismissal (a new
  // failure at a new commit).
  auto left = nlohmann::json::parse(run_spark({"failures", "--format", "json"}, dir.path()).out);
  ASSERT_EQ(left["failures"].size(), 2u) << left.dump();
  EXPECT_EQ(left["failures"][0]["test_id"], "tests/test_p.py::test_rows[2]");
  EXPECT_EQ(left["failures"][0]["age_commits"], 3);
  EXPECT_EQ(left["failures"][0]["commits"], 3);
  EXPECT_EQ(left["failures"][1]["test_id"], "tests/test_calc.py::test_sum");
  EXPECT_EQ(left["failures"][1]["age_commits"], 1);
  EXPECT_NE(run_spark({"kb", "status"}, dir.path()).out.find("open failures: 4 (in 2 test(s)"), std::string::npos);
  // Bad input.
  auto unknown = run_spark({"failures", "show", "nope"}, dir.path());
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no failure \"nope\""), std::string::npos) << unknown.err;
  EXPECT_EQ(run_spark({"failures", "dismiss"}, dir.path()).exit_code, 2);
}

TEST(test_gone_at, a_missing_file_or_a_function_neither_defined_nor_named_in_it) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / "tests" / "test_m.py", "def test_a(n):\n    assert n\n");
  // A test made by a factory: pytest collects it, no `def` names it.
  write_file(dir / "tests" / "test_made.py", "from tests.helpers import make_test\n\ntest_half = make_test(2)\n");
  git(dir, "add -A");
  git(dir, "commit -m tests", day(1));
  auto repo = GitRepository::open(dir.path());
  ASSERT_TRUE(repo);
  const std::string sha = testing::head_sha(dir);
  EXPECT_FALSE(test_gone_at(**repo, sha, "tests/test_m.py::test_a"));
  EXPECT_FALSE(test_gone_at(**repo, sha, "tests/test_m.py::test_a[1-2]"));  // a row of the function
  EXPECT_FALSE(test_gone_at(**repo, sha, "tests/test_m.py"));               // a module's collection error
  EXPECT_FALSE(test_gone_at(**repo, sha, "tests/test_made.py::test_half"));  // not a def, but named in its file
  EXPECT_EQ(test_gone_at(**repo, sha, "tests/test_m.py::test_b").value_or(""),
            "tests/test_m.py no longer defines test_b at commit " + sha.substr(0, 10));
  EXPECT_EQ(test_gone_at(**repo, sha, "tests/test_gone.py").value_or(""),
            "its test file tests/test_gone.py is not in commit " + sha.substr(0, 10));
}

// A failure recorded on another branch is not expired by HEAD's test files.
TEST(spark_failures, expire_leaves_failures_of_commits_outside_heads_history) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n.spark/\n__pycache__/\n");
  git(dir, "checkout -b feature");
  write_file(dir / "tests" / "test_new.py", "def test_feature():\n    assert False\n");
  git(dir, "add -A");
  git(dir, "commit -m feature", day(2));
  pytest(dir, "r1.xml");
  ASSERT_EQ(run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path()).exit_code, 0);
  git(dir, "checkout main");
  auto expire = run_spark({"failures", "expire"}, dir.path());
  ASSERT_EQ(expire.exit_code, 0) << expire.err;
  EXPECT_NE(expire.err.find("no open failure's test is gone at HEAD"), std::string::npos) << expire.err;
  auto list = nlohmann::json::parse(run_spark({"failures", "--format", "json"}, dir.path()).out);
  EXPECT_EQ(list["failures"].size(), 2u) << list.dump();
  for (const auto& f : list["failures"]) EXPECT_TRUE(f["age_commits"].is_null()) << f.dump();
}

// ---------------------------------------------------------------------------------------------------------------
// Running tests: the command runner and --run bisection.

TEST(test_runner, exit_codes_timeouts_and_signals) {
  TempDir dir;
  auto ok = run_command("echo hello; echo world >&2", dir.path(), 10);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->passed());
  EXPECT_NE(ok->output.find("hello\nworld"), std::string::npos);
  auto failed = run_command("echo nope; exit 3", dir.path(), 10);
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed->passed());
  EXPECT_EQ(failed->describe(), "exit 3");
  auto hang = run_command("echo start; sleep 30", dir.path(), 0.5);
  ASSERT_TRUE(hang);
  EXPECT_TRUE(hang->timed_out);
  EXPECT_LT(hang->seconds, 5.0);
  EXPECT_NE(hang->output.find("start"), std::string::npos);
  auto killed = run_command("kill -9 $$", dir.path(), 10);
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->signal, 9);
  EXPECT_NE(killed->describe().find("killed by signal 9"), std::string::npos);
  // A background child holding the output open does not keep the run alive.
  auto bg = run_command("sleep 30 & echo done", dir.path(), 10);
  ASSERT_TRUE(bg);
  EXPECT_TRUE(bg->passed());
  EXPECT_LT(bg->seconds, 5.0);
  EXPECT_EQ(expand_command("pytest {test_id}", {"tests/a b.py::t"}), "pytest 'tests/a b.py::t'");
  EXPECT_EQ(expand_command("x {tests} --junitxml={junit}", {"a", "it's"}, "/r.xml"),
            "x 'a' 'it'\\''s' --junitxml='/r.xml'");
}

TEST(spark_mine_run, bisects_to_the_first_passing_commit_with_real_pytest) {
  TempDir dir;
  broken_calc_repo(dir, "");
  const std::string from = head_sha(dir);
  for (int i = 2; i <= 6; ++i) {
    write_file(dir / ("notes" + std::to_string(i)), "x\n");
    git(dir, "add -A");
    git(dir, "commit -m notes" + std::to_string(i), day(i));
  }
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(7));
  const std::string fix = head_sha(dir);
  for (int i = 8; i <= 12; ++i) {
    write_file(dir / ("more" + std::to_string(i)), "x\n");
    git(dir, "add -A");
    git(dir, "commit -m more" + std::to_string(i), day(i));
  }
  auto r = run_spark({"mine", "--run", "/usr/bin/python3 -B -m pytest -q -p no:cacheprovider {test_id}", "--test",
                      "tests/test_calc.py::test_sum", "--from", from.substr(0, 10), "-o", "cases.jsonl"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("first passing commit " + fix.substr(0, 10)), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("FLAKY"), std::string::npos) << r.err;
  // 12 commits after `from`: 2 ends + ceil(log2 12) = 4 probes + 2 checks at most.
  size_t runs = 0;
  for (size_t at = r.err.find("spark: run: "); at != std::string::npos; at = r.err.find("spark: run: ", at + 1)) ++runs;
  EXPECT_LE(runs, 8u) << r.err;
  auto cases = read_cases_jsonl(dir / "cases.jsonl");
  ASSERT_TRUE(cases) << cases.error().message;
  ASSERT_EQ(cases->cases.size(), 1u);
  EXPECT_EQ(cases->cases[0].faulty_lines.at(0).line, 2);
  EXPECT_EQ(*cases->cases[0].fixed_commit, fix);
  EXPECT_NE(cases->cases[0].error_message.find("assert 7 == 6"), std::string::npos);  // the run's output
  // Only pytest's failure section is kept: no progress line, no summary.
  EXPECT_EQ(cases->cases[0].error_message.find("[100%]"), std::string::npos) << cases->cases[0].error_message;
  EXPECT_EQ(cases->cases[0].error_message.find("1 failed"), std::string::npos) << cases->cases[0].error_message;
  // The repository's own work tree was not touched.
  EXPECT_EQ(testing::slurp(dir / "tests" / "test_calc.py"), kGood);
}

TEST(classify_run, tells_a_test_failure_from_a_run_that_could_not_run_the_test) {
  const auto verdict = [](int exit_code, const std::string& output) {
    CommandResult r;
    r.exit_code = exit_code;
    r.output = output;
    return classify_run(r, "tests/test_x.py::test_f");
  };
  EXPECT_EQ(verdict(0, "").verdict, RunVerdict::passed);
  EXPECT_EQ(verdict(1, "F [100%]\nE assert 1 == 2\n1 failed").verdict, RunVerdict::failed);
  const auto missing = verdict(127, "sh: 1: python3: not found\n");
  EXPECT_EQ(missing.verdict, RunVerdict::environment);
  EXPECT_NE(missing.reason.find("\"python3\" was not found"), std::string::npos) << missing.reason;
  EXPECT_NE(verdict(127, "bash: line 1: pytest: command not found\n").reason.find("\"pytest\""), std::string::npos);
  EXPECT_EQ(verdict(1, "/usr/bin/python3: No module named pytest\n").verdict, RunVerdict::environment);
  EXPECT_EQ(verdict(4, "ERROR: file or directory not found: tests/test_x.py\n").verdict, RunVerdict::environment);
  EXPECT_EQ(verdict(5, "\nno tests ran in 0.01s\n").verdict, RunVerdict::environment);
  // A collection error in the test's own file is the test code's fault; in another file (conftest), not.
  EXPECT_EQ(verdict(2, "ERROR collecting tests/test_x.py\nSyntaxError").verdict, RunVerdict::failed);
  EXPECT_EQ(verdict(2, "ERROR collecting tests/conftest.py\nImportError").verdict, RunVerdict::environment);
  CommandResult hung;
  hung.timed_out = true;
  EXPECT_EQ(classify_run(hung, "t").verdict, RunVerdict::failed);
  // pytest cannot find a test id in a file it could not collect and says both: the collection error decides.
  const std::string syntax =
      "_ ERROR collecting tests/test_x.py _\nE     File \"tests/test_x.py\", line 2\nE   SyntaxError: invalid syntax\n"
      "ERROR: not found: /w/tests/test_x.py::test_f\n";
  EXPECT_EQ(verdict(4, syntax).verdict, RunVerdict::failed);
  // A module that is not installed: the run could not run the test, and the reason quotes the line that says so.
  const std::string no_face =
      "_ ERROR collecting tests/test_x.py _\nImportError while importing test module '/w/tests/test_x.py'.\n"
      "tests/test_x.py:1: in <module>\n    import face\nE   ModuleNotFoundError: No module named 'face'\n"
      "=== short test summary info ===\nERROR tests/test_x.py\n1 error in 0.01s\n"
      "ERROR: not found: /w/tests/test_x.py::test_f\n";
  const auto not_installed = verdict(4, no_face);
  EXPECT_EQ(not_installed.verdict, RunVerdict::environment);
  EXPECT_EQ(not_installed.reason,
            "a module the tests import is not installed: ModuleNotFoundError: No module named 'face'");
  EXPECT_EQ(run_cause(no_face), "ModuleNotFoundError: No module named 'face'");
  // A test whose `except ImportError:` branch raises an error of its own: the missing module first, then that error.
  const auto then =
      verdict(1,
              "    import pandas\nE   ModuleNotFoundError: No module named 'pandas'\n\nDuring handling of the "
              "above exception, another exception occurred:\n    raise SkipTest('no pandas')\n"
              "E   NameError: name 'SkipTest' is not defined\n1 failed in 0.01s\n");
  EXPECT_EQ(then.verdict, RunVerdict::environment);
  EXPECT_EQ(then.reason,
            "a module the tests import is not installed: No module named 'pandas', then NameError: name "
            "'SkipTest' is not defined");
  EXPECT_EQ(run_cause("sh: 1: x: not found\n"), "");
  // ... unless the work tree has that module: then the import is the test code's (a renamed module, a typo).
  TempDir tree;
  write_file(tree / "face" / "__init__.py", "");
  CommandResult own;
  own.exit_code = 4;
  own.output = no_face;
  EXPECT_EQ(classify_run(own, "tests/test_x.py::test_f", tree.path()).verdict, RunVerdict::failed);
  // The project's own package that only a src/ layout holds: the command did not put src/ on the path.
  TempDir src_layout;
  write_file(src_layout / "src" / "face" / "__init__.py", "");
  const auto unimportable = classify_run(own, "tests/test_x.py::test_f", src_layout.path());
  EXPECT_EQ(unimportable.verdict, RunVerdict::environment);
  EXPECT_NE(unimportable.reason.find("'face' is in src/ but Python cannot import it: put src on the path"),
            std::string::npos)
      << unimportable.reason;
  // An installed module (or Python's own) of another version than the commit's code needs; the same import error from
  // a module of the work tree is the code's.
  CommandResult old_python;
  old_python.exit_code = 2;
  old_python.output = "_ ERROR collecting tests/test_x.py _\nsrc/face/__init__.py:3: in <module>\n"
                      "E   ImportError: cannot import name 'Mapping' from 'collections' "
                      "(/usr/lib/python3.11/collections/__init__.py)\n";
  const auto version = classify_run(old_python, "tests/test_x.py::test_f", src_layout.path());
  EXPECT_EQ(version.verdict, RunVerdict::environment);
  EXPECT_NE(version.reason.find("Python's own module is another version than this commit's code needs (it was written "
                                "for another Python): ImportError: cannot import name 'Mapping' from 'collections'"),
            std::string::npos)
      << version.reason;
  old_python.output =
      "_ ERROR collecting tests/test_x.py _\nE   ImportError: cannot import name 'soft_unicode' from "
      "'markupsafe' (/usr/lib/python3/dist-packages/markupsafe/__init__.py)\n";
  const auto installed = classify_run(old_python, "tests/test_x.py::test_f", src_layout.path());
  EXPECT_EQ(installed.verdict, RunVerdict::environment);
  EXPECT_TRUE(
      installed.reason.starts_with("an installed module is another version than this commit's code needs: "
                                   "ImportError: cannot import name 'soft_unicode' from 'markupsafe'"))
      << installed.reason;
  old_python.output = "_ ERROR collecting tests/test_x.py _\nE   ImportError: cannot import name 'helper' from "
                      "'face' (" + (src_layout / "src" / "face" / "__init__.py").string() + ")\n";
  EXPECT_EQ(classify_run(old_python, "tests/test_x.py::test_f", src_layout.path()).verdict, RunVerdict::failed);
  old_python.output = "_ ERROR collecting tests/test_x.py _\nsrc/face/base.py:4: in <module>\n"
                      "    class Cache(collections.MutableMapping):\n"
                      "E   AttributeError: module 'collections' has no attribute 'MutableMapping'\n";
  const auto moved = classify_run(old_python, "tests/test_x.py::test_f", src_layout.path());
  EXPECT_EQ(moved.verdict, RunVerdict::environment);
  EXPECT_NE(moved.reason.find("AttributeError: module 'collections' has no attribute 'MutableMapping'"),
            std::string::npos)
      << moved.reason;
  old_python.output = "_ ERROR collecting tests/test_x.py _\nE   AttributeError: module 'face' has no attribute 'x'\n";
  EXPECT_EQ(classify_run(old_python, "tests/test_x.py::test_f", src_layout.path()).verdict, RunVerdict::failed);
  // A collection error elsewhere names its line too.
  const auto other = verdict(2, "ERROR collecting tests/test_y.py\nE   NameError: name 'fixture' is not defined\n");
  EXPECT_EQ(other.verdict, RunVerdict::environment);
  EXPECT_NE(other.reason.find("outside tests/test_x.py: NameError: name 'fixture' is not defined"), std::string::npos)
      << other.reason;
}

TEST(failure_section, keeps_pytests_failure_section_only) {
  const std::string out =
      "F                                                                        [100%]\n"
      "=================================== FAILURES ===================================\n"
      "___________________________________ test_f ____________________________________\n"
      "    def test_f():\n>       assert 1 == 2\nE       assert 1 == 2\n\ntests/test_x.py:2: AssertionError\n"
      "=========================== short test summary info ============================\n"
      "FAILED tests/test_x.py::test_f - assert 1 == 2\n1 failed in 0.01s\n";
  const std::string section = failure_section(out);
  EXPECT_EQ(section.find("[100%]"), std::string::npos) << section;
  EXPECT_EQ(section.find("short test summary"), std::string::npos) << section;
  EXPECT_NE(section.find("___ test_f ___"), std::string::npos) << section;
  EXPECT_NE(section.find("tests/test_x.py:2: AssertionError"), std::string::npos) << section;
  EXPECT_EQ(failure_section("plain output\n"), "plain output\n");
  EXPECT_EQ(tail_lines("a\nb\nc\nd\n", 2), "c\nd");
}

TEST(spark_mine_run, a_run_that_cannot_run_the_test_labels_nothing_and_says_why) {
  TempDir dir;
  broken_calc_repo(dir, ".spark/\n");
  const std::string from = head_sha(dir);
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(2));
  // A tool missing from PATH: named.
  auto missing = run_spark({"mine", "--run", "no-such-tool-xyz -q {test_id}", "--test", "tests/test_calc.py::test_sum",
                            "--from", from},
                           dir.path());
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_NE(missing.err.find("\"no-such-tool-xyz\" was not found on PATH"), std::string::npos) << missing.err;
  // A python3 without pytest (-S: no site packages): every run "fails", but none is a test failure.
  auto no_pytest = run_spark({"mine", "--run", "/usr/bin/python3 -S -m pytest -q {test_id}", "--test",
                              "tests/test_calc.py::test_sum", "--from", from},
                             dir.path());
  EXPECT_EQ(no_pytest.exit_code, 1) << no_pytest.err;
  EXPECT_NE(no_pytest.err.find("No module named pytest"), std::string::npos) << no_pytest.err;
  EXPECT_NE(no_pytest.err.find("nothing is labelled"), std::string::npos) << no_pytest.err;
  // Nothing was opened or stored.
  if (std::filesystem::exists(dir / ".spark")) {
    auto kb = KnowledgeBase::open(dir / ".spark", false);
    ASSERT_TRUE(kb);
    MiningStore store(**kb);
    auto all = store.failures();
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->empty());
  }
}

TEST(spark_mine_run, a_module_that_is_not_installed_is_named_once) {
  TempDir dir;
  broken_calc_repo(dir, ".spark/\n__pycache__/\n");
  // The tests' conftest needs a package this machine does not have (glom's tests need `face`).
  write_file(dir / "tests" / "conftest.py", "import face\n");
  git(dir, "add -A");
  git(dir, "commit -m conftest", day(2));
  const std::string from = head_sha(dir);
  write_file(dir / "tests" / "test_calc.py", kGood);
  git(dir, "commit -am fix", day(3));
  auto r = run_spark({"mine", "--run", "/usr/bin/python3 -B -m pytest -q -p no:cacheprovider {test_id}", "--test",
                      "tests/test_calc.py::test_sum", "--test", "tests/test_calc.py::test_len", "--from", from},
                     dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a module the tests import is not installed: ModuleNotFoundError: No module named 'face'; "
                       "nothing is labelled"),
            std::string::npos)
      << r.err;
  size_t said = 0;
  for (size_t at = r.err.find("No module named 'face'"); at != std::string::npos;
       at = r.err.find("No module named 'face'", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << r.err;
}

TEST(spark_mine_run, a_flaky_range_falls_back_to_a_linear_scan_and_is_flagged) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / "state", "0\n");
  git(dir, "add -A");
  git(dir, "commit -m c1", day(1));
  const std::string from = head_sha(dir);
  std::string fix;
  for (int i = 2; i <= 8; ++i) {
    if (i == 6) write_file(dir / "ok", "yes\n");  // passes from commit 6 on
    if (i == 5) write_file(dir / "flaky", "yes\n");  // commit 5 passes only the first time it runs
    if (i == 6) std::filesystem::remove(dir / "flaky");
    write_file(dir / "state", std::to_string(i) + "\n");
    git(dir, "add -A");
    git(dir, "commit -m c" + std::to_string(i), day(i));
    if (i == 6) fix = head_sha(dir);
  }
  const std::string seen = (dir / "seen").string();
  const std::string cmd = "test -f ok && exit 0; if test -f flaky && ! test -f '" + seen + "'; then touch '" + seen +
                          "'; exit 0; fi; echo failing {test_id}; exit 1";
  auto r = run_spark({"mine", "--run", cmd, "--test", "tests/test_x.py::test_x", "--from", from}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("FLAKY"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("first passing commit " + fix.substr(0, 10)), std::string::npos) << r.err;
  // Bad input: --run without the tests, a --from that is not a commit, a command that hangs.
  EXPECT_EQ(run_spark({"mine", "--run", "true {test_id}"}, dir.path()).exit_code, 2);
  auto bad = run_spark({"mine", "--run", "true {test_id}", "--test", "t", "--from", "nope"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("no commit \"nope\""), std::string::npos) << bad.err;
  auto hang = run_spark({"mine", "--run", "sleep 30 # {test_id}", "--test", "t", "--from", from, "--run-timeout", "0.3"},
                        dir.path());
  EXPECT_EQ(hang.exit_code, 0) << hang.err;
  EXPECT_NE(hang.err.find("timed out after"), std::string::npos) << hang.err;
  EXPECT_NE(hang.err.find("still fails at HEAD"), std::string::npos) << hang.err;
}

TEST(spark_mine, a_shallow_clone_names_the_missing_history) {
  TempDir dir;
  std::vector<int> sizes(3, 1);
  const auto outcomes = fix_history(dir, sizes);
  TempDir clone;
  const std::string cmd = "git clone -q --depth 1 'file://" + dir.path().string() + "' '" + (clone / "c").string() +
                          "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  write_file(clone / "o.jsonl", joined(outcomes, 0, 3));
  auto r = run_spark({"mine", "--repo", "c", "--outcomes", "o.jsonl"}, clone.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("shallow clone"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("git fetch --unshallow"), std::string::npos) << r.err;
}

// libgit2 1.5 cannot walk a shallow clone (it reads the boundary's missing parents): spark walks to the boundary itself
// and labels the fixes the clone holds, then says what it lacks and how to deepen it (issue 40).
TEST(spark_mine, a_shallow_clone_labels_the_fixes_it_holds_and_says_how_to_deepen_it) {
  TempDir dir;
  const auto outcomes = fix_history(dir, std::vector<int>(10, 1));  // base, fix0 … fix9
  TempDir clone;
  const std::string cmd = "git clone -q --depth 4 'file://" + dir.path().string() + "' '" + (clone / "c").string() +
                          "' > /dev/null 2>&1";  // fix6 … fix9: test_7, test_8 and test_9 fail and are fixed in it
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  write_file(clone / "o.jsonl", joined(outcomes, 0, 10));
  for (const bool all_parents : {false, true}) {
    SCOPED_TRACE(all_parents ? "--all-parents" : "first parents");
    std::filesystem::remove_all(clone / "c" / ".spark");
    std::filesystem::remove_all(clone / ".spark");
    std::vector<std::string> args = {"mine", "--repo", "c", "--outcomes", "o.jsonl", "-o", "cases.jsonl"};
    if (all_parents) args.push_back("--all-parents");
    auto r = run_spark(args, clone.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("settled 3 failures: 3 labelled into the knowledge base"), std::string::npos) << r.err;
    auto cases = read_cases_jsonl(clone / "cases.jsonl");
    ASSERT_TRUE(cases) << cases.error().message;
    std::set<std::string> tests;
    for (const auto& c : cases->cases) tests.insert(c.test_id);
    EXPECT_EQ(tests, (std::set<std::string>{"tests/test_m.py::test_7", "tests/test_m.py::test_8",
                                            "tests/test_m.py::test_9"}));
    // what it lacks: test_0 … test_5's outcomes and test_6's failure (13), at commits before fix6, the boundary
    EXPECT_NE(r.err.find("this is a shallow clone: its history starts at "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("13 outcomes at commits it does not have were skipped"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("git fetch --deepen N"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("git fetch --unshallow"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {
namespace {

TEST(ci_post_failure_script, records_localizes_for_github_and_writes_sarif) {
  TempDir dir;
  broken_calc_repo(dir, "*.xml\n*.sarif\n.spark/\n__pycache__/\n");
  pytest(dir, "report.xml");
  const std::string script = std::string(SPARK_SOURCE_DIR) + "/hooks/ci-post-failure.sh";
  const std::string cmd = "cd '" + dir.path().string() + "' && SPARK=" SPARK_BINARY " GITHUB_ACTIONS=true GITHUB_SHA=" +
                          head_sha(dir) + " sh '" + script + "' report.xml spark.sarif > out.txt 2> err.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string out = testing::slurp(dir / "out.txt");
  EXPECT_NE(out.find("::"), std::string::npos) << out << testing::slurp(dir / "err.txt");
  EXPECT_NE(out.find("tests/test_calc.py"), std::string::npos) << out;
  const auto sarif = nlohmann::json::parse(testing::slurp(dir / "spark.sarif"));
  EXPECT_FALSE(sarif["runs"][0]["results"].empty());
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  ASSERT_TRUE(kb) << kb.error().message;
  MiningStore store(**kb);
  EXPECT_EQ(store.failures({FailureStatus::open})->size(), 1u);
  // No report (the test step died before writing it): a message, and the job is not failed by spark.
  const std::string none = "cd '" + dir.path().string() + "' && SPARK=" SPARK_BINARY " sh '" + script +
                           "' missing.xml 2> err2.txt";
  EXPECT_EQ(std::system(none.c_str()), 0);
  EXPECT_NE(testing::slurp(dir / "err2.txt").find("no JUnit report at missing.xml"), std::string::npos);
}

}  // namespace

namespace {

// `n` cases over 6 tests, each case its own test-file version (a literal changes), ids from `first`.
std::string index_corpus(int first, int n) {
  std::string out;
  for (int i = first; i < first + n; ++i) {
    std::string code = "import os\n\n\n";
    for (int t = 0; t < 6; ++t)
      code += "def test_t" + std::to_string(t) + "():\n    value = os.path.join('a', 'b" + std::to_string(t) + "')\n" +
              "    assert value == 'a/b" + std::to_string(t == i % 6 ? i : t) + "'\n\n\n";
    const int t = i % 6;
    nlohmann::json c = testing::sample_case("k" + std::to_string(i), code, 4 + 5 * t + 2,
                                            "tests/test_x.py:" + std::to_string(4 + 5 * t + 2) + ": in test_t" +
                                                std::to_string(t) + "\nE   AssertionError: assert 'a/b" +
                                                std::to_string(t) + "' == 'a/b" + std::to_string(i) + "'",
                                            day(1 + i % 20));
    c["test_id"] = "tests/test_x.py::test_t" + std::to_string(t);
    out += c.dump() + "\n";
  }
  return out;
}

// Runs spark with `args` in `dir`, kills it with SIGKILL after `delay`; true when the kill interrupted it.
bool run_and_kill(const TempDir& dir, const std::vector<std::string>& args, std::chrono::microseconds delay) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(127);
    std::vector<char*> argv = {const_cast<char*>(SPARK_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execv(SPARK_BINARY, argv.data());
    _exit(127);
  }
  std::this_thread::sleep_for(delay);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

std::string integrity(const std::filesystem::path& db_file) {
  sqlite3* db = nullptr;
  sqlite3_open(db_file.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr);
  std::string out = sqlite3_step(st) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(st, 0)) : "?";
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

}  // namespace

TEST(spark_index, a_killed_index_or_import_leaves_the_old_or_the_new_state_and_a_rerun_finishes) {
  TempDir dir;
  write_file(dir / "cases.jsonl", index_corpus(0, 240));
  ASSERT_EQ(run_spark({"import", "cases.jsonl"}, dir.path()).exit_code, 0);
  auto first = run_spark({"index"}, dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // The length of a rebuild, timed warm as the killed ones run (the first build, cold, could be longer and put the
  // kill points past the end of the runs that follow).
  const auto t0 = std::chrono::steady_clock::now();
  auto rebuild = run_spark({"index", "--rebuild"}, dir.path());
  ASSERT_EQ(rebuild.exit_code, 0) << rebuild.err;
  const auto full = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const auto index_dir = dir / ".spark" / "index";

  // kill -9 at ten points spread over a rebuild: the index on disk is always one whole state.
  int killed = 0;
  for (int step = 1; step <= 10; ++step) {
    killed += run_and_kill(dir, {"index", "--rebuild"}, full * step / 11) ? 1 : 0;
    auto loaded = VectorIndex::load(index_dir, {});
    ASSERT_TRUE(loaded) << "after a kill at " << step << "/11 of a build: " << loaded.error().message;
    EXPECT_EQ(loaded->first.size(), 240u);
  }
  EXPECT_GE(killed, 3) << "kills should land before the rebuild ends";

  // kill -9 during an import of 60 new cases (the store commits them, then the index is updated): the store holds
  // the old or the new cases, whole; the index is a whole state; a re-run finishes both, nothing duplicated.
  write_file(dir / "more.jsonl", index_corpus(240, 60));
  TempDir probe;
  write_file(probe / "cases.jsonl", index_corpus(0, 240));
  ASSERT_EQ(run_spark({"import", "cases.jsonl"}, probe.path()).exit_code, 0);
  ASSERT_EQ(run_spark({"index"}, probe.path()).exit_code, 0);
  const auto t2 = std::chrono::steady_clock::now();
  auto timed = run_spark({"import", (dir / "more.jsonl").string()}, probe.path());
  ASSERT_EQ(timed.exit_code, 0) << timed.err;
  const auto import_time = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t2);
  killed = 0;
  for (int step = 1; step <= 10; ++step) {
    killed += run_and_kill(dir, {"import", "more.jsonl"}, import_time * step / 11) ? 1 : 0;
    EXPECT_EQ(integrity(dir / ".spark" / "kb.sqlite"), "ok");
    auto kb = KnowledgeBase::open(dir / ".spark", false);
    ASSERT_TRUE(kb) << kb.error().message;
    const size_t count = *(*kb)->count();
    EXPECT_TRUE(count == 240 || count == 300) << count;
    auto loaded = VectorIndex::load(index_dir, {});
    ASSERT_TRUE(loaded) << loaded.error().message;
    EXPECT_TRUE(loaded->first.size() == 240 || loaded->first.size() == 300) << loaded->first.size();
  }
  EXPECT_GE(killed, 1);
  auto again = run_spark({"import", "more.jsonl"}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto index = run_spark({"index"}, dir.path());
  ASSERT_EQ(index.exit_code, 0) << index.err;
  EXPECT_TRUE(index.out.find("added") != std::string::npos || index.out.find("up to date") != std::string::npos)
      << index.out;  // caught up incrementally, not rebuilt
  auto kb = KnowledgeBase::open(dir / ".spark", false);
  ASSERT_TRUE(kb);
  EXPECT_EQ(*(*kb)->count(), 300u);
  auto loaded = VectorIndex::load(index_dir, {});
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->first.size(), 300u);
}

}  // namespace spark::SPARK_TEST_FILE_ID
