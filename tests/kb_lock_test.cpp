// The knowledge base's creation lock (.spark/kb.lock) held by another process: waited for as long as a busy SQLite
// store is (30 s from the command line), then given up with an error naming the lock and its holder's pid.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/knowledge_base.h"
#include "test_util.h"

extern char** environ;

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Another process (python3) holding an exclusive flock on `file` until it is destroyed or `seconds` have passed.
class LockHolder {
 public:
  LockHolder(const fs::path& file, double seconds) {
    const fs::path ready = file.string() + ".ready";
    std::vector<std::string> argv_s = {"/usr/bin/python3", "-c",
                                       "import fcntl, sys, time\n"
                                       "f = open(sys.argv[1], 'a')\n"
                                       "fcntl.flock(f, fcntl.LOCK_EX)\n"
                                       "open(sys.argv[2], 'w').close()\n"
                                       "time.sleep(float(sys.argv[3]))\n",
                                       file.string(), ready.string(), std::to_string(seconds)};
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    for (int i = 0; i < 500 && pid_ > 0 && !fs::exists(ready); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    held_ = pid_ > 0 && fs::exists(ready);
  }
  ~LockHolder() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;
  bool held() const { return held_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool held_ = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(KnowledgeBase_open, a_held_lock_is_waited_for_as_long_as_the_busy_timeout_then_its_holder_is_named) {
  TempDir dir;
  fs::create_directories(dir / "kb");
  LockHolder holder(dir / "kb" / "kb.lock", 60);
  ASSERT_TRUE(holder.held());
  const auto t0 = std::chrono::steady_clock::now();
  auto kb = KnowledgeBase::open(dir / "kb", true, 700);
  const double waited = seconds_since(t0);
  ASSERT_FALSE(kb);
  EXPECT_GE(waited, 0.7);
  EXPECT_LT(waited, 10.0);
  const std::string& m = kb.error().message;
  EXPECT_NE(m.find((dir / "kb" / "kb.lock").string() + ": held by pid " + std::to_string(holder.pid()) + " ("),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("python3"), std::string::npos) << m;  // its command line
  EXPECT_NE(m.find("for over 0.7 s"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(dir / "kb" / "kb.sqlite"));
}

TEST(KnowledgeBase_open, a_lock_released_within_the_wait_is_taken) {
  TempDir dir;
  fs::create_directories(dir / "kb");
  LockHolder holder(dir / "kb" / "kb.lock", 0.5);
  ASSERT_TRUE(holder.held());
  auto kb = KnowledgeBase::open(dir / "kb", true, 20000);
  ASSERT_TRUE(kb) << kb.error().message;
  EXPECT_TRUE((*kb)->created());
}

TEST(spark_record, a_held_knowledge_base_lock_ends_the_wait_with_exit_1_naming_the_lock_and_its_holder) {
  TempDir dir;
  testing::git(dir, "init -q .");
  testing::write_file(dir / "tests" / "test_a.py", "def test_a():\n    assert 1 == 2\n");
  testing::git(dir, "add .");
  testing::git(dir, "commit -qm a");
  testing::write_file(dir / "r.xml",
                      "<?xml version=\"1.0\"?>\n<testsuite name=\"pytest\"><testcase classname=\"tests.test_a\" "
                      "name=\"test_a\"><failure message=\"assert 1 == 2\">E   assert 1 == 2</failure></testcase>"
                      "</testsuite>\n");
  fs::create_directories(dir / ".spark");
  LockHolder holder(dir / ".spark" / "kb.lock", 120);
  ASSERT_TRUE(holder.held());
  // Bounded by timeout(1) here, so that a spark that waits forever fails this test instead of hanging it.
  const auto t0 = std::chrono::steady_clock::now();
  auto r = testing::run_program("/usr/bin/timeout",
                                {"-s", "KILL", "90", SPARK_BINARY, "record", "--junit", "r.xml", "--no-localize"},
                                dir.path());
  const double waited = seconds_since(t0);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_GE(waited, 30.0);
  EXPECT_NE(r.err.find("spark: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kb.lock: held by pid " + std::to_string(holder.pid()) + " ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for over 30.0 s"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / ".spark" / "kb.sqlite"));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
