// Test outcomes from JUnit XML as runners write it: pytest (xunit2, its default, which has no file/line, and xunit1),
// unittest-xml-reporting, nose and other runners' variants, and Java's (the JUnit Platform console launcher, Maven
// Surefire, Gradle). Each <testcase> becomes an outcome with a test id: for Python a node id, `classname` + `name`
// mapped to `tests/test_x.py::TestC::test_f[param]` by finding which prefix of the dotted class name is a test file
// under the repository root; for JavaScript/TypeScript `tests/x.test.js > suite > case` (jest-junit with its `file`
// attribute, Vitest's classname, and node:test's reporter, which names no file: classname "test", the describe
// blocks as nested <testsuite>s, top-level tests right under <testsuites>; its file is the one test file whose text
// holds the suites' and the test's names as string literals); for Java `com.x.FooTest#testBar` (`name` without its
// empty "()"), when the class's package path and file ("com/x/FooTest.java") end the path of a file there (any
// source root: src/test/java/, …).
// Files outside the root are never read or named as test files.
// Contract: the readers own nothing past the call and are thread-safe; a file that is not XML fails with a Result
// naming the report, line and reason; a test case whose file cannot be found becomes a warning, not a failure.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace spark {

enum class Outcome { passed, failed, error, skipped };
std::string_view outcome_name(Outcome o);
Result<Outcome> parse_outcome(std::string_view name);  // an error names the known outcomes

// The longest test id spark keeps, in bytes. A longer one (a parametrize id made of a 300 KB string) is cut to a head
// of its first bytes (at a character's start), then "…#" and 32 hex digits of two 64-bit hashes of the whole id, so
// that two long ids differing anywhere stay apart; an id ending with ']' (a parametrized test's row) keeps that ']'
// last. An id within the limit is kept as it is, and a cut one is within it: cutting is stable and idempotent, so the
// same long id from every report is the same test. The hashes guard against accidents, not against an adversary
// (who controls the test names already). Applied wherever test ids come in: JUnit reports, outcome files, cases.
inline constexpr size_t kTestIdLimit = 1024;
std::string bounded_test_id(std::string_view id);

struct TestOutcome {
  std::string test_id;  // node id; for a collection error, the test file's path (or the function its message names)
  Outcome outcome = Outcome::passed;
  std::string message;          // the <failure>/<error> message attribute and text, as the runner printed it
  std::string file;             // the test file relative to the root; "" when it could not be found there
  std::optional<int64_t> time;  // the suite's timestamp, seconds since the epoch (zone-less, as pytest writes it: UTC)
  size_t report_line = 0;       // where the <testcase> is in the report
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
  // The path of a file there whose path ends with `tail` at a '/' (or that an absolute `tail` ends with); "" when
  // none. Unset: never found.
  std::function<std::string(const std::string& tail)> find;
  // The JavaScript/TypeScript test files there (js_test_path) whose text holds each of `names` as a string literal
  // (holds_names): where node:test's test is, which its report does not say. Unset: none.
  std::function<std::vector<std::string>(const std::vector<std::string>& names)> holding;
};
// A path node:test, Jest, Vitest or Mocha takes for a test file: a JavaScript/TypeScript file named *.test.*,
// *.spec.*, *-test.*, *_test.*, test-*, test.* or under a test/, tests/ or __tests__/ folder; never under
// node_modules/.
bool js_test_path(std::string_view path);
// Whether `text` holds each of `names` as a whole string literal: 'name', "name" or `name`.
bool holds_names(std::string_view text, const std::vector<std::string>& names);
// A TestFiles::holding over the files `list` names that js_test_path accepts, each read by `read` once, on the first
// call (nullopt: left out). Copies share what they read.
std::function<std::vector<std::string>(const std::vector<std::string>& names)> holding_over(
    std::function<const std::vector<std::string>&()> list,
    std::function<std::optional<std::string>(const std::string& path)> read);
// The path of `paths` that best matches `tail` (see TestFiles::find): one under a test source root (src/test/,
// test/, tests/, __tests__/) before others, then the shortest, then the first.
std::string find_by_tail(const std::vector<std::string>& paths, std::string_view tail);
// The files under a folder (inside_root); `find` scans the folder once (hidden folders, node_modules, target and
// build left out) for files of the languages spark reads.
TestFiles files_under(const std::filesystem::path& root);

// Reads `report`; test files are looked up in `files`. A file that is not XML (or is cut off) or whose root element
// is not <testsuites>/<testsuite> is an error naming the file and line.
Result<JunitReport> read_junit(const std::filesystem::path& report, const TestFiles& files);
Result<JunitReport> read_junit(const std::filesystem::path& report, const std::filesystem::path& root);

// `relative` resolved under `root`, or nullopt when it is absolute, escapes the root (.., symbolic links) or does not
// exist as a regular file.
std::optional<std::filesystem::path> inside_root(const std::filesystem::path& root, const std::string& relative);

}  // namespace spark
