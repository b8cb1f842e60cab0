#include "miner/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>

#include "base/files.h"
#include "base/text.h"
#include "formats/error_message.h"
#include "formats/failure_form.h"

namespace spark {

namespace fs = std::filesystem;

std::string expand_command(const std::string& command, const std::vector<std::string>& tests,
                           const std::string& junit) {
  std::string quoted;
  for (const auto& t : tests) quoted += (quoted.empty() ? "" : " ") + shell_quote(t);
  std::string out;
  for (size_t i = 0; i < command.size();) {
    if (command.compare(i, 9, "{test_id}") == 0) {
      out += quoted;
      i += 9;
    } else if (command.compare(i, 7, "{tests}") == 0) {
      out += quoted;
      i += 7;
    } else if (command.compare(i, 7, "{junit}") == 0) {
      out += shell_quote(junit);
      i += 7;
    } else {
      out += command[i++];
    }
  }
  return out;
}

std::string run_cause(const std::string& output) {
  const FailureForm form = parse_failure_form(output);
  if (form.exception.empty()) return "";
  return form.message.empty() ? form.exception : form.exception + ": " + form.message;
}

namespace {

// The module of "No module named 'face.x'" ("face"); empty when the output says no such thing.
std::string missing_module(const std::string& output) {
  const std::string_view said = "No module named '";
  const size_t at = output.find(said);
  if (at == std::string::npos) return "";
  const size_t start = at + said.size();
  const size_t end = output.find_first_of("'.\n", start);
  return end == std::string::npos ? "" : output.substr(start, end - start);
}

// The project's own module `name` in `worktree`: X/ or X.py at its top, in src/, or in the test file's folder.
bool own_module(const fs::path& worktree, const std::string& test_id, const std::string& name) {
  const fs::path test_folder = fs::path(test_id.substr(0, test_id.find("::"))).parent_path();
  for (const fs::path& folder : {worktree, worktree / "src", worktree / test_folder})
    if (path_exists(folder / name) || path_exists(folder / (name + ".py"))) return true;
  return false;
}

// Whether the missing module is the project's own top-level package that only a src/ layout holds: the command did
// not put src/ on Python's path (or install the project), so no test of it can run.
bool only_in_src(const fs::path& worktree, const std::string& test_id, const std::string& output,
                 const std::string& name) {
  if (worktree.empty() || output.find("No module named '" + name + "'") == std::string::npos) return false;
  const fs::path test_folder = fs::path(test_id.substr(0, test_id.find("::"))).parent_path();
  for (const fs::path& folder : {worktree, worktree / test_folder})
    if (path_exists(folder / name) || path_exists(folder / (name + ".py"))) return false;
  return path_exists(worktree / "src" / name) || path_exists(worktree / "src" / (name + ".py"));
}

// "cannot import name 'Mapping' from 'collections' (/usr/lib/python3.11/collections/__init__.py)": a module outside
// the work tree (installed, or Python's own) lacks a name the code imports: another version than the commit's code
// was written for. The line, or "" when the output has no such import error.
std::string installed_module_lacks_name(const std::string& output, const fs::path& worktree) {
  if (worktree.empty()) return "";
  for (std::string_view line : split_lines(output)) {
    const size_t at = line.find("cannot import name '");
    if (at == std::string_view::npos) continue;
    const size_t open = line.find(" (", at);
    const size_t close = line.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) continue;
    const std::string_view path = line.substr(open + 2, close - open - 2);
    if (!path.starts_with('/') || path.starts_with(worktree.string() + "/")) continue;
    std::string_view text = trim(line);
    if (text.starts_with("E ")) text = trim(text.substr(1));
    return std::string(text);
  }
  return "";
}

// pytest's usage error (exit 4): an option it does not know, a bad -o, an ini option it refuses. The reason names
// the line that says so and, for arguments that come from the project's addopts (a plugin that is not installed:
// pytest-cov's --cov), how to run without them. "" when the output has no such error.
std::string pytest_usage_error(const std::string& output, const fs::path& worktree, const std::string& test_id) {
  std::string error, ini;
  for (std::string_view line : split_lines(output)) {
    const std::string_view text = trim(line);
    if (const size_t at = text.find("error: unrecognized arguments: "); at != std::string_view::npos && error.empty())
      error = std::string(text.substr(at + 7));
    else if (text.starts_with("ERROR: ") && !text.starts_with("ERROR: usage:") && error.empty())
      error = std::string(text.substr(7));
    else if (text.starts_with("inifile: ") || text.starts_with("configfile: "))
      ini = std::string(trim(text.substr(text.find(':') + 1)));
  }
  if (error.empty()) {
    if (output.find("ERROR: usage:") == std::string::npos) return "";
    error = "usage error";
  }
  // argparse lists the test id (or its file) among the arguments it refused once an option took the wrong words:
  // without it, one reason for every test.
  for (const std::string& word : {test_id, test_id.substr(0, test_id.find("::"))})
    for (size_t at; !word.empty() && (at = error.find(" " + word)) != std::string::npos;) error.erase(at, word.size() + 1);
  std::string where;  // the config file, as the repository names it
  if (!ini.empty() && !worktree.empty() && ini.starts_with(worktree.string() + "/"))
    where = ini.substr(worktree.string().size() + 1);
  const std::string reason = "pytest's usage error (exit 4): " + error;
  if (!error.starts_with("unrecognized arguments: ") || where.empty()) return reason + " (fix the command)";
  // The first argument it refused, without its value: is it in the config file (addopts)?
  std::string argument = error.substr(24);
  argument = argument.substr(0, argument.find_first_of(" ="));
  // The repository's file: a regular file (not a link out of the work tree), of a sane size.
  std::error_code ec;
  const fs::path file = worktree / where;
  const bool readable = fs::is_regular_file(fs::symlink_status(file, ec)) && fs::file_size(file, ec) < (1u << 20);
  const auto config = readable && !ec ? read_file(file) : Result<std::string>(fail("not read"));
  if (!config || argument.empty() || config->find(argument) == std::string::npos)
    return reason + " (fix the command)";
  return reason + ", from the addopts of " + where +
         " (a plugin that is not installed?): run pytest with -o addopts= (python3 -m pytest -o addopts= {test_id}) "
         "or install the plugin";
}

}  // namespace

