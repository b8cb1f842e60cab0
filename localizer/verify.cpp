#include "localizer/verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>

#include "base/files.h"
#include "base/process.h"
#include "base/text.h"
#include "base/work_pool.h"
#include "miner/git_history.h"
#include "miner/runner.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A run with less time left than this is not started: it could not finish.
constexpr double kShortestRun = 0.5;
constexpr size_t kMessageLimit = 300;

// The line a failed run's output gives as its failure: the exception and message, else the failure section's last
// non-blank line, else the output's.
std::string failure_message(const CommandResult& r) {
  std::string said = run_cause(r.output);
  if (said.empty()) {
    const std::string section = failure_section(r.output);
    for (const std::string& text : {section, r.output}) {
      const std::string last = tail_lines(std::string(trim(text)), 1);
      if (!trim(last).empty()) {
        said = std::string(trim(last));
        break;
      }
    }
  }
  if (said.empty()) said = r.describe();
  said = terminal_line(said);
  return said.size() > kMessageLimit ? said.substr(0, kMessageLimit - 3) + "..." : said;
}

// `path` (relative to `root`, or absolute) as a path relative to the repository's top `top`; empty when it lies
// outside.
fs::path in_repository(const fs::path& top, const fs::path& root, const std::string& path) {
  const fs::path p(path);
  return path_within(top, p.is_relative() ? root / p : p);
}

// The line-by-line text of a file, each line with its end ("\n", "\r\n" or none for the last).
std::vector<std::string> lines_with_ends(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(at, end - at));
    at = end;
  }
  return lines;
}

