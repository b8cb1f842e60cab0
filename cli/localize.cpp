#include "cli/localize.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "base/huge_pages.h"
#include "base/process.h"
#include "base/progress.h"
#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "localizer/localize_run.h"
#include "localizer/prompt.h"
#include "localizer/queries.h"
#include "localizer/report.h"
#include "localizer/verify.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

// The heap a localize prepares for huge pages: the index's load fills ~30 MB at 100k cases at once.
constexpr size_t kLocalizeHeap = size_t{64} << 20;
// SPARK_HUGE_PAGES=0 leaves the heap on 4 KiB pages.
bool huge_pages_allowed() { return std::strtoll(environment_setting("SPARK_HUGE_PAGES").c_str(), nullptr, 10) != 0; }

// The folder where parsed test-file versions persist between processes (StructureCache::persist_in); "" without a
// knowledge base.
fs::path structures_folder(const Common& common) {
  return kb_exists(common) ? fs::path(local_folder(common)) / "structures" : fs::path();
}

// The query of `spark localize --test FILE… --error FILE|-`: the failure output read from its file or standard input.
Result<Case> query_from_args(const Common& common, const LocalizeArgs& args) {
  TestFileFailure failure;
  failure.test_files = args.tests;
  failure.error_name = args.error;
  if (args.error == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    failure.error_text = ss.str();
  } else {
    auto m = read_file(args.error);
    TRY(m);
    failure.error_text = std::move(*m);
  }
  failure.test_id = args.test_id;
  failure.time = args.time;
  failure.structures = structures_folder(common);
  std::vector<std::string> notes;
  auto q = query_from_test_files(failure, notes);
  for (const auto& n : notes) note(n);
  return q;
}

// Says on stderr that the LLM has not answered yet (LlmOptions::waiting), with the time left to the run's deadline.
void say_waiting(LlmOptions& o, double deadline) {
  o.waiting = [endpoint = terminal_line(o.base_url), deadline](double waited, size_t done, size_t total) {
    const std::string left = deadline > 0
                                 ? ", the run's deadline in " +
                                       std::to_string(static_cast<long long>(std::max(0.0, deadline - waited))) + " s"
                                 : "";
    std::fprintf(stderr, "spark: waiting for the LLM at %s: %lld s, %zu of %zu answered%s\n", endpoint.c_str(),
                 static_cast<long long>(waited), done, total, left.c_str());
  };
}

// The LLM stage's progress on stderr (runs of two failures or more): a counter on a terminal, a line per ten
// otherwise.
std::function<void(size_t, size_t)> llm_progress() {
  return [line = ProgressLine()](size_t done, size_t total) {
    if (total < 2) return;
    if (line.terminal() || done == total || done % 10 == 0)
      line.show("spark: LLM " + std::to_string(done) + "/" + std::to_string(total), done == total);
  };
}

// Prints the run's report (report_run) in args.format: its errors and notes on stderr, the report on stdout, and the
// SARIF report to --sarif-output; the exit code.
int print_run(const Common& common, const LocalizeArgs& args, const std::vector<Case>& queries,
              const std::vector<Result<Localization>>& results, const LocalizeOptions& options, bool batch,
              bool llm_asked) {
  const ReportContext ctx{options.policy.name, options.level, options.k, options.epsilon, SPARK_VERSION};
  RunReportOptions shown;
  shown.format = args.format;
  shown.sarif = !args.sarif_output.empty();
  shown.markdown = !args.markdown_output.empty();
  shown.batch = batch;
  shown.color = args.color == "always" || (args.color == "auto" && ::isatty(STDOUT_FILENO));
  shown.show_annotated = args.show_annotated;
  shown.keep_prompt = args.stage.keep_prompt;
  shown.wants_llm = args.stage.mode != Mode::builtin;
  shown.llm_asked = llm_asked;
  shown.require_llm = args.require_llm;
  shown.redactor = common.redactor.get();
  const RunReport report = report_run(queries, results, ctx, shown);
  for (const RunMessage& m : report.messages)
    if (m.error)
      report_error(Error{m.text});
    else
      note(m.text);
  if (!args.sarif_output.empty() && !report.sarif.empty())
    if (auto w = write_file_atomic(args.sarif_output, report.sarif); !w) return report_error(w.error());
  if (!args.markdown_output.empty())
    if (auto w = write_file_atomic(args.markdown_output, report.markdown); !w) return report_error(w.error());
  if (report.llm_failed && args.require_llm)
    return report_error(Error{"--require-llm: the LLM could not be used (see above)"});
  if (!write_stdout(report.out)) return report_error(Error{"cannot write to standard output"});
  return report.failed ? 1 : 0;
}

}  // namespace

