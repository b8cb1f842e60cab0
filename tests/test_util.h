// Shared test helpers: a temporary folder per test (kept when the test fails), files, and running the real binary.
#pragma once

// SPARK_ASAN: built with AddressSanitizer (GCC says so with __SANITIZE_ADDRESS__, Clang 16 only through __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define SPARK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARK_ASAN 1
#endif
#endif

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spark::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();  // removes the folder unless the current test failed
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, const std::string& content);
std::string slurp(const std::filesystem::path& path);
// Replaces the one occurrence of `from` in the file (a failed assertion when it is not there).
void replace_in_file(const std::filesystem::path& file, const std::string& from, const std::string& to);

struct RunResult {
  int exit_code = -1;
  std::string out, err;
  long peak_rss_kib = 0;  // the process's peak resident set (getrusage's ru_maxrss)
};
// Runs the spark binary with `args` in `cwd` (no shell); stdin from `input` when given.
RunResult run_spark(const std::vector<std::string>& args, const std::filesystem::path& cwd, const std::string& input = {});
// Runs `program` (a path) the same way.
RunResult run_program(const std::string& program, const std::vector<std::string>& args,
                      const std::filesystem::path& cwd, const std::string& input = {});
// Runs Debian's pytest (/usr/bin/python3 -B -m pytest -p no:cacheprovider ARGS) in `cwd`, at its default settings
// otherwise (the traceback style is --tb=auto unless ARGS say another).
RunResult run_pytest(const std::vector<std::string>& args, const std::filesystem::path& cwd);

// The lines of a run's stdout or stderr that a GitHub Actions runner would act on or a terminal would interpret: a
// line opening with "::" after white space (a workflow command), one holding "##[" (the older form), or one holding a
// control character other than tab (ESC, BEL, CR, C1 controls). With `own_annotations`, spark's own
// `--format github` lines ("::warning file=", "::warning title=") are allowed.
std::vector<std::string> unsafe_log_lines(const std::string& text, bool own_annotations = false);

// A small, valid labelled case.
nlohmann::json sample_case(const std::string& id, const std::string& content, int faulty_line,
                           const std::string& error = "E   assert 1 == 2", const std::string& time = "2026-01-01T00:00:00Z");

// Labelled case i of a family of distinct small cases: test_area_i of tests/test_x.py fails at its assertion (line 8);
// the fault is the assertion's expected value for even i, the set-up line `w = …` (line 5) for odd i.
nlohmann::json numbered_case(int i);

// Runs git in `dir` with fixed identities and commit time (a failing git command fails the test).
void git(const TempDir& dir, const std::string& args, const std::string& date = "2026-01-01T00:00:00Z");
// A commit time: 2026-02-01 plus `d` days, as ISO-8601.
std::string day(int d);
// Stages everything in `dir` and commits it as `message` at day(d).
void commit(const TempDir& dir, const std::string& message, int d);
// The full sha of HEAD in the repository at `dir`.
std::string head_sha(const TempDir& dir);

// A git history at `dir` of test fixes: fix i rewrites `sizes[i]` lines of tests/test_m.py; the outcomes say test_i
// failed before fix i and passed after it. Returns the outcome lines (JSONL), one string per fix.
std::vector<std::string> fix_history(const TempDir& dir, const std::vector<int>& sizes);

// Runs SQL statements on an SQLite store directly (a test's way to make what an older spark left behind); a failure
// fails the test with SQLite's message.
void run_sql(const std::filesystem::path& db_file, const std::string& statements);

// The development corpus folder (../shared/data/dev), or "" when absent (a plain clone).
std::filesystem::path dev_data();

}  // namespace spark::testing
