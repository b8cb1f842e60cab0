#include "base/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/files.h"
#include "base/text.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): unistd.h declares it only with _GNU_SOURCE

namespace spark {

namespace fs = std::filesystem;

namespace {

// The first stop signal caught while a StopSignals lives (0: none). Lock-free: the handler only stores it.
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_stop_signal(int signal) {
  int none = 0;
  g_stop.compare_exchange_strong(none, signal);
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_before[std::size(kStopSignals)];  // NOLINT: the dispositions StopSignals replaced
bool g_replaced[std::size(kStopSignals)] = {};       // NOLINT

// The commands run_command runs now (their leaders' pids): another call's clean-up never reaps or kills them.
std::mutex g_running_mu;
std::set<pid_t> g_running;  // NOLINT
std::atomic<unsigned long> g_runs{0};

constexpr std::string_view kMarkVariable = "SPARK_RUN_MARK";

struct ProcessEntry {
  pid_t pid = 0, parent = 0;
  char state = '?';  // /proc/PID/stat's: R, S, D, Z (a zombie), ...
};

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// Up to `limit` bytes of a /proc file (`once`: what one read gives, enough for the head of a stat file); empty when
// it cannot be read (the process is gone, or not ours).
std::string read_proc(const std::string& path, size_t limit, bool once = false) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t got;
  while (out.size() < limit && (got = ::read(fd.get(), buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(got));
    if (once) break;
  }
  return out;
}

// Whether this process is a child subreaper (ChildSubreaper): only then can a process a run left still be its
// descendant once the run's group is killed (else the orphans went to init).
bool subreaper() {
  int on = 0;
  return ::prctl(PR_GET_CHILD_SUBREAPER, &on) == 0 && on != 0;
}

// Every process of the machine that /proc shows, with its parent and state.
std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  std::unique_ptr<DIR, DirCloser> dir(::opendir("/proc"));
  if (!dir) return out;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string_view name = e->d_name;
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    // "PID (COMM) S PPID ...": COMM may hold spaces and parentheses, so read after the last ')'.
    const std::string stat = read_proc("/proc/" + std::string(name) + "/stat", 512, /*once=*/true);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    ProcessEntry p;
    p.pid = static_cast<pid_t>(std::strtol(std::string(name).c_str(), nullptr, 10));
    p.state = stat[close + 2];
    p.parent = static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));
    out.push_back(p);
  }
  return out;
}

// Whether process `pid`'s environment holds `mark` among SPARK_RUN_MARK's comma-separated marks.
bool carries_mark(pid_t pid, const std::string& mark) {
  const std::string env = read_proc("/proc/" + std::to_string(pid) + "/environ", size_t{4} << 20);
  const std::string key = std::string(kMarkVariable) + "=";
  for (size_t at = 0; at < env.size();) {
    const size_t end = std::min(env.find('\0', at), env.size());
    const std::string_view entry(env.data() + at, end - at);
    if (entry.starts_with(key)) {
      std::string_view marks = entry.substr(key.size());
      while (!marks.empty()) {
        const size_t comma = std::min(marks.find(','), marks.size());
        if (marks.substr(0, comma) == mark) return true;
        marks.remove_prefix(std::min(comma + 1, marks.size()));
      }
      return false;
    }
    at = end + 1;
  }
  return false;
}

