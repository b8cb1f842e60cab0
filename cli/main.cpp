// spark: find the faulty lines in a failing test by reusing what earlier fixes taught (SPARK).
//
// main parses the command line with CLI11: one registration function per subcommand adds its flags and returns what
// it runs. Flags that name a configuration key are bound through `Flags`, so they win over the environment and the
// configuration file (src/formats/config.h); the command runs once the configuration is complete.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <new>

#include "base/files.h"
#include "base/text.h"
#include "code/levenshtein.h"
#include "commands.h"
#include "formats/defaults.h"
#include "formats/trust.h"

namespace {

using namespace spark::cli;
using spark::Config;

// The flags that set configuration keys, across all subcommands.
class Flags {
 public:
  // An option whose value sets `key`. Its help is the settings table's (config.h's option_help): `prose`, else the
  // key's own help, then the key's default and environment variables.
  CLI::Option* bind(CLI::App* sub, const std::string& names, const std::string& key, const std::string& prose = "") {
    std::string* slot = &text_[key + "@" + sub->get_name() + "@" + names];
    CLI::Option* o = sub->add_option(names, *slot, spark::option_help(key, prose));
    bindings_.push_back({o, key, slot, {}});
    return o;
  }
  // A switch that sets `key` to `value` when given.
  CLI::Option* bind_switch(CLI::App* sub, const std::string& names, const std::string& key, const std::string& value,
                           const std::string& help) {
    CLI::Option* o = sub->add_flag(names, help);
    bindings_.push_back({o, key, nullptr, value});
    return o;
  }
  // Sets every key whose flag was given; an error names the flag.
  spark::Status apply(Config& config) const {
    for (const auto& b : bindings_)
      if (b.option->count() > 0)
        if (auto s = config.set(b.key, b.text ? *b.text : b.fixed, "flag " + b.option->get_name()); !s) return s;
    return {};
  }

