// The miner's view of a git repository, over libgit2: the history to walk, a file's text at a commit (read from git
// objects, no checkout), and the labelling diff between a faulty and a fixed version of a test file.
//
// Labelling rule (the paper's §5.1): the faulty lines are the lines of the faulty version that the fix removed or
// modified (a modification is a removal plus an addition). Pure additions label nothing; removed blank lines label
// nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

struct git_repository;
struct git_oid;

namespace spark {

struct CommitInfo {
  std::string sha;      // 40 hex digits
  int64_t time = 0;     // committer time, seconds since the epoch (UTC)
  std::string summary;  // first line of the message
};

class GitRepository {
 public:
  // Opens the repository at or above `path`. Not a repository is an error naming the path. Every object is read in
  // bounded work: a damaged loose object (libgit2 1.5 loops for ever on a truncated one) is a read error naming its
  // file (is_read_error).
  static Result<std::unique_ptr<GitRepository>> open(const std::filesystem::path& path);
  ~GitRepository();
  GitRepository(const GitRepository&) = delete;
  GitRepository& operator=(const GitRepository&) = delete;

  // The history from `tip` (default HEAD), oldest first: first-parent only by default, else every reachable commit
  // in topological order. `since`/`until` (epoch seconds) bound the committer time when set. A shallow clone's
  // history ends at its boundary commits (shallow_boundary).
  Result<std::vector<CommitInfo>> history(bool first_parent = true, std::optional<int64_t> since = std::nullopt,
                                          std::optional<int64_t> until = std::nullopt,
                                          const std::string& tip = "") const;

  // Paths that differ between the trees of two commits (added, removed, modified, renamed: both names).
  Result<std::vector<std::string>> changed_paths(const std::string& from_sha, const std::string& to_sha) const;

  // Tracked paths whose work-tree or index version differs from commit `sha`'s tree (modified, deleted, staged, added
  // to the index), as `git diff HEAD` lists them; untracked and ignored files are not listed, submodules are left
  // out. Empty for a bare repository.
  Result<std::vector<std::string>> changed_in_work_tree(const std::string& sha) const;

  // Writes the tree of commit `sha` into `dir` (which must not exist or be empty), without touching the
  // repository's own work tree, index or HEAD: a throw-away work tree for running tests at that commit.
  Status materialize(const std::string& sha, const std::filesystem::path& dir) const;

  // The configured author, "Name <email>" from git config (the repository's, then the user's); empty when unset.
  std::string configured_author() const;

  // A git config value (the repository's, then the user's); empty when unset.
  std::string config_string(const std::string& key) const;

  // The parents of commit `sha` (full shas, the first parent first); empty for a root commit.
  Result<std::vector<std::string>> parents(const std::string& sha) const;

  // Whether commit `sha` is `ancestor` or descends from it (both full shas).
  Result<bool> descends_from(const std::string& sha, const std::string& ancestor) const;

  // Commit `sha`'s committer time (seconds since the epoch, UTC). An unknown commit is an error naming it.
  Result<int64_t> commit_time(const std::string& sha) const;

  // The oldest commit on HEAD's first-parent line; empty in a repository with no commits.
  std::string root_commit() const;

  // The full sha of `rev` (a sha, a prefix, a branch or tag name). An unknown revision is an error naming it.
  Result<std::string> resolve(const std::string& rev) const;

  // `path`'s content at `sha`; nullopt when the file does not exist there. Binary content (a NUL byte) is an error.
  Result<std::optional<std::string>> file_at(const std::string& sha, const std::string& path) const;

  // Every file path of commit `sha`'s tree (blobs; submodules and links excluded), in tree order.
  Result<std::vector<std::string>> paths_at(const std::string& sha) const;

  // Where git looks for hooks: core.hooksPath when set (relative to the work tree), else GIT_DIR/hooks.
  std::filesystem::path hooks_dir() const;

  // The work tree; for a bare repository, its folder.
  const std::filesystem::path& workdir() const { return workdir_; }
  bool bare() const;
  bool shallow() const;
  // A shallow clone's boundary: the commits whose parents it does not have (.git/shallow); empty when not shallow.
  std::vector<std::string> shallow_boundary() const;

 private:
  struct RepositoryFree {
    void operator()(git_repository* repo) const;
  };
  GitRepository(git_repository* repo, std::filesystem::path workdir) : repo_(repo), workdir_(std::move(workdir)) {}
  Result<std::vector<CommitInfo>> commit_infos(const std::vector<git_oid>& commits, std::optional<int64_t> since,
                                               std::optional<int64_t> until) const;
  std::unique_ptr<git_repository, RepositoryFree> repo_;
  std::filesystem::path workdir_;
};

// Whether `e` is a read error: a git object that should be there could not be read (damaged, missing, not readable by
// this user). Such an error is no fact about the history, and a caller that would store it as a failure's result
// leaves the failure undecided instead, for a run after the repair. Its message names the object (and its file, for a
// damaged loose object) and the way out (`git fsck`). GitRepository's reads return such errors; every other error
// they return is about the input (an unknown commit, a binary file).
bool is_read_error(const Error& e);

// A unified diff (`context` lines around each change) of two versions of one file, as `git diff` prints it.
Result<std::string> unified_diff(const std::string& before, const std::string& after, const std::string& path,
                                 int context = 3);

// Lines of `faulty` (1-based) that `fixed` removed or modified; blank removed lines are not counted.
Result<std::vector<int>> removed_or_modified_lines(const std::string& faulty, const std::string& fixed,
                                                   const std::string& path);

// Each of those lines' replacement in `fixed`: within one hunk of the diff (no context), a line removed where as many
// lines were added as removed gets its counterpart; otherwise every removed line of the hunk gets the hunk's whole
// new side (none: the fix deleted it).
Result<std::map<int, std::vector<std::string>>> line_fixes(const std::string& faulty, const std::string& fixed,
                                                           const std::string& path);

// One hunk of a line diff with no context: `removed` (lines old_start.. of `before`) became `added` (lines new_start..
// of `after`); both 1-based, and a start is the line before when its side is empty, as git counts.
struct LineHunk {
  int old_start = 0, new_start = 0;
  std::vector<std::string> removed, added;
};
Result<std::vector<LineHunk>> line_hunks(const std::string& before, const std::string& after, const std::string& path);

// Who decides (an audit, a dismissal): `given`, else the git config user of the repository at `repo_path`, else $USER,
// else "unknown".
std::string author_or_default(const std::string& given, const std::string& repo_path);

}  // namespace spark