// The run (localizer/localize_run.h) over the store Common names, then the report.
int localize_queries(const Common& common, const LocalizeArgs& args, std::vector<Case>& queries, bool batch) {
  // The index's load fills ~30 MB at 100k cases at once: on huge pages where the kernel offers them
  // (src/base/huge_pages.h).
  prefer_huge_pages(kLocalizeHeap, huge_pages_allowed());
  LocalizeOptions options = args.localize;
  if (!args.explain.empty()) {
    const auto line = parse_line_ref(args.explain);
    if (!line)
      return usage_error("--explain \"" + args.explain +
                         "\": give a line number (12) or a path and line (tests/t.py:12)");
    options.explain = *line;
  }
  if (args.stage.mode != Mode::builtin && !args.llm && args.require_llm)
    return report_error(
        Error{"--require-llm: no LLM configured (set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL, or llm.base_url and "
              "llm.model in .spark.toml)"});
  std::vector<std::string> notes;
  LocalizeRun run{&args,
                  options,
                  common.redactor,
                  nullptr,
                  common.embedder,
                  structures_folder(common),
                  TriageContext{args.root, args.commit, args.test_code, args.since},
                  [deadline = args.llm_deadline](LlmOptions& o) { say_waiting(o, deadline); },
                  llm_progress()};
  if (!kb_exists(common)) {
    notes.push_back("no knowledge base at " + common.kb_dir);
  } else {
    auto kb = open_kb(common, false);
    if (!kb) return report_error(kb.error());
    run.kb = std::move(*kb);
  }
  auto done = localize_run(run, queries, notes);
  for (const auto& n : notes) note(n);
  if (!done) return report_error(done.error());
  if (!args.verify.command.empty()) {
    VerifyOptions verify = args.verify;
    verify.repo = args.root;
    verify.commit = args.commit;
    // A report's test files (and the recorded ones) are named from the repository's top; --test files from here.
    verify.query_root = args.junit.empty() && args.commit.empty() ? fs::path(".") : fs::path(args.root);
    verify.progress = [](const std::string& line) { note("verify: " + line); };
    // A stop signal ends the runs under way and their processes, then spark as the signal would; what a run left
    // behind (a daemon it started) is killed before its work tree goes.
    Result<VerifySummary> verified = fail("");
    {
      StopSignals stop;
      ChildSubreaper reaper;
      verified = verify_suggestions(queries, done->results, verify);
    }
    if (const int signal = stop_signal_caught()) end_by_signal(signal);
    if (!verified) return report_error(verified.error());
    note(verify_summary_line(*verified));
  }
  return print_run(common, args, queries, done->results, options, batch, done->llm_asked);
}

void add_verify_flags(CLI::App* sub, VerifyOptions& verify, bool with_jobs) {
  sub->add_option("--verify", verify.command,
                  "try each suggested edit in a scratch work tree: run this command (with {test_id}) on the failing "
                  "test, and report the edit verified, not verified or not run");
  sub->add_option("--verify-timeout", verify.per_failure, "with --verify: seconds for one failure's runs (default 120)")
      ->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--verify-budget", verify.budget, "with --verify: seconds for all of them (default 600)")
      ->check(CLI::Range(1.0, 604800.0));
  if (!with_jobs) return;
  sub->add_option("-j,--jobs", verify.jobs, "with --verify: failures verified at once (default 1)")
      ->check(CLI::Range(1u, 256u));
}

namespace {

int cmd_localize(const Common& common, const LocalizeArgs& args) {
  if (args.root.empty()) {
    LocalizeArgs resolved = args;
    resolved.root = args.junit.empty() ? "." : default_junit_root(args.junit);
    return cmd_localize(common, resolved);
  }
  // Before the query is read and parsed: its allocations then come from huge pages too (src/base/huge_pages.h).
  prefer_huge_pages(kLocalizeHeap, huge_pages_allowed());
  // Missing arguments are usage errors (exit 2), like those the parser itself finds.
  std::string usage;
  if (!args.case_id.empty() && args.case_file.empty())
    usage = "--id needs --case";
  else if (!args.junit.empty() && (!args.case_file.empty() || !args.tests.empty()))
    usage = "--junit takes the failures from the report: not with --test or --case";
  else if (!args.junit.empty())
    usage = "";
  else if (args.case_file.empty() && args.tests.empty() && args.junit.empty())
    usage = "give the failing test's file with --test (or a cases file with --case [--id])";
  else if (args.case_file.empty() && args.junit.empty() && args.error.empty())
    usage = "give the failure output with --error FILE (or --error - for standard input)";
  if (!usage.empty()) return usage_error(usage);
  std::vector<Case> queries;
  if (!args.junit.empty()) {
    std::vector<std::string> notes;
    auto q = queries_from_junit(args.junit, args.root, args.test_id, notes);
    for (const auto& n : notes) note(n);
    if (!q) return report_error(q.error());
    if (q->empty()) {
      note(args.junit + ": no failed or erroring test to localize");
      if (args.format == "json") std::printf("[]\n");
      return 0;
    }
    queries = std::move(*q);
  } else if (!args.case_file.empty()) {
    auto q = queries_from_case_file(args.case_file, args.case_id);
    if (!q) return report_error(q.error());
    queries = std::move(*q);
  } else {
    auto q = query_from_args(common, args);
    if (!q) return report_error(q.error());
    queries.push_back(std::move(*q));
  }
  const bool batch = !args.junit.empty() || (!args.case_file.empty() && args.case_id.empty());
  return localize_queries(common, args, queries, batch);
}

}  // namespace