 private:
  struct Binding {
    CLI::Option* option;
    std::string key;
    std::string* text;  // the option's value; null for a switch
    std::string fixed;  // a switch's value
  };
  std::map<std::string, std::string> text_;  // stable addresses for the options' values
  std::vector<Binding> bindings_;
};

// A subcommand once registered: what it runs with the complete configuration and the settings every command shares.
struct Command {
  CLI::App* app = nullptr;
  std::function<int(Config&, Common&)> run;
  bool needs_common = true;  // false: runs on the configuration alone (`spark config`)
};

const std::vector<std::string> kModes = {"builtin",         "baseline",  "default",   "random",
                                         "annotation-free", "directive", "naive-rag", "hybrid"};
const std::vector<std::string> kFormats = {"text", "json", "sarif", "github", "markdown"};
const std::vector<std::string> kLevels = {"line", "statement", "block", "function"};

// The global options: --config (read here) and the store (--kb, --local-dir).
void add_global(CLI::App& app, Flags& flags, std::string& config_path) {
  app.add_option("--config", config_path, "configuration file (default: .spark.toml here or above, up to the git top)");
  flags.bind(&app, "--kb", "kb");
  flags.bind(&app, "--local-dir", "local_dir");
}

// The LLM settings `spark localize`, `record` and `eval` share.
void add_llm_flags(CLI::App* sub, Flags& flags) {
  flags.bind(sub, "--llm-url", "llm.base_url");
  flags.bind(sub, "--model", "llm.model");
  flags.bind(sub, "--template", "llm.template");
  flags.bind(sub, "--prompt-scope", "llm.prompt_scope")->check(CLI::IsMember({"file", "test"}));
  flags.bind(sub, "--max-tokens", "llm.max_tokens")->check(CLI::Range(1, 1000000));
  flags.bind(sub, "--seed", "llm.seed");
  flags.bind(sub, "--concurrency", "llm.concurrency")->check(CLI::Range(1, 256));
  flags.bind(sub, "--context-tokens", "llm.context_tokens")->check(CLI::Range(256, 10000000));
  flags.bind(sub, "--timeout", "llm.timeout")->check(CLI::Range(0.1, 86400.0));
  flags.bind(sub, "--retries", "llm.retries")->check(CLI::Range(0, 100));
  flags.bind(sub, "--retry-delay", "llm.retry_delay")->check(CLI::Range(0.0, 600.0));
  flags.bind(sub, "--deadline", "llm.deadline")->check(CLI::Range(0.0, 1e9));
}

// The history options `mine`, `record` and `hooks post-commit` share; filled from the configuration by
// history_from_config.
void add_history(CLI::App* sub, Flags& flags, HistoryArgs& h, bool many_repos = false) {
  if (many_repos)
    sub->add_option("--repo", h.repos, "the git repository (default .); --discover: may be given several times")
        ->check(CLI::ExistingDirectory);
  else
    sub->add_option("--repo", h.repo, "the git repository (default .)")->check(CLI::ExistingDirectory);
  sub->add_flag("--all-parents", h.all_parents, "walk every parent, not only the first-parent line");
  sub->add_option("--since", h.since, "only commits from this time (2023-01-01, or an ISO-8601 time)");
  sub->add_option("--until", h.until, "only commits up to this time (2023-01-01, or an ISO-8601 time)");
  flags.bind(sub, "--sigma", "mine.sigma")->check(CLI::Range(0.0, 100.0));
  flags.bind(sub, "--project", "project");
  flags.bind_switch(sub, "--test-only-fixes", "mine.test_only_fixes", "true",
                    "label only fixes that changed nothing but test code");
}

void history_from_config(const Config& config, HistoryArgs& h) {
  h.sigma = config.number("mine.sigma");
  h.test_only_fixes = config.boolean("mine.test_only_fixes");
  h.test_code = config.str("mine.test_code");
  h.project = config.str("project");
}

Command add_import(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  auto* sub = app.add_subcommand("import", "import labelled cases (JSON Lines) into the knowledge base");
  sub->add_option("files", args->files, "cases.jsonl files")->required()->check(CLI::ExistingFile);
  sub->add_flag("--replace", args->replace, "overwrite stored cases whose id is imported with a different record");
  return {sub, [args](Config&, Common& common) { return cmd_import(common, *args); }};
}

Command add_export(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* sub = app.add_subcommand("export", "write every stored case as JSON Lines (lossless unless --redact)");
  sub->add_option("-o,--output", args->output, "file to write atomically (default: standard output)");
  sub->add_flag("--redact", args->redact,
                "replace secrets in error messages, file contents and meta with [REDACTED:rule] (not lossless)");
  return {sub, [args](Config&, Common& common) { return cmd_export(common, *args); }};
}

Command add_index(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<IndexArgs>();
  auto dimension = std::make_shared<size_t>(0);
  auto* sub = app.add_subcommand("index", "embed the cases, build the vector index, learn the ranker");
  sub->add_flag("--rebuild", args->rebuild, "rebuild from scratch even when the index is up to date");
  flags.bind(sub, "--embedder", "embedder.kind")->check(CLI::IsMember({"builtin", "openai"}));
  sub->add_option("--dimension", *dimension, "built-in embedder dimension (default 1024)")
      ->check(CLI::Range(16, 65536));
  flags.bind(sub, "--embed-url", "embedder.base_url");
  flags.bind(sub, "--embed-model", "embedder.model");
  return {sub, [args, dimension](Config&, Common& common) {
            if (*dimension) common.embedder.builtin.dimension = *dimension;
            return cmd_index(common, *args);
          }};
}

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
  sub->add_option("--case", loc.case_file, "take the query from this cases.jsonl (labels are ignored)")
      ->check(CLI::ExistingFile);
  sub->add_option("--id", loc.case_id, "with --case: the case's id (default: every case of the file)");
  sub->add_option("--junit", loc.junit, "a JUnit XML report: localize every failed or erroring test in it")
      ->check(CLI::ExistingFile);
  sub->add_option("--root", loc.root, "with --junit: the repository its test files are in (default .)")
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
  flags.bind_switch(sub, "--structured", "llm.structured", "true",
                    "ask for a JSON answer (response_format json_schema)");
  flags.bind_switch(sub, "--require-llm", "llm.require", "true",
                    "exit 1 when the LLM cannot be used, instead of falling back");
  flags.bind_switch(sub, "--no-redact", "redact.enabled", "false",
                    "send text as it is (secrets are redacted by default)");
  sub->add_flag("--show-prompt", loc.stage.keep_prompt, "print the prompt (and put it into --format json)");
  sub->add_option("--explain", loc.explain,
                  "print every feature value and contribution of one line "
                  "(LINE, or PATH:LINE)");

