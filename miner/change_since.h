// What changed since a test last passed: the evidence of the change that broke it (formats/case.h, ChangeSince).
//
// Between the last pass L and the failing version, each commit of the first-parent line from L to the failure is read:
// - test side: every line of the case's files that differs from its version at L, with the commit that last changed
//   it (each file's versions diffed commit by commit, lines carried through unchanged ranges, as blame does);
// - product side: each changed file that is code and not test code (TestCodeRule) gives the function whose body a hunk
//   changed (its callers see the change), the names a changed definition line defines (`def f`, `class C`,
//   `function f`, a module-level `NAME =`), the names its removed lines
//   used and its added lines no longer use (removed or renamed), and the literals its removed lines held and its added
//   lines no longer hold (an old value a stale expectation may still compare with).
// A range longer than `max_commits` commits, or an L not on the failure's first-parent line, is read as one diff:
// the same lines and names, with no commit named.
// Contract: reads git objects (and, for a work tree's failure, the files given); never writes. Bounded: at most
// kMaxProductChanges names and literals, product files up to kMaxTestFileBytes each and kMaxProductBytes in all.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "formats/case.h"
#include "miner/git_history.h"
#include "miner/miner.h"

namespace spark {

// The most product code change_since diffs for one failure (both versions of each changed file, added up): past it the
// older commits' names and literals are what the case gets.
inline constexpr size_t kMaxProductBytes = size_t{64} << 20;

struct ChangeSinceOptions {
  TestCodeRule test_code;
  size_t max_commits = 1000;  // commits walked one by one; a longer range is read as one diff
};

// The change from `last_pass` to `failing` (full shas or revisions git resolves), for a case whose files are `files`
// (their version at the failure: `failing`'s, or a work tree's when they differ from it, attributed to no commit).
// `break_commit` is recorded as given. An unknown commit is an error naming it.
Result<ChangeSince> change_since(const GitRepository& repo, const std::string& last_pass, const std::string& failing,
                                 const std::string& break_commit, const std::vector<SourceFile>& files,
                                 const ChangeSinceOptions& options);

// The product tokens of one changed file (exposed for tests): the definitions on changed lines, the names removed and
// the old literals, in the order the diff shows them.
std::vector<ChangeSince::Product> product_tokens(const std::string& before, const std::string& after,
                                                 const std::string& path, const std::string& commit);

}  // namespace spark