std::string without_end(std::string line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

struct Budget {
  Clock::time_point run_deadline;
  double per_failure;
};

class Verifier {
 public:
  Verifier(const VerifyOptions& options, fs::path top, std::string commit, std::vector<std::string> edited,
           fs::path run_in, fs::path scratch, const Budget& budget)
      : options_(options),
        top_(std::move(top)),
        commit_(std::move(commit)),
        edited_(std::move(edited)),
        run_in_(std::move(run_in)),
        scratch_(std::move(scratch)),
        budget_(budget) {}

  // One failure: its work tree made, the unedited run, then each suggestion.
  void verify(unsigned worker, size_t index, const Case& query, Localization& loc) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = std::min(
        budget_.run_deadline,
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget_.per_failure)));
    const auto left = [&] { return std::chrono::duration<double>(deadline - Clock::now()).count(); };
    const auto all_not_run = [&](const std::string& why) {
      for (Suggestion& s : loc.suggestions)
        if (!s.verification) s.verification = Verification{VerifyStatus::not_run, why, 0};
    };
    if (stop_signal_caught()) return all_not_run("stopped: spark got a stop signal");
    if (left() < kShortestRun) return all_not_run("the run's verification budget was spent");
    const fs::path tree = scratch_ / ("w" + std::to_string(worker)) / ("f" + std::to_string(index));
    if (auto made = make_tree(query, tree); !made) {
      remove(tree);
      return all_not_run("the scratch work tree could not be made: " + made.error().message);
    }
    const fs::path cwd = tree / run_in_;
    const std::string command = expand_command(options_.command, {query.test_id});
    // The unedited test must fail here, or no run says anything about an edit.
    auto base = run_command(command, cwd, left());
    if (!base) {
      remove(tree);
      return all_not_run("the command could not start: " + base.error().message);
    }
    if (base->stopped) {
      remove(tree);
      return all_not_run("stopped: spark got a stop signal");
    }
    if (base->timed_out) {
      remove(tree);
      return all_not_run("the unedited test's run " + base->describe() + ": no time left for the edits");
    }
    if (base->passed()) {
      remove(tree);
      return all_not_run(
          "the test passed without any edit in the scratch work tree (flaky, or its failure needs "
          "something the tree lacks)");
    }
    const RunClassification unedited = classify_run(*base, query.test_id, tree);
    if (unedited.verdict == RunVerdict::environment) {
      remove(tree);
      return all_not_run("the command could not run the test: " + unedited.reason);
    }
    // Preferred edits first, then by confidence; each on the unedited file.
    std::vector<size_t> order(loc.suggestions.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Suggestion &x = loc.suggestions[a], &y = loc.suggestions[b];
      return x.preferred != y.preferred ? x.preferred : x.confidence > y.confidence;
    });
    for (size_t i : order) {
      Suggestion& s = loc.suggestions[i];
      if (stop_signal_caught()) {
        s.verification = Verification{VerifyStatus::not_run, "stopped: spark got a stop signal", 0};
        continue;
      }
      if (left() < kShortestRun) {
        s.verification = Verification{
            VerifyStatus::not_run,
            "the time budget (" + fixed(budget_.per_failure, 0) + " s a failure, --verify-timeout) was spent", 0};
        continue;
      }
      s.verification = try_edit(s, tree, cwd, command, query.test_id, left());
    }
    remove(tree);
    if (options_.progress) {
      size_t verified = 0;
      for (const Suggestion& s : loc.suggestions) verified += s.verification->status == VerifyStatus::verified;
      options_.progress(query.test_id + ": " + std::to_string(verified) + " of " +
                        std::to_string(loc.suggestions.size()) + " suggested edit(s) verified (" +
                        fixed(seconds_since(start), 1) + " s)");
    }
  }

 private:
  // The commit's tree in `tree`, with the work tree's edited tracked files (without a commit) and the query's test
  // files, as spark read them, over it.
  Status make_tree(const Case& query, const fs::path& tree) {
    {
      // libgit2's repository handle is not shared between threads: one materialize at a time.
      std::lock_guard lock(repo_mu_);
      if (!repo_) {
        auto repo = GitRepository::open(top_);
        TRY(repo);
        repo_ = std::move(*repo);
      }
      TRY(repo_->materialize(commit_, tree));
    }
    std::error_code ec;
    for (const std::string& path : edited_) {
      const fs::path from = top_ / path, to = tree / path;
      if (!fs::exists(fs::symlink_status(from, ec))) {
        fs::remove(to, ec);
        continue;
      }
      if (!fs::is_regular_file(fs::symlink_status(from, ec))) continue;
      fs::create_directories(to.parent_path(), ec);
      fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
      if (ec) return fail(path + ": " + ec.message());
    }
    for (const SourceFile& f : query.files) {
      const fs::path relative = in_repository(top_, options_.query_root, f.path);
      if (relative.empty()) continue;
      TRY(write_file_atomic(tree / relative, f.content));
    }
    return {};
  }

  Verification try_edit(const Suggestion& s, const fs::path& tree, const fs::path& cwd, const std::string& command,
                        const std::string& test_id, double seconds) {
    const fs::path relative = in_repository(top_, options_.query_root, s.line.path);
    if (relative.empty()) return {VerifyStatus::not_run, s.line.path + " is not in the repository's work tree", 0};
    const fs::path file = tree / relative;
    auto text = read_file(file);
    if (!text) return {VerifyStatus::not_run, s.line.path + ": " + text.error().message, 0};
    std::vector<std::string> lines = lines_with_ends(*text);
    if (s.line.line < 1 || static_cast<size_t>(s.line.line) > lines.size() ||
        without_end(lines[s.line.line - 1]) != without_end(s.old_line))
      return {VerifyStatus::not_run,
              s.line.path + ":" + std::to_string(s.line.line) + " does not read as spark read it", 0};
    std::string& line = lines[s.line.line - 1];
    const std::string end = line.substr(without_end(line).size());
    line = without_end(s.new_line) + end;
    std::string edited;
    for (const std::string& l : lines) edited += l;
    if (auto w = write_file_atomic(file, edited); !w) return {VerifyStatus::not_run, w.error().message, 0};
    auto r = run_command(command, cwd, seconds);
    // The next edit starts from the unedited file.
    if (auto w = write_file_atomic(file, *text); !w)
      return {VerifyStatus::not_run, "the edit could not be undone: " + w.error().message, 0};
    if (!r) return {VerifyStatus::not_run, "the command could not start: " + r.error().message, 0};
    if (r->stopped) return {VerifyStatus::not_run, "stopped: spark got a stop signal", r->seconds};
    if (r->timed_out) return {VerifyStatus::not_run, "the edited test's run " + r->describe(), r->seconds};
    if (r->passed()) return {VerifyStatus::verified, "", r->seconds};
    const RunClassification c = classify_run(*r, test_id, tree);
    if (c.verdict == RunVerdict::environment)
      return {VerifyStatus::not_run, "the command could not run the edited test: " + c.reason, r->seconds};
    return {VerifyStatus::not_verified, failure_message(*r), r->seconds};
  }

  static void remove(const fs::path& tree) {
    std::error_code ec;
    fs::remove_all(tree, ec);
  }

  const VerifyOptions& options_;
  fs::path top_;
  std::string commit_;
  std::vector<std::string> edited_;
  fs::path run_in_, scratch_;
  Budget budget_;
  std::mutex repo_mu_;
  std::unique_ptr<GitRepository> repo_;
};