  return {sub, [args](Config& config, Common& common) {
            if (auto s = localize_from_config(config, *args); !s) return usage_error(s.error());
            return cmd_localize(common, *args);
          }};
}

Command add_config(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("config", "print the effective configuration (secrets hidden)");
  sub->add_flag("--markdown", *markdown,
                "print the table of every setting instead (key, type, default, environment, help), as Markdown: "
                "docs/SETTINGS.md holds it");
  return {sub, [markdown](Config& config, Common&) { return cmd_config(config, *markdown); },
          /*needs_common=*/false};
}

Command add_trust(CLI::App& app) {
  auto args = std::make_shared<TrustArgs>();
  auto* sub = app.add_subcommand("trust",
                                 "trust the project's .spark.toml as it is now: its settings that send data, hold keys, "
                                 "run commands, write outside the repository or weaken a safety rule are then used "
                                 "(docs/SECURITY.md)");
  sub->add_option("file", args->file, "the file (default: the .spark.toml spark finds here)");
  sub->add_flag("--remove", args->remove, "forget the file: untrusted again");
  sub->add_flag("--list", args->list, "list the trusted files and whether each is unchanged");
  return {sub, [args](Config&, Common&) { return cmd_trust(*args); }, /*needs_common=*/false};
}

Command add_mine(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<MineArgs>();
  MineArgs& mine_args = *args;
  auto* sub = app.add_subcommand("mine",
                                 "label failures from git history into the knowledge base: each failure's "
                                 "first later passing commit is its fix");
  add_history(sub, flags, mine_args.history, /*many_repos=*/true);
  sub->add_option("--outcomes", mine_args.outcomes, "outcome files: JSON Lines (.jsonl) or JUnit XML (<sha>.xml)")
      ->check(CLI::ExistingFile);
  sub->add_option("--commit", mine_args.commit, "the commit of JUnit reports not named <sha>.xml");
  sub->add_option("-o,--output", mine_args.output,
                  "also write the mined corpus (every labelled case) as JSON Lines "
                  "(- = standard output)");
  sub->add_option("--quarantine", mine_args.quarantine, "also write the quarantined cases as JSON Lines");
  sub->add_option("--run", mine_args.run,
                  "no recorded outcomes: run this command per commit, e.g. "
                  "\"python3 -m pytest {test_id}\" (exit 0 = passed)");
  sub->add_option("--test", mine_args.tests, "with --run: a test that fails at --from");
  sub->add_option("--from", mine_args.from, "with --run: the commit the tests fail at");
  sub->add_option("--to", mine_args.to, "with --run: the end of the range searched for the fix (default HEAD)");
  sub->add_option("--run-timeout", mine_args.timeout, "with --run: seconds per run (default 600)")
      ->check(CLI::Range(0.1, 86400.0));
  sub->add_flag("--discover", mine_args.discover,
                "no recorded outcomes, no known failure: find every test-code fix of the history by running each "
                "candidate test at the commit and its parent ({test_id}, {file}, {function}, {class} in --run)");
  sub->add_flag("--dry-run", mine_args.dry_run, "with --discover: list the candidates and why, run nothing (with -o FILE: as JSON Lines there instead)");
  sub->add_option("-j,--jobs", mine_args.jobs, "with --discover: runs at once (default 1)")->check(CLI::Range(1, 256));
  sub->add_option("--shard", mine_args.shard,
                  "with --discover: I/N, this runner's share of the commits (several runners, one shared store)");
  sub->add_option("--max-tests-per-commit", mine_args.max_tests,
                  "with --discover: leave out (and name) a commit whose change reaches more tests than this, a shared "
                  "hook or set-up (default 100; 0: no bound)");
  sub->add_flag("--retry-unrunnable", mine_args.retry_unrunnable,
                "with --discover: run again the tests stored as could-not-run (after fixing the environment)");

  return {sub, [args](Config& config, Common& common) {
            history_from_config(config, args->history);
            return cmd_mine(common, *args);
          }};
}