RunClassification classify_run(const CommandResult& r, const std::string& test_id, const fs::path& worktree) {
  if (r.passed()) return {RunVerdict::passed, ""};
  if (r.timed_out || r.signal) return {RunVerdict::failed, ""};  // a hang or a crash can be the test's own fault
  const std::string& out = r.output;
  const auto has = [&](std::string_view s) { return out.find(s) != std::string::npos; };
  if (r.exit_code == 127 || has(": not found\n") || has("command not found")) {
    // dash: "sh: 1: python3: not found"; bash: "bash: python3: command not found".
    std::string tool;
    for (std::string_view line : split_lines(out)) {
      const size_t end = line.rfind(": not found") != std::string_view::npos ? line.rfind(": not found")
                                                                             : line.rfind(": command not found");
      if (end == std::string_view::npos) continue;
      const size_t start = line.rfind(": ", end - 1);
      tool = std::string(line.substr(start == std::string_view::npos ? 0 : start + 2,
                                     end - (start == std::string_view::npos ? 0 : start + 2)));
    }
    return {RunVerdict::environment, (tool.empty() ? "a command" : "\"" + tool + "\"") +
                                         " was not found on PATH (exit " + std::to_string(r.exit_code) + ")"};
  }
  if (r.exit_code == 126) return {RunVerdict::environment, "the command is not executable (exit 126)"};
  if (has("No module named pytest") || has("No module named 'pytest'"))
    return {RunVerdict::environment, "the test runner is not installed: No module named pytest"};
  if (has("INTERNALERROR")) {
    // pytest's exit 3: its last INTERNALERROR line is the exception.
    std::string last;
    for (std::string_view line : split_lines(out))
      if (line.starts_with("INTERNALERROR>")) last = std::string(trim(line.substr(14)));
    return {RunVerdict::environment, "the test runner failed internally (INTERNALERROR" +
                                         (last.empty() ? std::string(")") : "): " + last)};
  }
  const std::string cause = run_cause(out);
  if (const std::string module = missing_module(out); !module.empty() && only_in_src(worktree, test_id, out, module))
    return {RunVerdict::environment, "the project's own package '" + module +
                                         "' is in src/ but Python cannot import it: put src on the path "
                                         "(PYTHONPATH=src) or install the project in the command"};
  if (const std::string line = installed_module_lacks_name(out, worktree); !line.empty())
    // Python's own module (its standard library, not site- or dist-packages): the commit's code was written for
    // another Python.
    return {RunVerdict::environment,
            (line.find("-packages/") == std::string::npos && line.find("/lib/python") != std::string::npos
                 ? "Python's own module is another version than this commit's code needs (it was written for another "
                   "Python): "
                 : "an installed module is another version than this commit's code needs: ") +
                line};
  // "AttributeError: module 'collections' has no attribute 'MutableMapping'" while collecting: the same, for a module
  // the work tree does not hold.
  if (const size_t at = out.find("AttributeError: module '"); !worktree.empty() && at != std::string::npos &&
                                                                 out.find("ERROR collecting ") != std::string::npos) {
    const size_t start = at + 24;
    const size_t end = out.find_first_of("'.", start);
    const std::string module = end == std::string::npos ? "" : out.substr(start, end - start);
    if (!module.empty() && !own_module(worktree, test_id, module)) {
      const size_t eol = out.find('\n', at);
      return {RunVerdict::environment, "an installed module is another version than this commit's code needs: " +
                                           out.substr(at, eol == std::string::npos ? std::string::npos : eol - at)};
    }
  }
  if (const std::string module = missing_module(out);
      !module.empty() && (worktree.empty() || !own_module(worktree, test_id, module))) {
    // The missing module's line, and what it led to when that is another exception (a test's `except ImportError:`
    // branch that raises a NameError of its own).
    const std::string missing = "No module named '" + module + "'";
    return {RunVerdict::environment,
            "a module the tests import is not installed: " + (cause.empty() ? missing
                                                              : cause.find("No module named") != std::string::npos
                                                                  ? cause
                                                                  : missing + ", then " + cause)};
  }
  // Before "not found": pytest cannot find a test id in a file it could not collect, and says both.
  if (has("ERROR collecting ")) {
    // A collection error in the test's own file (a syntax error, a bad import there) is the test code's fault.
    const std::string own = test_id.substr(0, test_id.find("::"));
    if (!own.empty() && has("ERROR collecting " + own)) return {RunVerdict::failed, ""};
    return {RunVerdict::environment, "a collection error outside " + own + (cause.empty() ? "" : ": " + cause)};
  }
  if (has("ERROR: file or directory not found") || has("ERROR: not found:"))
    return {RunVerdict::environment, "the test runner did not find the test " + test_id};
  if (r.exit_code == 4)
    if (std::string usage = pytest_usage_error(out, worktree, test_id); !usage.empty())
      return {RunVerdict::environment, usage};
  if (r.exit_code == 5 && (has("no tests ran") || has(" deselected") || has("collected 0 items")))
    return {RunVerdict::environment,
            "pytest collected no test for " + test_id +
                " (exit 5): the project's configuration deselects or ignores it (-k, -m or --ignore in addopts, "
                "collect_ignore), or it is not there"};
  if (has("no tests ran")) return {RunVerdict::environment, "no tests ran"};
  return {RunVerdict::failed, ""};
}