// Verified edits first; a verified edit of a line is that line's preferred one.
void verified_first(Localization& loc) {
  std::stable_partition(loc.suggestions.begin(), loc.suggestions.end(), [](const Suggestion& s) {
    return s.verification && s.verification->status == VerifyStatus::verified;
  });
  std::set<std::pair<std::string, int>> lines_verified;
  for (Suggestion& s : loc.suggestions) {
    const auto where = std::make_pair(s.line.path, s.line.line);
    if (s.verification && s.verification->status == VerifyStatus::verified) {
      s.preferred = lines_verified.insert(where).second;
    } else if (lines_verified.contains(where)) {
      s.preferred = false;
    }
  }
}

}  // namespace

Result<VerifySummary> verify_suggestions(const std::vector<Case>& queries, std::vector<Result<Localization>>& results,
                                         const VerifyOptions& options) {
  const Clock::time_point start = Clock::now();
  VerifySummary summary;
  std::vector<size_t> todo;
  for (size_t i = 0; i < results.size() && i < queries.size(); ++i)
    if (results[i] && !results[i]->suggestions.empty()) todo.push_back(i);
  summary.failures = todo.size();
  if (todo.empty()) return summary;
  auto repo = GitRepository::open(options.repo);
  if (!repo) return fail("--verify needs the git repository the failures are in: " + repo.error().message);
  std::error_code ec;
  const fs::path top = fs::weakly_canonical((*repo)->workdir(), ec);
  auto commit = (*repo)->resolve(options.commit.empty() ? "HEAD" : options.commit);
  if (!commit) return fail("--verify: " + commit.error().message);
  std::vector<std::string> edited;
  if (options.commit.empty()) {
    auto changed = (*repo)->changed_in_work_tree(*commit);
    TRY(changed);
    edited = std::move(*changed);
  }
  repo->reset();
  // Where the commands run: where the failures' test-file paths (and so their test ids) start, in the scratch tree.
  fs::path run_in;
  if (const fs::path here = in_repository(top, options.query_root, "."); !here.empty() && here != ".") run_in = here;
  auto scratch = make_temp_dir("spark-verify");
  TRY(scratch);
  const Budget budget{
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget)),
      options.per_failure};
  {
    Verifier verifier(options, top, *commit, std::move(edited), run_in, *scratch, budget);
    parallel_for(todo.size(), std::max(1u, options.jobs), [&](unsigned worker, size_t t) {
      const size_t i = todo[t];
      verifier.verify(worker, i, queries[i], *results[i]);
    });
  }
  fs::remove_all(*scratch, ec);
  for (size_t i : todo) {
    Localization& loc = *results[i];
    verified_first(loc);
    for (const Suggestion& s : loc.suggestions) {
      ++summary.suggestions;
      const VerifyStatus status = s.verification ? s.verification->status : VerifyStatus::not_run;
      summary.verified += status == VerifyStatus::verified;
      summary.not_verified += status == VerifyStatus::not_verified;
      summary.not_run += status == VerifyStatus::not_run;
    }
  }
  summary.seconds = seconds_since(start);
  return summary;
}

std::string verify_summary_line(const VerifySummary& s) {
  if (s.failures == 0) return "verify: no suggested edit to verify";
  return "verify: " + std::to_string(s.suggestions) + " suggested edit" + (s.suggestions == 1 ? "" : "s") + " of " +
         std::to_string(s.failures) + " failure" + (s.failures == 1 ? "" : "s") + ": " + std::to_string(s.verified) +
         " verified, " + std::to_string(s.not_verified) + " not verified, " + std::to_string(s.not_run) + " not run (" +
         fixed(s.seconds, 1) + " s)";
}

}  // namespace spark