Command add_record(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<RecordArgs>();
  RecordArgs& rec = *args;
  auto no_localize = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("record",
                                 "CI post-failure step: record a JUnit report's outcomes at a commit, "
                                 "localize its failures, label the failures its passes fix");
  add_history(sub, flags, rec.history);
  sub->add_option("--junit", rec.junit, "the JUnit XML report of the test run")->required()->check(CLI::ExistingFile);
  sub->add_option("--commit", rec.commit, "the commit tested (default HEAD)");
  sub->add_flag("--no-localize", *no_localize, "only record; do not localize the failures");
  sub->add_option("--format", rec.localize_args.format, "text | json | sarif | github | markdown")->check(CLI::IsMember(kFormats));
  sub->add_option("--sarif", rec.localize_args.sarif_output,
                  "also write the localization as SARIF to this file (code scanning)");
  sub->add_option("--markdown", rec.localize_args.markdown_output,
                  "also write the Markdown summary (--format markdown) to this file ($GITHUB_STEP_SUMMARY, a comment)");
  flags.bind(sub, "-k", "localize.k")->check(CLI::Range(1, 100000));
  flags.bind(sub, "-r", "localize.r")->check(CLI::Range(1, 1000));
  flags.bind(sub, "--mode", "llm.mode")->check(CLI::IsMember(kModes));
  add_llm_flags(sub, flags);

  return {sub, [args, no_localize](Config& config, Common& common) {
            history_from_config(config, args->history);
            if (auto s = localize_from_config(config, args->localize_args); !s) return usage_error(s.error());
            args->localize = !*no_localize;
            return cmd_record(common, *args);
          }};
}

