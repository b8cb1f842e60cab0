// A failing test becomes a query: every way a failure reaches spark (a test file and its error output, a JUnit
// report, a cases file, a failure `spark record` stored) is turned into the Case the localizer takes, here, from plain
// inputs. Each function reads only what it is given (files under a root, git objects at a commit); what a user should
// hear about (a stray byte replaced, a failure left out and why) is appended to `notes`, never printed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/case.h"
#include "miner/mining_store.h"

namespace spark {

// Reads a test file for a query: valid UTF-8 text within the size limits; a binary file or invalid bytes are errors
// naming file and line.
Result<std::string> read_test_file(const std::string& path);
// The corpus format's `language` for a test file: from its extension ("other" for an extension spark has no
// structure for; "python" without one).
std::string language_field_for(const std::string& path);

// A failure as a query: id = test id, the message (invalid UTF-8 replaced), its time (default now) and its test
// files, the test's own first.
Case failure_query(const std::string& test_id, const std::string& message, std::optional<int64_t> time,
                   std::vector<SourceFile> files);

// `spark localize --test FILE… --error FILE`: the failing test's files and the failure output already read.
struct TestFileFailure {
  std::vector<std::string> test_files;  // read here; the first holds the test
  std::string error_name;               // where the output came from, for messages (a file, or "-")
  std::string error_text;               // the output as read (pytest's terminal output, or one traceback)
  std::string test_id;                  // "" = from pytest's summary, else from the traceback and the code
  std::string time;                     // ISO-8601; "" = now
  // Where parsed test-file versions persist between processes (StructureCache::persist_in); "" = nowhere.
  std::filesystem::path structures;
};
Result<Case> query_from_test_files(const TestFileFailure& failure, std::vector<std::string>& notes);

// `spark localize --case FILE [--id ID]`: the cases of a cases.jsonl file (one, with an id) with their labels and
// meta hidden; an error when none is left.
Result<std::vector<Case>> queries_from_case_file(const std::string& file, const std::string& id);

// Where a JUnit report's test files are looked up when no --root is given. pytest names them from its rootdir, most
// often the repository's top (where its configuration is), as `spark record` reads them: from a folder below the top,
// the top when more of the report's failing tests' files are found there than here; "." otherwise (outside a git work
// tree, at its top, or a report that cannot be read: the caller's read says why).
std::string default_junit_root(const std::string& report);

// Every failed or erroring test of a JUnit report, with its test file (and the repository's other test files its
// traceback names, the conftest.py files and helpers it reaches) read from the work tree at `root`; nothing outside
// the root is read. With `test_id`, only that test's failure (an error when the report has none).
Result<std::vector<Case>> queries_from_junit(const std::string& report, const std::string& root,
                                             const std::string& test_id, std::vector<std::string>& notes);

// The failures among a recorded report's outcomes as queries: each test's files from git objects at `commit` (the
// test file, then the Python test code it depends on under `test_code`), as recorded. The files the store's sync
// already read (`snapshots`, by the outcome's position) are taken from there instead of git. A failure whose file is missing or past the limits is named in a
// note and left out.
std::vector<Case> recorded_queries(const GitRepository& repo, const std::string& commit,
                                   const std::vector<RecordedOutcome>& outcomes, const TestCodeRule& test_code,
                                   const std::vector<FailureSnapshot>& snapshots, std::vector<std::string>& notes);

}  // namespace spark
