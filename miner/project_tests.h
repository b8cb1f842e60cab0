// A project's own idea of its test code, read from its files at one commit: pytest's `python_files` and `testpaths`
// (in the file pytest itself would read: pytest.ini, pyproject.toml's [tool.pytest.ini_options], tox.ini's [pytest],
// setup.cfg's [tool:pytest], at the repository's top, the first that has the section), and the conventional name of
// unittest's and Django's test modules, `tests.py`. The miner adds them to `mine.test_code`'s globs, commit by commit:
// a top-level tests.py that `testpaths = tests.py` names is test code, and its fixes are candidates.
// Doctests of text files (pytest's `--doctest-glob`) are tests too: doctest_text_file reads their ids.
// Contract: pure functions over file contents (the caller reads them from git objects); a configuration is a
// stranger's text: at most kMaxConfigBytes of a file and kMaxConfigEntries entries are read, and a path that is
// absolute or climbs out with ".." is left out.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "miner/git_history.h"
#include "miner/miner.h"

namespace spark {

inline constexpr size_t kMaxConfigBytes = size_t{256} * 1024;
inline constexpr size_t kMaxConfigEntries = 64;

struct PytestConfig {
  std::string source;                     // "setup.cfg [tool:pytest]"; "" when the project has none
  std::vector<std::string> python_files;  // "test_*.py", "tests.py", "check_*.py"
  std::vector<std::string> testpaths;     // "tests", "tests.py", "src/pkg/tests"
};

// The configuration pytest would read at the repository's top. `read` gives a file's content, nullopt when absent.
PytestConfig read_pytest_config(const std::function<std::optional<std::string>(const std::string&)>& read);

// The test-code globs `config` adds (TestCodeRule's forms): each python_files pattern as it is (a file-name glob, or a
// path glob when it holds '/'), each testpaths entry as `ENTRY/**` (a folder; a name ending in .py is the file
// itself), and "tests.py".
std::vector<std::string> project_test_globs(const PytestConfig& config);

// `setting` with the project's globs at each of `shas` added (a configuration may change with the fix).
TestCodeRule project_test_code(const TestCodeRule& setting, const GitRepository& repo,
                               const std::vector<std::string>& shas);

// Whether the code of `code_path` names the test-data file `data_path` (project-relative): its file name, or a
// folder on the way from the code's folder down to it, as a string ("compliance" of tests/compliance/x.json in
// tests/test_compliance.py). How tests that load every file of a data folder find them.
bool refers_to_data(std::string_view code, const std::string& code_path, const std::string& data_path);

// The text file a doctest test id runs, or nullopt when the id is no text-file doctest. pytest names the doctest of
// `tests/tests.md` "tests/tests.md::tests.md"; a JUnit report's classname "tests.tests.md" read back as a Python
// module gives "tests/tests.py::md::tests.md". A doctest of a module ("pkg/mod.py::pkg.mod.f") is no text file.
std::optional<std::string> doctest_text_file(const std::string& test_id);

}  // namespace spark
