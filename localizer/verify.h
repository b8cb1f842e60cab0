// Verified suggestions (`spark localize --verify`, `spark record --verify`): each suggested edit (suggest.h) is made in
// a scratch work tree and the failing test run with the user's command, so a person reads whether the edit works,
// not only that a similar fix once looked like it.
//
// Per failure with suggestions: a throw-away work tree of the commit the failure was seen at (written from git
// objects, GitRepository::materialize: the user's work tree, index and HEAD are never touched); without a commit (a
// localization of the work tree as it is), HEAD's tree with the work tree's edited tracked files and the failure's
// test files copied over it. The command first runs on the tree unedited: a test that does not fail there says
// nothing about an edit (every suggestion is then `not run`, with why). Then each suggestion in turn (the preferred
// ones first): its line replaced, the command run, the file put back.
//   verified      the test passes with the edit
//   not verified  it still fails: `message` is the new failure's (the exception and message, else its last line)
//   not run       no verdict: the budget spent, the line not as spark read it, a timeout, a run that could not run
//                 the test (classify_run's environment), the unedited test passing, a stop signal
// The command is the user's (a flag, never the repository's configuration): /bin/sh runs it in the scratch tree's
// folder where the failures' test-file paths start (`query_root`: the repository's top for a JUnit report or recorded
// failures, the current folder for --test files), with {test_id} replaced by the shell-quoted test id (expand_command).
//
// Bounds: `per_failure` seconds for one failure's runs and `budget` for them all; a run gets what is left of both.
// `jobs` failures at a time, each in its own work tree, each worker with its own repository handle.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/case.h"
#include "localizer/localizer.h"

namespace spark {

struct VerifyOptions {
  std::string command;               // "CMD {test_id}"
  double per_failure = 120;          // seconds
  double budget = 600;               // seconds, for the whole run's verification
  unsigned jobs = 1;                 // failures verified at once
  std::filesystem::path repo;        // the repository (its top or a folder in it)
  std::string commit;                // the tree the failures were seen at; "" = HEAD and the work tree's edits
  std::filesystem::path query_root;  // where the queries' relative test-file paths start; the commands run there
  std::function<void(const std::string&)> progress;  // one line per failure verified
};

struct VerifySummary {
  size_t failures = 0;  // with at least one suggestion
  size_t suggestions = 0, verified = 0, not_verified = 0, not_run = 0;
  double seconds = 0;
};

// Verifies the suggestions of every localized result (results[i] is queries[i]'s), fills each Suggestion's
// `verification`, and puts the verified ones first (a verified edit of a line becomes that line's preferred one). An
// error only when nothing can be verified at all (no repository, no temporary folder, an unknown commit).
Result<VerifySummary> verify_suggestions(const std::vector<Case>& queries, std::vector<Result<Localization>>& results,
                                         const VerifyOptions& options);

// "3 suggested edits of 2 failures: 1 verified, 1 not verified, 1 not run (41.2 s)".
std::string verify_summary_line(const VerifySummary& s);

}  // namespace spark
