// The miner's view of a git repository, over libgit2: the history to walk, a file's text at a commit (read from git
// objects, no checkout), and the labelling diff between a faulty and a fixed version of a test file.
//
// Labelling rule (the paper's §5.1): the faulty lines are the lines of the faulty version that the fix removed or
// modified (a modification is a removal plus an addition). Pure additions label nothing; removed blank lines label
// nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "result.h"

struct git_repository;

namespace spark {

struct CommitInfo {
  std::string sha;      // 40 hex digits
  int64_t time = 0;     // committer time, seconds since the epoch (UTC)
  std::string summary;  // first line of the message
};

class GitRepository {
 public:
  // Opens the repository at or above `path`. Not a repository is an error naming the path.
  static Result<std::unique_ptr<GitRepository>> open(const std::filesystem::path& path);
  ~GitRepository();
  GitRepository(const GitRepository&) = delete;
  GitRepository& operator=(const GitRepository&) = delete;

  // The history from HEAD, oldest first: first-parent only by default, else every reachable commit in topological
  // order. `since`/`until` (epoch seconds) bound the committer time when set.
  Result<std::vector<CommitInfo>> history(bool first_parent = true, std::optional<int64_t> since = std::nullopt,
                                          std::optional<int64_t> until = std::nullopt) const;

  // The full sha of `rev` (a sha, a prefix, a branch or tag name). An unknown revision is an error naming it.
  Result<std::string> resolve(const std::string& rev) const;

  // `path`'s content at `sha`; nullopt when the file does not exist there. Binary content (a NUL byte) is an error.
  Result<std::optional<std::string>> file_at(const std::string& sha, const std::string& path) const;

  const std::filesystem::path& workdir() const { return workdir_; }
  bool shallow() const;

 private:
  GitRepository(git_repository* repo, std::filesystem::path workdir) : repo_(repo), workdir_(std::move(workdir)) {}
  git_repository* repo_;
  std::filesystem::path workdir_;
};

// Lines of `faulty` (1-based) that `fixed` removed or modified; blank removed lines are not counted.
Result<std::vector<int>> removed_or_modified_lines(const std::string& faulty, const std::string& fixed,
                                                   const std::string& path);

}  // namespace spark
