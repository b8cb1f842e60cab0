// Test outcomes from JUnit XML as runners write it: pytest (xunit2, its default, which has no file/line, and xunit1),
// unittest-xml-reporting, nose and other runners' variants. Each <testcase> becomes an outcome with a pytest-style
// node id: `classname` + `name` are mapped to `tests/test_x.py::TestC::test_f[param]` by finding which prefix of the
// dotted class name is a test file under the repository root. Files outside the root are never read or named as
// test files.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "result.h"

namespace spark {

enum class Outcome { passed, failed, error, skipped };
std::string_view outcome_name(Outcome o);

struct TestOutcome {
  std::string test_id;       // node id; for a collection error, the test file's path
  Outcome outcome = Outcome::passed;
  std::string message;       // the <failure>/<error> message attribute and text, as the runner printed it
  std::string file;          // the test file relative to the root; "" when it could not be found there
  std::optional<int64_t> time;  // the suite's timestamp, seconds since the epoch (zone-less, as pytest writes it: UTC)
  size_t report_line = 0;    // where the <testcase> is in the report
  bool collection_error = false;
};

struct JunitReport {
  std::vector<TestOutcome> outcomes;
  std::vector<std::string> warnings;  // "report.xml:12: tests/x.py is outside the repository; not read"
};

// Where the test files a report names are looked for: `exists(relative)` says whether that relative path is a test
// file there (never true for an absolute path or one that leaves the place); `name` is how warnings name the place
// ("/work/repo", "commit 1a2b3c4d5e of /srv/repo.git").
struct TestFiles {
  std::function<bool(const std::string& relative)> exists;
  std::string name;
};
// The files under a folder (inside_root).
TestFiles files_under(const std::filesystem::path& root);

// Reads `report`; test files are looked up in `files`. A file that is not XML (or is cut off) or whose root element
// is not <testsuites>/<testsuite> is an error naming the file and line.
Result<JunitReport> read_junit(const std::filesystem::path& report, const TestFiles& files);
Result<JunitReport> read_junit(const std::filesystem::path& report, const std::filesystem::path& root);

// `relative` resolved under `root`, or nullopt when it is absolute, escapes the root (.., symbolic links) or does not
// exist as a regular file.
std::optional<std::filesystem::path> inside_root(const std::filesystem::path& root, const std::string& relative);

}  // namespace spark
