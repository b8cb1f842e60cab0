// `spark mine --discover` when things go wrong around the runs: a stop signal (Ctrl-C, SIGTERM, a closed terminal)
// in the middle of a run, processes a run puts out of its reach (setsid), a command that can run no test at all, and
// pytest's usage errors. Real git repositories, real pytest, real processes, found in /proc by a mark in their argv.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <thread>

#include "base/process.h"
#include "formats/case.h"
#include "miner/discover.h"
#include "miner/runner.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::git;
using testing::head_sha;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

namespace fs = std::filesystem;

const char* kPytest = "/usr/bin/python3 -B -m pytest {test_id}";

// The pids of the processes one of whose arguments starts with `mark` (not spark's or the shell's, whose argument
// is the whole command).
std::set<pid_t> processes_marked(const std::string& mark) {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    const std::string cmdline = testing::slurp(e.path() / "cmdline");  // "" once it is gone
    for (size_t at = 0; at < cmdline.size();) {
      const size_t end = std::min(cmdline.find('\0', at), cmdline.size());
      if (cmdline.compare(at, mark.size(), mark) == 0) out.insert(pid);
      at = end + 1;
    }
  }
  return out;
}

// Kills what a failed test left, so that one failure does not leave sleepers behind.
void kill_marked(const std::string& mark) {
  for (const pid_t pid : processes_marked(mark)) ::kill(pid, SIGKILL);
}

// The entries of `folder` whose name starts with `prefix`.
std::vector<std::string> entries(const fs::path& folder, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path().filename());
  return out;
}

// A repository whose one test fails at the first commit and is fixed by the second.
void one_fix(const TempDir& dir) {
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\ntmp/\n*.log\n");
  write_file(dir / "tests" / "test_x.py", "def test_x():\n    assert 1 + 1 == 3\n");
  git(dir, "add -A");
  git(dir, "commit -q -m start", "2026-02-01T00:00:00Z");
  write_file(dir / "tests" / "test_x.py", "def test_x():\n    assert 1 + 1 == 2\n");
  git(dir, "add -A");
  git(dir, "commit -q -m fix", "2026-02-02T00:00:00Z");
}

// Starts spark with `args` in `cwd`, TMPDIR at `tmp`, its output into `log`; returns its pid.
pid_t start_spark(const std::vector<std::string>& args, const fs::path& cwd, const fs::path& tmp, const fs::path& log) {
  const std::string binary = SPARK_BINARY;
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::setenv("TMPDIR", tmp.c_str(), 1);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(binary.c_str(), raw.data());
    ::_exit(127);
  }
  return child;
}

// Waits up to `seconds` for `pid` to end; its wait status, or nullopt when it did not end.
std::optional<int> wait_for(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

class StopSignal : public ::testing::TestWithParam<int> {};

TEST_P(StopSignal, ends_every_process_of_the_runs_removes_the_work_trees_and_ends_spark_by_the_signal) {
  const int signal = GetParam();
  TempDir dir;
  one_fix(dir);
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const std::string mark = "spark-stop-test-" + std::to_string(::getpid()) + "-" + std::to_string(signal);
  // The run starts a sleeper in a new session (out of its process group), then a long test: the signal lands in it.
  const std::string sleeper = "/usr/bin/python3 -c 'import time; time.sleep(1000)' ";
  const std::string command = "setsid " + sleeper + mark + "-setsid & " + sleeper + mark + "-test; " + kPytest;
  const pid_t spark = start_spark({"mine", "--discover", "--run", command}, dir.path(), tmp, dir / "spark.log");
  // Both sleepers running, and the work trees made.
  bool running = false;
  for (int i = 0; i < 600 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    running = processes_marked(mark + "-setsid").size() == 1 && processes_marked(mark + "-test").size() == 1;
  }
  ASSERT_TRUE(running) << testing::slurp(dir / "spark.log");
  EXPECT_EQ(entries(tmp, "spark-discover-").size(), 1u);
  ASSERT_EQ(::kill(spark, signal), 0);
  const auto status = wait_for(spark, 30);
  if (!status) ::kill(spark, SIGKILL);
  ASSERT_TRUE(status) << "spark did not end within 30 s of " << signal_name(signal);
  // Ended as the signal would have ended it (a shell sees 128 + the signal).
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == signal) << *status << "\n" << testing::slurp(dir / "spark.log");
  const auto left = processes_marked(mark);
  kill_marked(mark);
  EXPECT_TRUE(left.empty()) << left.size() << " processes of the run outlived spark";
  EXPECT_TRUE(entries(tmp, "spark-discover-").empty()) << "the work trees were left in " << tmp;
  const std::string log = testing::slurp(dir / "spark.log");
  EXPECT_NE(log.find("stopped by " + signal_name(signal)), std::string::npos) << log;
  // Nothing of the interrupted test is stored: the same command runs it again and finds the fix.
  auto again = run_spark({"mine", "--discover", "--run", kPytest, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("1 fix"), std::string::npos) << again.err;
}

INSTANTIATE_TEST_SUITE_P(spark_mine_discover, StopSignal, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const auto& p) { return signal_name(p.param).substr(3); });

