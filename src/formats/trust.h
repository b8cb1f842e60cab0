// Which configuration files spark believes (docs/SECURITY.md).
//
// A repository under test may come from a stranger's pull request, and so may its `.spark.toml`. Like git, which never
// takes configuration from tracked files, and direnv, which runs an `.envrc` only once it was allowed, spark takes
// the settings that send data somewhere, hold or reach credentials, write outside the repository, weaken a safety rule
// or run commands only from sources the person running spark controls: flags, the environment, the system file
// (/etc/spark/config.toml), the user's file ($XDG_CONFIG_HOME/spark/config.toml), a file named with --config that
// lies outside every git work tree, or a repository file its owner trusted as it is now (`spark trust`). A trusted
// file is recorded outside the repository, in the user's configuration folder, with its path and its exact content:
// a file changed by a single byte (another branch checked out, a pull request's edit) is untrusted again.
// Contract: functions of no shared state; a record is written atomically; errors name the path.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/config.h"

namespace spark {

// The user's spark configuration folder: $XDG_CONFIG_HOME/spark, else $HOME/.config/spark; none when neither
// variable names an absolute path.
std::optional<std::filesystem::path> user_config_folder();
// The user's configuration file (user_config_folder()/config.toml) and the system's (/etc/spark/config.toml), when
// each exists.
std::optional<std::filesystem::path> user_config_file();
std::optional<std::filesystem::path> system_config_file();

// True when `file` lies inside a git work tree (a folder above it, or its own, holds `.git`): a file the repository
// may have brought.
bool inside_work_tree(const std::filesystem::path& file);

// The top of the repository that holds `file`: the nearest folder above it that holds `.git`, else the file's
// folder. A repository file may name paths inside it only.
std::filesystem::path repository_top(const std::filesystem::path& file);

// True when `candidate` (made absolute from `base` when relative) stays inside `top` once every symbolic link of it
// that exists is followed.
bool path_inside(const std::filesystem::path& top, const std::filesystem::path& base,
                 const std::filesystem::path& candidate);

// True when the user trusted `file` with exactly `content`.
bool is_trusted(const std::filesystem::path& file, const std::string& content);

// `spark trust --list`: each trusted file with when, and whether it changed since or is gone; one per line.
std::string trusted_files_text();
// What trusting `file` changes: the settings of it an untrusted repository file may not set (`untrusted`: the file
// loaded untrusted), which are now used; the text `spark trust` says.
std::string trusted_now_text(const std::filesystem::path& file, const Config& untrusted);

// A run's configuration files, lowest first: the system's, the user's, then the project's `file` (found, or named with
// --config: `named`). The project's is believed whole when its owner trusted it as it is, or when it was named and
// lies outside every git work tree; otherwise it may set only what a repository may (Config::File::trusted).
std::vector<Config::File> config_layers(const std::optional<std::filesystem::path>& file, bool named);

struct TrustedFile {
  std::filesystem::path path;
  std::string trusted_at;  // ISO-8601 UTC
  bool unchanged = false;  // the file exists and still has the trusted content
};

// Records `file` as trusted with its content now; fails when there is no user configuration folder.
Status trust_file(const std::filesystem::path& file);
// Forgets `file`; true when it was trusted.
Result<bool> untrust_file(const std::filesystem::path& file);
// Every trusted file, by path.
std::vector<TrustedFile> trusted_files();

}  // namespace spark
