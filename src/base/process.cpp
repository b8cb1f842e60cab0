#include "base/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/clock.h"
#include "base/files.h"
#include "base/text.h"

namespace spark {

namespace fs = std::filesystem;

std::string CommandResult::describe() const {
  if (timed_out) return "timed out after " + std::to_string(std::llround(seconds)) + " s";
  if (signal) return std::string("killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(exit_code);
}

Result<fs::path> make_temp_dir(const std::string& prefix) {
  std::string tmpl = (temp_folder() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) return fail(std::string("cannot make a temporary folder: ") + std::strerror(errno));
  return fs::path(tmpl);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<CommandResult> run_command(const std::string& command, const fs::path& cwd, double timeout_seconds,
                                  size_t max_output) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  UniqueFd read_end(fds[0]), write_end(fds[1]);  // closed on every way out
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return fail(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(write_end.get(), STDOUT_FILENO);
    ::dup2(write_end.get(), STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (::chdir(cwd.c_str()) != 0) {
      std::fprintf(stderr, "spark: cannot enter %s: %s\n", cwd.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  write_end.reset();    // the parent only reads: the pipe ends when the command's side closes
  CommandResult result;
  std::string out;
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  bool open = true;
  int status = 0;
  bool reaped = false;
  while (open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 200)));
    if (n > 0) {
      char buf[8192];
      const ssize_t got = ::read(read_end.get(), buf, sizeof buf);
      if (got <= 0)
        open = false;
      else {
        out.append(buf, static_cast<size_t>(got));
        if (out.size() > 2 * max_output) out.erase(0, out.size() - max_output);
      }
    }
    // A grandchild may keep the pipe open after the command is gone: the command's end is the end.
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      // Drain what is already written, then stop.
      ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
      char buf[8192];
      ssize_t got;
      while ((got = ::read(read_end.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(got));
      open = false;
    }
  }
  ::kill(-pid, SIGKILL);  // the command's whole process group: nothing it started outlives it
  if (!reaped) ::waitpid(pid, &status, 0);
  read_end.reset();
  result.seconds = seconds_since(start);
  if (!result.timed_out) {
    if (WIFEXITED(status))
      result.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      result.signal = WTERMSIG(status);
  }
  if (out.size() > max_output) out = "[…]\n" + out.substr(out.size() - max_output);
  result.output = sanitize_utf8(out);
  return result;
}

}  // namespace spark
