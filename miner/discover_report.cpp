#include "miner/discover_report.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/text.h"

namespace spark {

using nlohmann::json;

std::string candidates_jsonl(const std::vector<FixCandidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    json tests = json::array();
    for (const auto& t : c.tests) tests.push_back({{"test_id", t.test_id}, {"file", t.file}, {"why", t.why}});
    out += json_text({{"commit", c.commit.sha},
                      {"parent", c.parent},
                      {"time", format_iso8601(c.commit.time)},
                      {"summary", c.commit.summary},
                      {"tests", tests}}) +
           "\n";
  }
  return out;
}

std::string candidates_text(const std::vector<FixCandidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) {
    out += c.commit.sha.substr(0, 10) + " " + format_iso8601(c.commit.time).substr(0, 10) + " " +
           terminal_line(c.commit.summary) + "\n";
    for (const auto& t : c.tests) out += "  " + terminal_line(t.test_id) + "  (" + t.why + ")\n";
  }
  return out;
}

std::vector<std::string> scan_notes(const std::string& repo, const ScanReport& r,
                                    const std::vector<FixCandidate>& candidates, bool first_parent) {
  std::vector<std::string> notes;
  const auto note = [&](std::string n) { notes.push_back(std::move(n)); };
  size_t tests = 0;
  for (const auto& c : candidates) tests += c.tests.size();
  note("discover " + repo + ": scanned " + plural(r.commits, "commit") + (first_parent ? " (first-parent)" : "") +
       " in " + seconds_text(r.seconds) + ": " + std::to_string(r.test_changing) + " changed test code, " +
       plural(candidates.size(), "fix candidate") + " with " + plural(tests, "test") + " to run" +
       (r.mixed_skipped ? "; " + std::to_string(r.mixed_skipped) + " left out by --test-only-fixes" : "") +
       (r.additions_only ? "; " + std::to_string(r.additions_only) + " only added test code (nothing to label)" : "") +
       (r.merges_skipped ? "; " + plural(r.merges_skipped, "merge") + " skipped (their sides' commits are walked)"
                         : ""));
  for (const auto& u : r.unreadable) note("  skipped, could not be read: " + u);
  if (!r.too_wide.empty()) {
    note("  " + plural(r.too_wide.size(), "commit") + " left out as too wide (a shared hook, fixture or module-level " +
         "set-up changed; --max-tests-per-commit 0 runs them):");
    for (const auto& w : r.too_wide) note("    " + terminal_line(w));
  }
  if (const std::string hint = all_parents_hint(r); first_parent && !hint.empty()) note("  " + hint);
  if (!r.shallow_boundary.empty()) {
    std::string boundary;
    for (const auto& sha : r.shallow_boundary) boundary += (boundary.empty() ? "" : ", ") + sha.substr(0, 10);
    note("  this is a shallow clone: its history starts at " + boundary + " (" + plural(r.commits, "commit") +
         " seen); `git fetch --deepen N` (N commits more) or `git fetch --unshallow` (all of it), then run again");
  }
  return notes;
}

void RunTotals::add(const CandidateRuns& r) {
  ++candidates;
  runs += r.runs;
  reused += r.reused;
  fixes += r.fixes;
  flaky += r.flaky;
  fail_at_commit += r.fail_at_commit;
  pass_at_parent += r.pass_at_parent;
  gone_at_commit += r.gone_at_commit;
  breaks_found += r.breaks_found;
  breaks_not_found += r.breaks_not_found;
  breaks_unknown += r.breaks_unknown;
  break_runs += r.break_runs;
  passes_found.insert(passes_found.end(), r.passes_found.begin(), r.passes_found.end());
  unrunnable_known += r.unrunnable_known;
  for (const auto& [reason, example] : r.unrunnable) {
    auto& slot = unrunnable[reason];
    if (slot.first++ == 0) slot.second = example;
  }
  if (!r.checkout_error.empty()) skipped.push_back(r.checkout_error);
  setups += r.setups;
  setup_seconds += r.setup_seconds;
  run_seconds += r.run_seconds;
}