// Kills (SIGKILL) the live descendants of this process that `pick` chooses, and everything under them, until none is
// left or `seconds` pass; the processes run_command is running now and theirs are never touched. Reaps this
// process's zombie children on the way (what comes back to a subreaper must be waited for). Returns how many
// processes were killed.
size_t kill_descendants(const std::function<bool(pid_t)>& pick, double seconds) {
  const pid_t self = ::getpid();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::set<pid_t> killed;
  for (;;) {
    const std::vector<ProcessEntry> all = list_processes();
    std::map<pid_t, std::vector<const ProcessEntry*>> children;
    for (const auto& p : all) children[p.parent].push_back(&p);
    std::set<pid_t> running;
    {
      std::lock_guard lock(g_running_mu);
      running = g_running;
    }
    std::vector<pid_t> targets;
    std::vector<std::pair<pid_t, bool>> stack{{self, false}};  // (process, chosen by an ancestor)
    while (!stack.empty()) {
      const auto [pid, chosen] = stack.back();
      stack.pop_back();
      auto it = children.find(pid);
      if (it == children.end()) continue;
      for (const ProcessEntry* c : it->second) {
        if (running.count(c->pid)) continue;
        const bool live = c->state != 'Z' && c->state != 'X';
        const bool take = chosen || (live && pick(c->pid));
        if (take && live) targets.push_back(c->pid);
        stack.emplace_back(c->pid, take);
      }
    }
    for (const pid_t t : targets)
      if (::kill(t, SIGKILL) == 0) killed.insert(t);
    if (auto it = children.find(self); it != children.end())
      for (const ProcessEntry* c : it->second)
        if (c->state == 'Z' && !running.count(c->pid)) ::waitpid(c->pid, nullptr, WNOHANG);
    if (targets.empty() || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return killed.size();
}

// spark's environment for a run: SPARK_RUN_MARK gets `mark` added to the marks it holds (a spark run inside a run).
std::vector<std::string> run_environment(const std::string& mark) {
  std::vector<std::string> out;
  std::string marks = mark;
  const std::string key = std::string(kMarkVariable) + "=";
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry = *e;
    if (entry.starts_with(key))
      marks = std::string(entry.substr(key.size())) + "," + mark;
    else
      out.emplace_back(entry);
  }
  out.push_back(key + marks);
  return out;
}

}  // namespace

std::string CommandResult::describe() const {
  if (stopped) return "stopped: spark got " + signal_name(stopped);
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
  if (const int stop = g_stop.load()) {
    CommandResult stopped;
    stopped.stopped = stop;
    return stopped;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  UniqueFd read_end(fds[0]), write_end(fds[1]);  // closed on every way out
  // The run's mark: what the command starts inherits it, and what outlives the command is found by it.
  const std::string mark = std::to_string(::getpid()) + "." + std::to_string(++g_runs);
  const std::vector<std::string> env = run_environment(mark);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));  // NOLINT: execve's signature
  envp.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  {
    // Registered before another thread's clean-up can see it: a running command is never reaped by another call.
    std::lock_guard lock(g_running_mu);
    pid = ::fork();
    if (pid > 0) g_running.insert(pid);
  }
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
    const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
    ::execve("/bin/sh", const_cast<char* const*>(argv), envp.data());  // NOLINT: execve's signature
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
    if (const int stop = g_stop.load()) {
      result.stopped = stop;
      break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
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
  {
    std::lock_guard lock(g_running_mu);
    g_running.erase(pid);
  }
  // What left the group (setsid, a double fork) and is still spark's descendant carries the mark.
  if (subreaper()) kill_descendants([&mark](pid_t p) { return carries_mark(p, mark); }, 5);
  read_end.reset();
  result.seconds = seconds_since(start);
  if (!result.timed_out && !result.stopped) {
    if (WIFEXITED(status))
      result.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      result.signal = WTERMSIG(status);
  }
  if (out.size() > max_output) out = "[…]\n" + out.substr(out.size() - max_output);
  result.output = sanitize_utf8(out);
  return result;
}

StopSignals::StopSignals() {
  g_stop = 0;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    g_replaced[i] = false;
    if (::sigaction(kStopSignals[i], nullptr, &g_before[i]) != 0) continue;
    if (!(g_before[i].sa_flags & SA_SIGINFO) && g_before[i].sa_handler == SIG_IGN) continue;  // nohup, `cmd &`
    struct sigaction on {};
    on.sa_handler = on_stop_signal;
    sigemptyset(&on.sa_mask);
    on.sa_flags = SA_RESTART;
    g_replaced[i] = ::sigaction(kStopSignals[i], &on, nullptr) == 0;
  }
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    if (g_replaced[i]) ::sigaction(kStopSignals[i], &g_before[i], nullptr);
}

int stop_signal_caught() { return g_stop.load(); }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal);
  }
}

void end_by_signal(int signal) {
  std::fflush(nullptr);
  ::signal(signal, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(signal);
  ::_exit(128 + signal);
}

ChildSubreaper::ChildSubreaper() {
  ::prctl(PR_GET_CHILD_SUBREAPER, &before_);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

ChildSubreaper::~ChildSubreaper() {
  end_descendants();
  ::prctl(PR_SET_CHILD_SUBREAPER, before_);
}

size_t end_descendants(double seconds) {
  return kill_descendants([](pid_t) { return true; }, seconds);
}

}  // namespace spark
