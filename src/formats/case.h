// The case model: one fault-labelled (or query) failing test case, as in docs/FORMATS.md
// (the interchange format of ../shared/docs/corpus-format.md).
// Contract: value types; readers return Result whose message names the file and line, and return nothing from a file
// with a bad line; the functions are thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/result.h"

namespace spark {

struct SourceFile {
  std::string path;
  std::string content;  // exact text, valid UTF-8
};

struct LineRef {
  std::string path;
  int line = 0;  // 1-based, in the file as stored
  friend bool operator==(const LineRef&, const LineRef&) = default;
  friend auto operator<=>(const LineRef&, const LineRef&) = default;
};

// "12" or "tests/t.py:12" as a LineRef (an empty path for the first); nullopt when it names no line.
std::optional<LineRef> parse_line_ref(std::string_view text);

// What changed since the failing test last passed (docs/FORMATS.md, "Change since the last pass"): the commits between
// its last pass and its failure hold the change that broke it. Read by the localizer's change features (0 without it).
struct ChangeSince {
  std::string last_pass;     // the last commit the test passed at (`last_pass_commit`)
  std::string break_commit;  // the first commit it failed at after that, when known ("" else: `break_commit`)
  // A line of the case's files that differs from its version at the last pass, and the commit that made it so ("":
  // not committed, the work tree's).
  struct Line {
    LineRef at;
    std::string commit;
  };
  std::vector<Line> lines;
  // A name (a definition changed, a name removed or renamed) or literal (an old value) that a change of product code
  // (code that is not test code) made since the last pass, the file and the commit ("" when the range was too long to
  // walk commit by commit).
  struct Product {
    std::string token;
    bool literal = false;
    std::string path, commit;
  };
  std::vector<Product> product;
};
// The most product names and literals a case carries: a change that touched more is a rewrite, and its first ones (the
// oldest commits first) are kept.
inline constexpr size_t kMaxProductChanges = 512;

struct Case {
  std::string id;
  std::string project;
  std::string test_id;
  std::string language;
  std::string failure_time;   // as given (ISO-8601)
  int64_t failure_epoch = 0;  // failure_time in seconds since 1970-01-01 UTC
  std::string error_message;
  std::vector<SourceFile> files;
  std::vector<LineRef> faulty_lines;  // empty: unlabelled (a query)
  // A faulty line's replacement in its fix (a faulty line's optional `fix`: the new side's lines, none for a
  // deletion), for the lines whose record says it; a case mined before spark kept fixes has none.
  std::map<LineRef, std::vector<std::string>> fixes;
  std::optional<std::string> faulty_commit;
  std::optional<std::string> fixed_commit;
  std::optional<std::string> source;
  std::optional<ChangeSince> change;  // `last_pass_commit`, `break_commit`, `change`: absent when no pass is known
  // The record as read, without `files` and `error_message` (kept separately): export merges them back, so
  // absent-versus-null and unknown keys survive the round trip. Unknown top-level keys are moved under `meta`.
  nlohmann::json record = nlohmann::json::object();

  const SourceFile* file(std::string_view path) const;
  bool labelled() const { return !faulty_lines.empty(); }
};

// Parses an ISO-8601 time ("2026-08-13T23:46:43Z", optional fraction, "Z" or "±HH:MM") into Unix seconds.
Result<int64_t> parse_iso8601(std::string_view text);
std::string format_iso8601(int64_t epoch);
// Now, in seconds since 1970-01-01 UTC.
int64_t now_epoch();

// Builds a case from one JSON record and checks every rule of the format: required keys and their types, valid
// UTF-8, a time that parses, each faulty line in a listed file, in range and not blank. The error message is the
// reason only; callers add "file:line: ".
Result<Case> case_from_json(nlohmann::json record);

// Writes `change` into a case's record: `last_pass_commit`, `break_commit` (when known) and `change` (when it holds a
// line or a product change).
void put_change(nlohmann::json& record, const ChangeSince& change);

// The record for export: the stored record with `files` and `error_message` merged back.
nlohmann::json case_to_json(const Case& c);

// A stable key for "the same failure": hash of error message and files (path and content). Used to keep a query's
// exact duplicates out of its own search.
std::string content_key(const Case& c);

// A key for "the same fault": the same faulty lines (path and line) in the same versions of the files that hold them,
// whichever test failed and whichever commit fixed them. A test that fails at several commits with unchanged test code
// until one fix is one fault, and so are the tests one fixture, helper, base-class method or shared value broke when
// one fix labels the same lines for each, and one faulty version fixed both by a side-branch commit and by the merge
// that brought it in (a first-parent discovery labels the merge, an `--all-parents` one the side commit): one case.
// An unlabelled case keys by its fix commit (when it has one), its test and every file.
std::string fault_key(const Case& c);

// The cases of a JSON Lines file, with the line each came from (for messages about them later).
struct CasesFile {
  std::vector<Case> cases;
  std::vector<size_t> lines;
};

// Reads a JSON Lines file of cases. Validates every line (and that ids are unique within the file) and fails on the
// first bad one with "PATH:LINE: reason"; nothing is returned from a file that has any bad line.
// Blank lines are skipped.
Result<CasesFile> read_cases_jsonl(const std::filesystem::path& path);

// The same reading, streamed: each valid case is handed to `take` with its line as soon as it is read, one case in
// memory at a time (and the ids seen so far, for the uniqueness check). Stops at the first bad line ("PATH:LINE:
// reason") or at the first error `take` returns; what was handed out before stays the caller's to undo (spark import
// writes in one transaction). Lines are parsed by JsonLineParser (json_line.h).
Status for_each_case_jsonl(const std::filesystem::path& path, const std::function<Status(Case&&, size_t line)>& take);

// The longest line a cases file may have: a case's files are at most kMaxTestFileBytes each, and a case lists a few.
inline constexpr size_t kMaxCaseLineBytes = size_t{256} << 20;

// The largest test file spark reads: 16 MiB and 100,000 lines (the development corpus's largest is 240 KB and 7,000
// lines). Parsing, scoping and the ranker's features cost memory per line: a 50 MB file of 5.2M short lines took
// 7.5 GB and 272 s to index, 4 MB of 420k lines 637 MB and 5 s. A larger file is refused where it enters (import,
// --test), naming it.
inline constexpr size_t kMaxTestFileBytes = size_t{16} << 20;
inline constexpr size_t kMaxTestFileLines = 100'000;
// "" when `content` is within both limits, else why not (for an error that names the file).
std::string test_file_too_large(std::string_view content);

}  // namespace spark
