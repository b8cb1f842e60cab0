// Running a command: /bin/sh in a folder, with a timeout, its output captured; and the two helpers such commands
// need (a fresh temporary folder, shell quoting). The miner runs test commands with it, the evaluation gnuplot.
// Contract: thread-safe (each call owns its child, pipe and buffers); failures to start come back as Result naming
// what failed; a command that runs and fails is a CommandResult, not an error. Nothing the command starts outlives
// the call: its whole process group is killed when it ends or times out.
#pragma once

#include <filesystem>
#include <string>

#include "base/result.h"

namespace spark {

struct CommandResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it (it killed itself, or was killed)
  bool timed_out = false;
  std::string output;  // standard output and error interleaved; the tail when long
  double seconds = 0;
  bool passed() const { return exit_code == 0 && !timed_out && signal == 0; }
  std::string describe() const;  // "exit 1", "timed out after 5 s", "killed by signal 9"
};

// Runs `command` with /bin/sh in `cwd`. On timeout the whole process group is killed. Keeps the last
// `max_output` bytes of output.
Result<CommandResult> run_command(const std::string& command, const std::filesystem::path& cwd, double timeout_seconds,
                                  size_t max_output = size_t{64} * 1024);

// A new, empty folder under the system's temporary directory ("/tmp/<prefix>-XXXXXX").
Result<std::filesystem::path> make_temp_dir(const std::string& prefix);

// A word for /bin/sh: single-quoted.
std::string shell_quote(const std::string& s);

}  // namespace spark
