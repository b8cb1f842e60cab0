// Running a command: /bin/sh in a folder, with a timeout, its output captured; and the two helpers such commands
// need (a fresh temporary folder, shell quoting). The miner runs test commands with it, the evaluation gnuplot.
// Contract: thread-safe (each call owns its child, pipe and buffers); failures to start come back as Result naming
// what failed; a command that runs and fails is a CommandResult, not an error. Nothing the command starts outlives
// the call: its whole process group is killed when it ends or times out; while a ChildSubreaper lives, so is every
// descendant of spark that carries the run's mark in its environment (a process the command put in a new session
// with setsid, a daemon that forked twice: without a subreaper those go to init, out of reach). That clean-up reads
// /proc (every process's stat: about 1 ms per 200 processes), so only a subreaper pays it.
#pragma once

#include <filesystem>
#include <string>

#include "base/result.h"

namespace spark {

struct CommandResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it (it killed itself, or was killed)
  bool timed_out = false;
  int stopped = 0;     // a stop signal spark caught (StopSignals) ended the run: that signal; it says nothing then
  std::string output;  // standard output and error interleaved; the tail when long
  double seconds = 0;
  bool passed() const { return exit_code == 0 && !timed_out && signal == 0 && stopped == 0; }
  std::string describe() const;  // "exit 1", "timed out after 5 s", "killed by signal 9", "stopped: spark got SIGTERM"
};

// Runs `command` with /bin/sh in `cwd`. On timeout, or when a stop signal is caught (StopSignals), the whole process
// group and the run's marked descendants are killed. Keeps the last `max_output` bytes of output. The command's
// environment is spark's plus SPARK_RUN_MARK, the run's mark (a command run inside a run keeps its outer marks).
Result<CommandResult> run_command(const std::string& command, const std::filesystem::path& cwd, double timeout_seconds,
                                  size_t max_output = size_t{64} * 1024);

// A new, empty folder under the system's temporary directory ("/tmp/<prefix>-XXXXXX").
Result<std::filesystem::path> make_temp_dir(const std::string& prefix);

// A word for /bin/sh: single-quoted.
std::string shell_quote(const std::string& s);

// While one lives, SIGINT, SIGTERM and SIGHUP (each one not ignored when it was made: `nohup` and `cmd &` keep
// theirs) no longer end spark: the first one caught is recorded, and every run_command under way ends within 0.1 s
// (CommandResult::stopped), as does every later call before it starts anything. The caller then cleans up and ends
// as the signal would have: end_by_signal(caught()). At most one at a time; made and destroyed on one thread.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();  // the dispositions from before back (a signal caught stays recorded)
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};
// The first stop signal caught (SIGTERM, ...), 0 when none.
int stop_signal_caught();
// "SIGTERM", "SIGINT", "SIGHUP", else "signal N".
std::string signal_name(int signal);
// Ends the process as `signal`'s default action does (so a shell sees it killed by the signal; 128 + signal should
// the signal not end it). For the command-line layer, after its clean-up.
[[noreturn]] void end_by_signal(int signal);

// While one lives, a process whose parent ends comes to spark instead of init (prctl PR_SET_CHILD_SUBREAPER): what a
// command started in a new session stays within reach of run_command's clean-up. The destructor kills what is left
// (end_descendants) and gives orphans back to init. At most one at a time; made and destroyed on one thread.
class ChildSubreaper {
 public:
  ChildSubreaper();
  ~ChildSubreaper();
  ChildSubreaper(const ChildSubreaper&) = delete;
  ChildSubreaper& operator=(const ChildSubreaper&) = delete;

 private:
  int before_ = 0;
};

// Kills (SIGKILL) and reaps every descendant of spark but the commands run_command is running now and theirs; waits
// at most `seconds` for them to go. Returns how many were killed.
size_t end_descendants(double seconds = 5);

}  // namespace spark