TEST(spark_mine_discover, a_process_a_run_starts_in_a_new_session_does_not_outlive_the_discovery) {
  TempDir dir;
  one_fix(dir);
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const std::string mark = "spark-setsid-test-" + std::to_string(::getpid());
  const std::string command =
      "setsid /usr/bin/python3 -c 'import time; time.sleep(1000)' " + mark + " & " + std::string(kPytest);
  const pid_t spark = start_spark({"mine", "--discover", "--run", command}, dir.path(), tmp, dir / "spark.log");
  const auto status = wait_for(spark, 120);
  if (!status) ::kill(spark, SIGKILL);
  ASSERT_TRUE(status);
  const std::string log = testing::slurp(dir / "spark.log");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log;
  EXPECT_NE(log.find("1 fix"), std::string::npos) << log;
  const auto left = processes_marked(mark);
  kill_marked(mark);
  EXPECT_TRUE(left.empty()) << left.size() << " processes the runs started outlived spark\n" << log;
  EXPECT_TRUE(entries(tmp, "spark-discover-").empty());
}

// run_command itself, with this process a child subreaper: what the command put in a new session is gone when the
// call returns, not only when the discovery ends; a process of another run going on at the same time is left alone.
TEST(run_command, kills_what_the_command_started_in_a_new_session_when_it_returns) {
  TempDir dir;
  const std::string mark = "spark-run-command-test-" + std::to_string(::getpid());
  const std::string sleeper = "/usr/bin/python3 -c 'import time; time.sleep(1000)' ";
  ChildSubreaper reaper;
  std::optional<Result<CommandResult>> other;
  std::thread beside([&] { other = run_command(sleeper + mark + "-other", dir.path(), 3); });
  for (int i = 0; i < 200 && processes_marked(mark + "-other").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto r = run_command("setsid " + sleeper + mark + "-setsid & sleep 0.3; echo done", dir.path(), 30);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, "done\n");
  EXPECT_TRUE(processes_marked(mark + "-setsid").empty()) << "the setsid'd process outlived the run";
  EXPECT_EQ(processes_marked(mark + "-other").size(), 1u) << "another run's process was killed";
  beside.join();
  ASSERT_TRUE(other && *other);
  EXPECT_TRUE((*other)->timed_out);
  EXPECT_TRUE(processes_marked(mark).empty());
  kill_marked(mark);
}

// One candidate test per commit, n fixes, so that a command that can run nothing has many pairs to try.
void many_fixes(const TempDir& dir, int n) {
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n*.log\n");
  std::string body;
  for (int i = 0; i < n; ++i) body += "def test_" + std::to_string(i) + "():\n    assert " + std::to_string(i) + " == -1\n\n\n";
  write_file(dir / "tests" / "test_m.py", body);
  git(dir, "add -A");
  git(dir, "commit -q -m start", "2026-02-01T00:00:00Z");
  for (int i = 0; i < n; ++i) {
    const std::string from = "assert " + std::to_string(i) + " == -1", to = "assert " + std::to_string(i) + " == " + std::to_string(i);
    std::string text = testing::slurp(dir / "tests" / "test_m.py");
    text.replace(text.find(from), from.size(), to);
    write_file(dir / "tests" / "test_m.py", text);
    git(dir, "add -A");
    const int day = 2 + i;
    git(dir, "commit -q -m 'fix test_" + std::to_string(i) + "'",
        "2026-02-" + std::string(day < 10 ? "0" : "") + std::to_string(day) + "T00:00:00Z");
  }
}