namespace {

// `text` without terminal colour and cursor sequences (ESC [ ... final byte): JUnit's console launcher, Gradle and
// some pytest plugins colour their output even into a pipe.
std::string without_terminal_sequences(const std::string& text) {
  if (text.find('\x1b') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      size_t j = i + 2;
      while (j < text.size() && (static_cast<unsigned char>(text[j]) < 0x40 || static_cast<unsigned char>(text[j]) > 0x7e))
        ++j;
      i = j;  // past the final byte
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace

std::string failure_section(const std::string& raw) {
  std::string output = without_terminal_sequences(raw);
  // pytest: "==== FAILURES ====" (or ERRORS) up to "short test summary info" or the final "==== N failed ..." line.
  size_t start = std::string::npos;
  for (const char* header : {" FAILURES =", " ERRORS ="}) {
    const size_t at = output.find(header);
    if (at != std::string::npos && at < start) start = at;
  }
  if (start == std::string::npos) return output;
  start = output.find('\n', start);
  if (start == std::string::npos) return output;
  ++start;
  size_t end = output.size();
  for (const char* footer : {"short test summary info", "\n===="}) {
    size_t at = output.find(footer, start);
    if (at == std::string::npos) continue;
    at = output.rfind('\n', at);  // the start of that line
    if (at != std::string::npos && at >= start && at < end) end = at;
  }
  std::string section = output.substr(start, end - start);
  while (!section.empty() && (section.back() == '\n' || section.back() == ' ')) section.pop_back();
  return section.empty() ? output : section + "\n";
}

std::string tail_lines(const std::string& text, size_t lines) {
  size_t at = text.size();
  while (at > 0 && (text[at - 1] == '\n')) --at;
  const size_t end = at;
  for (size_t n = 0; n < lines && at > 0; ++n) {
    const size_t nl = text.rfind('\n', at - 1);
    at = nl == std::string::npos ? 0 : nl;
  }
  if (at > 0) ++at;
  return text.substr(at, end - at);
}

namespace {

// Throw-away work trees, one per commit, removed with the session.
class Worktrees {
 public:
  explicit Worktrees(const GitRepository& repo) : repo_(repo) {}
  ~Worktrees() {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }
  Result<fs::path> at(const std::string& sha) {
    if (root_.empty()) {
      auto dir = make_temp_dir("spark-run");
      TRY(dir);
      root_ = *dir;
    }
    const fs::path dir = root_ / sha.substr(0, 12);
    if (path_exists(dir)) return dir;
    TRY(repo_.materialize(sha, dir));
    return dir;
  }

 private:
  const GitRepository& repo_;
  fs::path root_;
};

}  // namespace

Result<BisectResult> bisect_fix(const GitRepository& repo, const std::string& test_id, const std::string& from,
                                const std::string& to, const BisectOptions& options) {
  BisectResult result;
  result.test_id = test_id;
  auto from_sha = repo.resolve(from);
  TRY(from_sha);
  auto to_sha = repo.resolve(to);
  TRY(to_sha);
  auto history = repo.history(options.first_parent, std::nullopt, std::nullopt, *to_sha);
  TRY(history);
  size_t f = history->size();
  for (size_t i = 0; i < history->size(); ++i)
    if ((*history)[i].sha == *from_sha) f = i;
  if (f == history->size())
    return fail(from + " is not on the " + std::string(options.first_parent ? "first-parent " : "") + "history of " +
                to);
  const size_t t = history->size() - 1;
  Worktrees trees(repo);
  std::map<size_t, CommandResult> last;
  // A run that could not run the test at all stops the search: it says nothing about the test's code.
  const auto run = [&](size_t i) -> Result<bool> {
    const CommitInfo& c = (*history)[i];
    auto dir = trees.at(c.sha);
    TRY(dir);
    auto r = run_command(expand_command(options.command, {test_id}), *dir, options.timeout);
    TRY(r);
    ++result.runs;
    const RunClassification verdict = classify_run(*r, test_id, *dir);
    const char* word = verdict.verdict == RunVerdict::passed   ? "passed"
                       : verdict.verdict == RunVerdict::failed ? "failed"
                                                               : "could not run the test";
    // A run that could not run the test ends the search with an error that says why: said there, once.
    if (options.progress)
      options.progress(
          test_id + " at " + c.sha.substr(0, 10) + ": " + word + " (" + r->describe() + ", " +
          std::to_string(static_cast<int>(r->seconds * 1000)) + " ms)" +
          (verdict.verdict == RunVerdict::failed ? "; its output ends:\n" + tail_lines(r->output, 8) : ""));
    if (verdict.verdict == RunVerdict::environment) {
      // The reason quotes the output's line that says why when there is one; else the output's tail shows it.
      const std::string cause = run_cause(r->output);
      const bool quoted = !cause.empty() && verdict.reason.find(cause) != std::string::npos;
      return fail("--run: the command could not run " + test_id + " at " + c.sha.substr(0, 10) + ": " + verdict.reason +
                  "; nothing is labelled from it (fix the command or the environment)" +
                  (quoted ? std::string(".") : ". Its output ends:\n" + tail_lines(r->output, 8)));
    }
    last[i] = std::move(*r);
    return last[i].passed();
  };
  const auto record = [&](size_t i) {
    const CommandResult& r = last.at(i);
    RecordedOutcome o;
    o.commit = (*history)[i].sha;
    o.time = (*history)[i].time;
    o.test_id = test_id;
    o.outcome = r.passed() ? Outcome::passed : Outcome::failed;
    if (!r.passed()) {
      o.message =
          failure_section(r.output) + (r.timed_out || r.signal ? "\n[spark: " + r.describe() + "]\n" : std::string());
      cap_error_message(o.message);
    }
    o.origin = "run at " + o.commit.substr(0, 10);
    result.outcomes.push_back(std::move(o));
  };
  auto at_from = run(f);
  TRY(at_from);
  record(f);
  if (*at_from) {
    result.note = "passes at " + from_sha->substr(0, 10) + ": nothing to fix";
    return result;
  }
  if (f == t) {
    result.note = "fails at " + to + ", the end of the range";
    return result;
  }
  auto at_to = run(t);
  TRY(at_to);
  if (!*at_to) {
    record(t);
    result.note = "still fails at " + to + " (" + to_sha->substr(0, 10) + ")";
    return result;
  }
  size_t lo = f, hi = t;  // fails at lo, passes at hi
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    auto passed = run(mid);
    TRY(passed);
    (*passed ? hi : lo) = mid;
  }
  // The boundary, checked by running both sides again.
  auto lo_again = run(lo);
  TRY(lo_again);
  auto hi_again = run(hi);
  TRY(hi_again);
  // Only the failure at `from` and its fix are recorded: the failing commits in between would each become a case of
  // their own, the same fault again.
  if (!*lo_again && *hi_again) {
    record(hi);
    result.fix = (*history)[hi].sha;
    return result;
  }
  // Not monotonic: a flaky test or a range that broke and mended again. Scan it in order instead.
  result.flaky = true;
  for (size_t i = f + 1; i <= t; ++i) {
    auto passed = run(i);
    TRY(passed);
    if (*passed) {
      record(i);
      result.fix = (*history)[i].sha;
      return result;
    }
  }
  result.note = "flaky: no passing commit found by the linear scan";
  return result;
}

Result<std::vector<RecordedOutcome>> bisect_fixes(const GitRepository& repo, const std::vector<std::string>& tests,
                                                  const std::string& from, const std::string& to,
                                                  const BisectOptions& options,
                                                  const std::function<void(const std::string&)>& say) {
  std::vector<RecordedOutcome> outcomes;
  for (const auto& test : tests) {
    auto found = bisect_fix(repo, test, from, to, options);
    TRY(found);
    say(test + ": " +
        (found->fix ? "first passing commit " + found->fix->substr(0, 10) : "no fix (" + found->note + ")") +
        " after " + plural(found->runs, "run") +
        (found->flaky ? "; FLAKY: the range is not monotonic, found by a linear scan" : ""));
    for (auto& o : found->outcomes) outcomes.push_back(std::move(o));
  }
  return outcomes;
}

}  // namespace spark