std::vector<std::string> run_notes(const RunTotals& t, unsigned confirm) {
  std::vector<std::string> notes;
  const auto note = [&](std::string n) { notes.push_back(std::move(n)); };
  note("discover: ran " + plural(t.runs, "test run") + " (" + std::to_string(t.reused) +
       " more outcomes reused from the store) in " + seconds_text(t.run_seconds) + " of run time: " +
       plural(t.fixes, "fix", "fixes") + " (failed at the parent " + std::to_string(confirm + 1) +
       " times, passed at the commit), " + std::to_string(t.flaky) +
       " flaky (passed at the parent when run again: never a case), " + std::to_string(t.fail_at_commit) +
       " failed at the commit too, " + std::to_string(t.pass_at_parent) + " passed at the parent" +
       (t.gone_at_commit ? ", " + std::to_string(t.gone_at_commit) + " removed or renamed by the commit" : ""));
  if (const size_t searched = t.breaks_found + t.breaks_not_found + t.breaks_unknown)
    note("discover: the last pass before each fix's failure (" + plural(t.break_runs, "run") + "): found for " +
         std::to_string(t.breaks_found) + " of " + std::to_string(searched) + ", not within " +
         std::to_string(t.break_search) + " commits for " + std::to_string(t.breaks_not_found) + ", unknown for " +
         std::to_string(t.breaks_unknown) + " (the test was not there yet, or could not run further back)");
  size_t unrunnable = 0;
  for (const auto& [reason, slot] : t.unrunnable) unrunnable += slot.first;
  if (unrunnable) {
    note("discover: " + plural(unrunnable, "test") + " could not run (never a case)" +
         (t.unrunnable_known ? ", " + std::to_string(t.unrunnable_known) + " of them known from the store" : "") +
         (t.unrunnable_known ? " (--retry-unrunnable runs them again)" : "") + ", by reason:");
    for (const auto& [reason, slot] : t.unrunnable)
      note("  " + std::to_string(slot.first) + "  " + terminal_line(reason) + "  (e.g. " + terminal_line(slot.second) +
           ")");
  }
  for (const auto& s : t.skipped) note("discover: candidate skipped: " + terminal_line(s));
  if (t.setups)
    note("discover: work trees: " + std::to_string(t.setups) + " made, " +
         fixed(1000 * t.setup_seconds / static_cast<double>(t.setups), 1) + " ms each on average");
  return notes;
}

Result<std::pair<unsigned, unsigned>> parse_shard(const std::string& text) {
  if (text.empty()) return std::pair{0u, 1u};
  unsigned i = 0, n = 0;
  const char* end = text.data() + text.size();
  const auto first = std::from_chars(text.data(), end, i);
  const bool slash = first.ec == std::errc() && first.ptr != end && *first.ptr == '/';
  const auto second = slash ? std::from_chars(first.ptr + 1, end, n) : first;
  if (!slash || second.ec != std::errc() || second.ptr != end || n == 0 || i == 0 || i > n || n > 100000)
    return fail("--shard \"" + text + "\": give I/N with 1 <= I <= N (this runner's share: 1/4 .. 4/4)");
  return std::pair{i - 1, n};
}

DiscoverProgress::DiscoverProgress(const std::vector<FixCandidate>& candidates) {
  for (const auto& c : candidates) tests_ += c.tests.size();
}

void DiscoverProgress::tested(const CandidateRuns& r) {
  ++done_;
  auto& [seen, unrunnable] = runs_of_[r.candidate];
  runs_ += r.runs - seen;
  seen = r.runs;
  unrunnable_ += r.unrunnable.size() - unrunnable;
  unrunnable = r.unrunnable.size();
  if (!r.unrunnable.empty()) last_reason_ = r.unrunnable.back().first;
  show(false);
}

void DiscoverProgress::candidate_done(const RunTotals& t) {
  candidates_ = t.candidates;
  fixes_ = t.fixes;
  show(done_ == tests_);
}

void DiscoverProgress::finish() const {
  if (done_ != tests_) line_.end();
}

void DiscoverProgress::show(bool last) {
  const double elapsed = seconds_since(start_);
  if (!line_.terminal() && !last && elapsed - shown_ < 10) return;
  shown_ = elapsed;
  line_.show(
      "spark: discover: " + std::to_string(done_) + "/" + std::to_string(tests_) + " tests, " +
          std::to_string(candidates_) + " candidates done, " + plural(runs_, "run") + ", " +
          plural(fixes_, "fix", "fixes") +
          (unrunnable_
               ? ", " + std::to_string(unrunnable_) + " could not run (last: " +
                     terminal_line(last_reason_.size() > 160 ? last_reason_.substr(0, 159) + "…" : last_reason_) + ")"
               : std::string()) +
          ", " + seconds_text(elapsed) + (last ? "" : ", ETA " + seconds_text(eta_seconds(elapsed, done_, tests_))),
      last);
}

Status discover_into(MiningStore& store, const GitRepository& repo, const std::vector<FixCandidate>& candidates,
                     const DiscoverOptions& d, const SyncOptions& options, RunTotals& totals) {
  DiscoverProgress progress(candidates);
  DiscoverStore callbacks;
  callbacks.stored = [&](const std::string& sha) { return store.outcomes_at(sha); };
  callbacks.confirmed = [&](const std::string& sha, const std::string& test) { return store.has_failure(sha, test); };
  callbacks.store = [&](const CandidateRuns& r) -> Status {
    TRY(store.store_outcomes(repo, r.outcomes, options));
    return {};
  };
  callbacks.tested = [&](const CandidateRuns& r) { progress.tested(r); };
  callbacks.done = [&](const CandidateRuns& r) {
    totals.add(r);
    progress.candidate_done(totals);
  };
  const Status ran = discover_fixes(repo.workdir(), candidates, d, callbacks);
  progress.finish();
  return ran;
}

}  // namespace spark