size_t lines_of(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return 0;
  const std::string text = testing::slurp(file);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(spark_mine_discover, gives_up_with_the_reason_when_no_run_can_run_and_another_command_runs_them_again) {
  TempDir dir;
  many_fixes(dir, 7);
  // The runner is missing: every run says so. Each run is counted in a log outside the work trees.
  const std::string log = (dir / "runs.log").string();
  const std::string missing = "echo run >> '" + log + "'; no-such-runner {test_id}";
  auto r = run_spark({"mine", "--discover", "--run", missing}, dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("gave up: the first 5 runs could not run their test"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\"no-such-runner\" was not found on PATH"), std::string::npos) << r.err;
  EXPECT_EQ(lines_of(log), 5u) << "runs made before giving up\n" << r.err;
  // The same command again: it knows from the store, runs nothing and says how to run them again.
  auto same = run_spark({"mine", "--discover", "--run", missing}, dir.path());
  EXPECT_EQ(same.exit_code, 1) << same.err;
  EXPECT_NE(same.err.find("--retry-unrunnable runs them again"), std::string::npos) << same.err;
  EXPECT_EQ(lines_of(log), 5u) << same.err;
  // The right command runs again what the other could not, without --retry-unrunnable, and finds every fix.
  auto right = run_spark({"mine", "--discover", "--run", kPytest, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(right.exit_code, 0) << right.err;
  EXPECT_NE(right.err.find("7 fixes"), std::string::npos) << right.err;
  auto cases = read_cases_jsonl(dir / "found.jsonl");
  ASSERT_TRUE(cases) << cases.error().message;
  EXPECT_EQ(cases->cases.size(), 7u);
}

TEST(spark_mine_discover, runs_that_could_run_keep_the_discovery_going_past_later_ones_that_could_not) {
  TempDir dir;
  many_fixes(dir, 8);
  // The oldest pairs run; from the fourth candidate on, the runner is gone (a history whose later commits need
  // something missing): not a reason to give up once tests ran.
  const std::string command = "if grep -q 'assert 3 == 3' tests/test_m.py; then no-such-runner {test_id}; else " +
                              std::string(kPytest) + "; fi";
  auto r = run_spark({"mine", "--discover", "--run", command}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("3 fixes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("could not run (never a case)"), std::string::npos) << r.err;
}

// pytest's usage error: the project's pytest.ini passes an option of a plugin that is not installed (an option no
// plugin has, so that the test says the same where pytest-cov is installed).
TEST(spark_mine_discover, counts_pytest_usage_errors_as_could_not_run_and_finds_the_fix_with_addopts_cleared) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", ".spark/\n__pycache__/\n");
  write_file(dir / "pytest.ini", "[pytest]\naddopts = --spark-absent-plugin=calc\n");
  write_file(dir / "calc.py", "def add(a, b):\n    return a + b\n");
  write_file(dir / "tests" / "test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 5\n");
  git(dir, "add -A");
  git(dir, "commit -q -m start", "2026-02-01T00:00:00Z");
  write_file(dir / "tests" / "test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n");
  git(dir, "add -A");
  git(dir, "commit -q -m 'fix test_add'", "2026-02-02T00:00:00Z");
  const std::string fix = head_sha(dir);
  // As the project says: pytest exits 4 at both commits. Not a test failure: could not run, with the way out.
  const std::string plain = "PYTHONPATH=. " + std::string(kPytest);
  auto r = run_spark({"mine", "--discover", "--run", plain}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("0 failed at the commit too"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pytest's usage error (exit 4): unrecognized arguments: --spark-absent-plugin=calc, from the "
                       "addopts of "
                       "pytest.ini"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("-o addopts="), std::string::npos) << r.err;
  // With addopts cleared the fix is found: another command, so the could-not-run pair runs again by itself.
  const std::string cleared = "PYTHONPATH=. /usr/bin/python3 -B -m pytest -o addopts= {test_id}";
  auto found = run_spark({"mine", "--discover", "--run", cleared, "-o", "found.jsonl"}, dir.path());
  ASSERT_EQ(found.exit_code, 0) << found.err;
  auto cases = read_cases_jsonl(dir / "found.jsonl");
  ASSERT_TRUE(cases) << cases.error().message;
  ASSERT_EQ(cases->cases.size(), 1u) << found.err;
  EXPECT_EQ(*cases->cases[0].fixed_commit, fix);
  EXPECT_EQ(cases->cases[0].test_id, "tests/test_calc.py::test_add");
}

TEST(classify_run, reads_pytest_usage_internal_and_no_test_collected_exits_as_could_not_run) {
  TempDir tree;
  write_file(tree / "pytest.ini", "[pytest]\naddopts = --cov=x --cov-append -p no:cacheprovider\n");
  const auto verdict = [&](int exit_code, const std::string& output) {
    CommandResult r;
    r.exit_code = exit_code;
    r.output = output;
    return classify_run(r, "tests/test_x.py::test_f", tree.path());
  };
  const std::string ini = (tree / "pytest.ini").string();
  const auto cov = verdict(4, "ERROR: usage: __main__.py [options] [file_or_dir] [file_or_dir] [...]\n"
                              "__main__.py: error: unrecognized arguments: --cov=x\n  inifile: " + ini +
                                  "\n  rootdir: " + tree.path().string() + "\n");
  EXPECT_EQ(cov.verdict, RunVerdict::environment);
  EXPECT_NE(cov.reason.find("unrecognized arguments: --cov=x, from the addopts of pytest.ini"), std::string::npos)
      << cov.reason;
  EXPECT_NE(cov.reason.find("-o addopts="), std::string::npos) << cov.reason;
  EXPECT_EQ(cov.reason.find(tree.path().string()), std::string::npos) << "no work-tree path: " << cov.reason;
  // Options that took the wrong words (--cov-report term --cov pkg, pytest-cov's): argparse lists the test id among
  // the refused arguments; the reason leaves it out, so that every test's run gives the same reason.
  const auto words = verdict(4, "ERROR: usage: __main__.py [options]\n__main__.py: error: unrecognized arguments: "
                                "--cov-append --cov-report --cov x tests/test_x.py::test_f\n  inifile: " + ini + "\n");
  EXPECT_NE(words.reason.find("unrecognized arguments: --cov-append --cov-report --cov x, from the addopts"),
            std::string::npos)
      << words.reason;
  // An argument of the command itself: the command is to fix.
  const auto own = verdict(4, "ERROR: usage: pytest [options]\npytest: error: unrecognized arguments: --bogus\n"
                              "  inifile: " + ini + "\n");
  EXPECT_EQ(own.verdict, RunVerdict::environment);
  EXPECT_NE(own.reason.find("--bogus (fix the command)"), std::string::npos) << own.reason;
  EXPECT_EQ(verdict(4, "ERROR: -o/--override-ini expects option=value style (got: 'addopts').\n").verdict,
            RunVerdict::environment);
  // An internal error quotes its last line.
  const auto internal = verdict(3, "INTERNALERROR> Traceback (most recent call last):\n"
                                   "INTERNALERROR> ValueError: bad hook\n");
  EXPECT_EQ(internal.verdict, RunVerdict::environment);
  EXPECT_NE(internal.reason.find("ValueError: bad hook"), std::string::npos) << internal.reason;
  // Exit 5 with the test deselected by the project's configuration: the test did not run.
  const auto deselected = verdict(5, "collected 1 item / 1 deselected / 0 selected\n\n=== 1 deselected in 0.01s ===\n");
  EXPECT_EQ(deselected.verdict, RunVerdict::environment);
  EXPECT_NE(deselected.reason.find("pytest collected no test for tests/test_x.py::test_f"), std::string::npos);
  // A test that fails with exit 4 of its own (not pytest's usage error) stays a failure; a collection error in the
  // test's own file too.
  EXPECT_EQ(verdict(4, "F\nE assert 1 == 2\n").verdict, RunVerdict::failed);
  EXPECT_EQ(verdict(4, "_ ERROR collecting tests/test_x.py _\nE   SyntaxError\nERROR: not found: x\n").verdict,
            RunVerdict::failed);
}

TEST(unrunnable_command_mark, tells_commands_apart_and_the_stored_reason_reads_back) {
  const std::string a = unrunnable_command_mark("python3 -m pytest {test_id}");
  EXPECT_NE(a, unrunnable_command_mark("python3 -m pytest -o addopts= {test_id}"));
  EXPECT_EQ(a, unrunnable_command_mark("python3 -m pytest {test_id}"));
  EXPECT_EQ(unrunnable_reason(std::string(kUnrunnablePrefix) + "no tests ran\n" + a), "no tests ran");
  EXPECT_EQ(unrunnable_reason(std::string(kUnrunnablePrefix) + "no tests ran"), "no tests ran");  // an older store
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