Command add_audit(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<AuditArgs>();
  AuditArgs& audit_args = *args;
  auto* sub = app.add_subcommand("audit", "review quarantined mined cases: list, show, accept, reject, trim, serve");
  sub->add_option("action", audit_args.action,
                  "list (default) | show | accept | reject | trim | serve (the audit in a browser, on 127.0.0.1)")
      ->check(CLI::IsMember({"list", "show", "accept", "reject", "trim", "serve"}));
  sub->add_option("id", audit_args.id, "the mined case's id (or a unique prefix)");
  sub->add_option("--keep", audit_args.keep, "trim: the true faulty lines (12, 12-14, path:12; comma-separated)")
      ->delimiter(',');
  sub->add_option("--author", audit_args.author, "who decides (default: git config user.name <user.email>)");
  sub->add_option("--reason", audit_args.reason, "why (stored with the decision)");
  sub->add_flag("--all", audit_args.all, "list: every mined case, not only the quarantine");
  sub->add_option("--format", audit_args.format, "list: text | json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--html", audit_args.html, "list: also write a self-contained HTML report with side-by-side diffs");
  sub->add_option("--repo", audit_args.repo, "the repository whose git config names the author (default .)");
  sub->add_option("--port", audit_args.port, "serve: the port on 127.0.0.1 (default 0: a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--color", audit_args.color, "auto | always | never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  flags.bind(sub, "--sigma", "mine.sigma", "the outlier rule shown")->check(CLI::Range(0.0, 100.0));

  return {sub, [args](Config& config, Common& common) {
            args->sigma = config.number("mine.sigma");
            return cmd_audit(common, *args);
          }};
}

Command add_failures(CLI::App& app) {
  auto args = std::make_shared<FailuresArgs>();
  auto* sub = app.add_subcommand("failures",
                                 "the open failures (recorded, not fixed yet): list, show, dismiss, expire");
  sub->add_option("action", args->action,
                  "list (default) | show ID | dismiss ID | expire (close those whose test is gone at HEAD)")
      ->check(CLI::IsMember({"list", "show", "dismiss", "expire"}));
  sub->add_option("id", args->id, "a failure's id (or a unique prefix), or a test id");
  sub->add_option("--format", args->format, "list, show: text | json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--author", args->author, "dismiss: who (default: git config user.name <user.email>)");
  sub->add_option("--reason", args->reason, "dismiss: why (stored with it)");
  sub->add_option("--repo", args->repo, "the git repository: HEAD's test files and history (default .)");
  return {sub, [args](Config&, Common& common) { return cmd_failures(common, *args); }};
}

Command add_kb(CLI::App& app) {
  auto args = std::make_shared<KbArgs>();
  auto* sub = app.add_subcommand("kb", "make, inspect and copy knowledge bases (SQLite folder or PostgreSQL server)");
  sub->require_subcommand(1);
  auto* init = sub->add_subcommand("init", "create the store named by --kb, or upgrade its schema");
  auto* status = sub->add_subcommand("status", "the store's engine, schema, counts, local index and spool");
  auto* copy = sub->add_subcommand("copy", "copy every case, outcome, failure and decision into an empty store");
  copy->add_option("from", args->from, "source: a folder or a postgresql:// URL")->required();
  copy->add_option("to", args->to, "destination (must be empty; made when absent)")->required();
  return {sub, [args, init, status](Config&, Common& common) {
            args->action = init->parsed() ? "init" : status->parsed() ? "status" : "copy";
            return cmd_kb(common, *args);
          }};
}

Command add_hooks(CLI::App& app, Flags& flags) {
  auto args = std::make_shared<HooksArgs>();
  auto* sub = app.add_subcommand("hooks", "git hooks: install | uninstall the post-commit hook; post-commit runs it");
  sub->add_option("action", args->action, "install | uninstall | post-commit")
      ->required()
      ->check(CLI::IsMember({"install", "uninstall", "post-commit"}));
  add_history(sub, flags, args->history);
  sub->add_option("--spark", args->spark_path, "install: the spark binary the hook runs (default: this one)");
  flags.bind(sub, "--test-command", "record.test_command",
             "post-commit: re-runs tests, {tests} = test ids, {junit} = report path");
  return {sub, [args](Config& config, Common& common) {
            history_from_config(config, args->history);
            args->test_command = config.str("record.test_command");
            args->timeout = config.number("record.timeout");
            if (args->spark_path.empty()) {
              std::error_code ec;
              auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
              args->spark_path = ec ? std::string("spark") : self.string();
            }
            args->repo = args->history.repo;
            return cmd_hooks(common, *args);
          }};
}

Command add_eval(CLI::App& app, Flags& flags, int argc, char** argv) {
  auto args = std::make_shared<EvalArgs>();
  EvalArgs& ev = *args;
  auto* sub =
      app.add_subcommand("eval", "leave-one-out evaluation on labelled corpora: the paper's metrics and tables");
  sub->add_option("corpora", ev.corpora, "labelled cases.jsonl files")->required()->check(CLI::ExistingFile);
  sub->add_option("--mode", ev.modes,
                  "modes, comma-separated: builtin, traceback, annotation, baseline, default, random, "
                  "annotation-free, directive, naive-rag, hybrid (default builtin)")
      ->delimiter(',');
  sub->add_option("-k,--k", ev.ks, "k values, comma-separated (default 1,3,5,10)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  sub->add_option("--level", ev.levels, "levels, comma-separated: line, statement, block, function (default line)")
      ->delimiter(',')
      ->check(CLI::IsMember(kLevels));
  sub->add_option("--policy", ev.policies, "policies, comma-separated (default all)")->delimiter(',');
  sub->add_option(
         "--epsilon", ev.epsilons,
         "annotation thresholds, comma-separated (default " + spark::defaults::text(spark::defaults::kEpsilon) + ")")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("-r", ev.rs,
                  "retrieved cases, comma-separated (default " + std::to_string(spark::defaults::kRetrieved) + ")")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  sub->add_option("--compare", ev.compare, "pairs to test, A:B (repeatable; default: every mode against the first)");
  sub->add_option("--window-fraction", ev.window_fraction,
                  "closest-* policies: share of the labelled cases (default " +
                      spark::defaults::text(spark::defaults::kWindowFraction) + ")")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--similarity-floor", ev.similarity_floor,
                  "ignore retrieved cases below this cosine (default " +
                      spark::defaults::text(spark::defaults::kSimilarityFloor) + ")");
  sub->add_option("--format", ev.format, "markdown | csv | json")->check(CLI::IsMember({"markdown", "csv", "json"}));
  sub->add_option("-o,--output", ev.output, "write the report here (atomically) instead of standard output");
  sub->add_option("--html", ev.html, "also write a self-contained HTML report with plots and a per-case drill-down");
  sub->add_option("--cache", ev.cache, "LLM answer cache (default: <kb>/llm-answers.sqlite)");
  add_llm_flags(sub, flags);
  flags.bind_switch(sub, "--structured", "llm.structured", "true", "ask for JSON answers (response_format)");
  flags.bind_switch(sub, "--no-redact", "redact.enabled", "false", "send text as it is");

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(i == 0 ? "spark" : argv[i]);
  return {sub, [args, command_line](Config& config, Common& common) {
            if (auto s = localize_from_config(config, args->llm); !s) return usage_error(s.error());
            args->use_kb = !config.get("kb").source.starts_with("default");
            args->command_line = command_line;
            return cmd_eval(common, *args);
          }};
}

// The configuration files, lowest first: the system's, the user's, then the project's (`file`). The project's is
// believed whole when its owner trusted it as it is (`spark trust`), or when it was named with --config and lies
// outside every git work tree; otherwise it came with the repository and may set only what a repository may
// (docs/SECURITY.md).
std::vector<Config::File> config_layers(const std::optional<std::filesystem::path>& file, bool named) {
  std::vector<Config::File> layers;
  if (auto system = spark::system_config_file()) layers.push_back({*system, true});
  if (auto user = spark::user_config_file()) layers.push_back({*user, true});
  if (file) {
    bool trusted = named && !spark::inside_work_tree(*file);
    if (!trusted)
      if (auto content = spark::read_file(*file)) trusted = spark::is_trusted(*file, *content);
    layers.push_back({*file, trusted});
  }
  return layers;
}

// The configuration: the file given or found, the environment, then the flags given.
spark::Result<Config> load_config(const std::string& config_path, const Flags& flags, int& exit_code) {
  std::optional<std::filesystem::path> file;
  std::error_code ec;
  const auto here = std::filesystem::current_path(ec);
  if (ec) {
    exit_code = 1;
    return spark::fail("the current folder cannot be read: " + ec.message());
  }
  if (!config_path.empty()) {
    if (!std::filesystem::is_regular_file(config_path, ec)) {
      exit_code = 2;
      return spark::fail("--config " + config_path + ": no such file");
    }
    file = config_path;
  } else {
    file = Config::discover(here);
  }
  auto config = Config::load(config_layers(file, !config_path.empty()));
  if (!config) {
    exit_code = 1;
    return config;
  }
  if (auto s = flags.apply(*config); !s) {
    exit_code = 2;
    return std::unexpected(s.error());
  }
  config->place_folders(here);
  config->bind_keys();
  return config;
}

// For each option the command line gave that its command does not have, the one it most likely meant: a known
// option's name is a prefix of it ("--junitxml" → "--junit", pytest's own flag given to spark) or a few edits away.
// One line per unknown option that has such a neighbour, "did you mean --junit?".
std::string option_hints(const CLI::App& app) {
  std::vector<std::string> known;
  const auto add_options = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      for (const auto& name : o->get_lnames()) known.push_back("--" + name);
  };
  add_options(app);
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    add_options(*sub);
  }
  std::string out;
  for (std::string given : app.remaining(true)) {
    given = given.substr(0, given.find('='));
    if (!given.starts_with("--") || given.size() < 4) continue;
    const std::u32string u(given.begin(), given.end());
    std::string best;
    size_t best_cost = std::max<size_t>(2, (given.size() - 2) / 3) + 1;  // edits allowed, plus one
    for (const auto& k : known) {
      const bool prefix = k.size() >= 5 && given.starts_with(k);
      const size_t cost = prefix ? 0 : spark::levenshtein(u, std::u32string(k.begin(), k.end()));
      if (cost < best_cost || (cost == 0 && prefix && k.size() > best.size())) best = k, best_cost = cost;
    }
    if (!best.empty() && best != given) out += "spark: error: unknown option " + given + ": did you mean " + best + "?\n";
  }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"spark — localize the faulty lines of a failing test from similar failures fixed before"};
  app.require_subcommand(1);
  app.fallthrough();  // global options (--kb, --config) also after the subcommand
  app.set_version_flag("--version", std::string("spark ") + SPARK_VERSION);
  Flags flags;
  std::string config_path;
  add_global(app, flags, config_path);
  const std::vector<Command> commands = {
      add_import(app),
      add_export(app),
      add_index(app, flags),
      add_localize(app, flags),
      add_config(app),
      add_trust(app),
      add_mine(app, flags),
      add_record(app, flags),
      add_audit(app, flags),
      add_failures(app),
      add_kb(app),
      add_hooks(app, flags),
      add_eval(app, flags, argc, argv),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // An unknown option is an extra, or the reason a required one seems missing (`record --junitxml r.xml`).
    if (dynamic_cast<const CLI::ExtrasError*>(&e) || dynamic_cast<const CLI::RequiredError*>(&e))
      std::fputs(option_hints(app).c_str(), stderr);
    return code == 0 ? 0 : 2;
  }
  int exit_code = 1;
  auto config = load_config(config_path, flags, exit_code);
  if (!config) {
    report_error(config.error());
    return exit_code;
  }
  for (const auto& command : commands) {
    if (!command.app->parsed()) continue;
    // What the configuration did not use, in one line (`spark trust` says it its own way).
    if (const std::string warning = config->trust_warning(); !warning.empty() && command.app->get_name() != "trust")
      std::fprintf(stderr, "%s\n", spark::terminal_lines(warning).c_str());
    Common common;
    if (command.needs_common)
      if (auto s = common_from_config(*config, common); !s) {
        return report_error(s.error());
      }
    return command.run(*config, common);
  }
  return 2;
}

}  // namespace

// Every failure spark knows of is a returned error; this is the last guard for the ones it does not (an exception from
// a library, an allocation that fails): a line naming it and exit 1, never std::terminate's abort.
int main(int argc, char** argv) {
  // A file-size limit (RLIMIT_FSIZE) must end in a clear error, not a kill: with SIGXFSZ ignored the write fails with
  // EFBIG, which SQLite and write_file_atomic report like a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "spark: error: out of memory\n");
  } catch (const std::exception& e) {
    spark::cli::report_error(spark::Error{e.what()});
  } catch (...) {
    std::fprintf(stderr, "spark: error: an unknown exception\n");
  }
  return 1;
}