Command add_localize(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<LocalizeArgs>();
  LocalizeArgs& loc = *args;
  auto* sub = app.add_subcommand("localize", "rank the suspicious lines of a failing test");
  sub->add_option("--test", loc.tests, "the failing test's file(s); the first holds the test")
      ->check(CLI::ExistingFile);
  sub->add_option("--error", loc.error, "file with the failure output (traceback + message), or - for stdin");
  sub->add_option("--test-id", loc.test_id,
                  "the test id: a pytest node id, com.x.FooTest#testBar, tests/x.test.js > suite > case "
                  "(default: from the traceback)");
  sub->add_option("--time", loc.time, "failure time, ISO-8601 (default: now)");
  sub->add_option("--since", loc.since,
                  "the commit the test last passed at: the lines changed since, and the test lines using what the "
                  "product changed since, rank higher (default: the knowledge base's recorded runs say)");
  sub->add_option("--case", loc.case_file, "take the query from this cases.jsonl (labels are ignored)")
      ->check(CLI::ExistingFile);
  sub->add_option("--id", loc.case_id, "with --case: the case's id (default: every case of the file)");
  sub->add_option("--junit", loc.junit, "a JUnit XML report: localize every failed or erroring test in it")
      ->check(CLI::ExistingFile);
  sub->add_option("--root", loc.root,
                  "with --junit: the repository its test files are in (default: the git work tree's top when the "
                  "report's failing tests are found there, as `spark record` reads them; else .)")
      ->check(CLI::ExistingDirectory);
  flags.bind(sub, "-k", "localize.k")->check(CLI::Range(1, 100000));
  flags.bind(sub, "--level", "localize.level")->check(CLI::IsMember(kLevels));
  flags.bind(sub, "--policy", "localize.policy");
  sub->add_option("--window-fraction", loc.localize.policy.window_fraction,
                  "closest-* policies: share of the labelled cases (default " +
                      spark::defaults::text(spark::defaults::kWindowFraction) + ")")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--window", loc.localize.policy.window,
                  "closest-* policies: exact number of cases (overrides the fraction)");
  flags.bind(sub, "-r", "localize.r")->check(CLI::Range(1, 1000));
  flags.bind(sub, "--epsilon", "localize.epsilon")->check(CLI::Range(0.0, 1.0));
  flags.bind(sub, "--similarity-floor", "localize.similarity_floor");
  sub->add_option("--format", loc.format, "text | json | sarif | github | markdown")->check(CLI::IsMember(kFormats));
  sub->add_flag("--show-annotated", loc.show_annotated, "also print the annotated test code (text format)");
  sub->add_option("--markdown", loc.markdown_output,
                  "also write the Markdown summary (--format markdown) to this file ($GITHUB_STEP_SUMMARY, a comment)");
  sub->add_option("--color", loc.color, "auto | always | never")->check(CLI::IsMember({"auto", "always", "never"}));
  flags.bind(sub, "--mode", "llm.mode")->check(CLI::IsMember(kModes));
  add_llm_flags(sub, flags);
  flags.bind(sub, "--llm-api-key", "llm.api_key", "API key; prefer the environment: flags show in process lists");
  flags.bind(sub, "--temperature", "llm.temperature")->check(CLI::Range(0.0, 2.0));
  flags.bind(sub, "--connect-timeout", "llm.connect_timeout")->check(CLI::Range(0.1, 3600.0));
  flags.bind_switch(sub, "--require-llm", "llm.require", "true",
                    "exit 1 when the LLM cannot be used, instead of falling back");
  flags.bind_switch(sub, "--no-redact", "redact.enabled", "false",
                    "send text as it is (secrets are redacted by default)");
  sub->add_flag("--show-prompt", loc.stage.keep_prompt, "print the prompt (and put it into --format json)");
  sub->add_option("--explain", loc.explain,
                  "print every feature value and contribution of one line "
                  "(LINE, or PATH:LINE)");

  add_verify_flags(sub, loc.verify, true);

  return {sub, [args](Config& config, Common& common) {
            if (auto s = localize_settings(config, *args); !s) return usage_error(s.error());
            return cmd_localize(common, *args);
          }};
}

}  // namespace spark::cli
