// spark: find the faulty lines in a failing test by reusing what earlier fixes taught (SPARK).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>

#include "commands.h"
#include "formats/defaults.h"

namespace {

// A flag that sets a configuration key: flags win over the environment and the configuration file.
struct Binding {
  CLI::Option* option;
  std::string key;
  std::string* text;
};

}  // namespace

namespace {

int run(int argc, char** argv) {
  using namespace spark::cli;
  CLI::App app{"spark — localize the faulty lines of a failing test from similar failures fixed before"};
  app.require_subcommand(1);
  app.fallthrough();  // global options (--kb, --config) also after the subcommand
  app.set_version_flag("--version", std::string("spark ") + SPARK_VERSION);
  std::map<std::string, std::string> text;  // key → flag text (stable addresses)
  std::vector<Binding> bindings;
  const auto bind = [&](CLI::App* sub, const std::string& names, const std::string& key, const std::string& help) {
    std::string* slot = &text[key + "@" + sub->get_name()];
    CLI::Option* o = sub->add_option(names, *slot, help);
    bindings.push_back({o, key, slot});
    return o;
  };
  // The LLM settings `spark localize` and `spark eval` share.
  const auto bind_llm_flags = [&](CLI::App* sub) {
    bind(sub, "--llm-url", "llm.base_url",
         "OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (env SPARK_LLM_BASE_URL)");
    bind(sub, "--model", "llm.model", "model name (env SPARK_LLM_MODEL)");
    bind(sub, "--template", "llm.template", "prompt template file replacing the mode's built-in one");
    bind(sub, "--prompt-scope", "llm.prompt_scope",
         "file (default, as the paper) | test: only the failing test's reach")
        ->check(CLI::IsMember({"file", "test"}));
    bind(sub, "--max-tokens", "llm.max_tokens", "answer length limit (default 512)")->check(CLI::Range(1, 1000000));
    bind(sub, "--seed", "llm.seed", "seed sent to the server and for random mode's draw");
    bind(sub, "--concurrency", "llm.concurrency", "requests in flight (default 4)")->check(CLI::Range(1, 256));
    bind(sub, "--context-tokens", "llm.context_tokens",
         "the model's context window (default " + std::to_string(spark::defaults::kContextTokens) + ")")
        ->check(CLI::Range(256, 10000000));
    bind(sub, "--timeout", "llm.timeout", "seconds per request (default 300)")->check(CLI::Range(0.1, 86400.0));
    bind(sub, "--retries", "llm.retries", "retries on timeouts, 429 and 5xx (default 4)")->check(CLI::Range(0, 100));
    bind(sub, "--retry-delay", "llm.retry_delay", "first backoff in seconds (default 1)")
        ->check(CLI::Range(0.0, 600.0));
    bind(sub, "--deadline", "llm.deadline",
         "seconds for all LLM requests of the run, retries included; then the built-in ranking (default 300; 0: none; "
         "not used by eval)")
        ->check(CLI::Range(0.0, 1e9));
  };
  std::string config_path;
  app.add_option("--config", config_path, "configuration file (default: .spark.toml here or above, up to the git top)");
  bind(&app, "--kb", "kb",
       "knowledge base: a folder, or postgresql://user@host/db for a shared server (env SPARK_KB; "
       "default .spark)");
  bind(&app, "--local-dir", "local_dir",
       "with a server knowledge base: this runner's index, spool and LLM answer cache (env SPARK_LOCAL_DIR; default "
       ".spark)");

  ImportArgs import_args;
  auto* import = app.add_subcommand("import", "import labelled cases (JSON Lines) into the knowledge base");
  import->add_option("files", import_args.files, "cases.jsonl files")->required()->check(CLI::ExistingFile);
  import->add_flag("--replace", import_args.replace,
                   "overwrite stored cases whose id is imported with a different record");

  ExportArgs export_args;
  auto* exp = app.add_subcommand("export", "write every stored case as JSON Lines (lossless unless --redact)");
  exp->add_option("-o,--output", export_args.output, "file to write atomically (default: standard output)");
  exp->add_flag("--redact", export_args.redact,
                "replace secrets in error messages, file contents and meta with [REDACTED:rule] (not lossless)");

  IndexArgs index_args;
  size_t dimension = 0;
  auto* index = app.add_subcommand("index", "embed the cases, build the vector index, learn the ranker");
  index->add_flag("--rebuild", index_args.rebuild, "rebuild from scratch even when the index is up to date");
  bind(index, "--embedder", "embedder.kind", "builtin (default) or openai")
      ->check(CLI::IsMember({"builtin", "openai"}));
  index->add_option("--dimension", dimension, "built-in embedder dimension (default 1024)")
      ->check(CLI::Range(16, 65536));
  bind(index, "--embed-url", "embedder.base_url", "OpenAI-compatible base URL (env SPARK_EMBED_BASE_URL)");
  bind(index, "--embed-model", "embedder.model", "embedding model (env SPARK_EMBED_MODEL; default bge-m3)");

  LocalizeArgs loc;
  bool no_redact = false, structured = false, require_llm = false;
  auto* localize = app.add_subcommand("localize", "rank the suspicious lines of a failing test");
  localize->add_option("--test", loc.tests, "the failing test's file(s); the first holds the test")
      ->check(CLI::ExistingFile);
  localize->add_option("--error", loc.error, "file with the failure output (traceback + message), or - for stdin");
  localize->add_option("--test-id", loc.test_id,
                       "the test id: a pytest node id, com.x.FooTest#testBar, tests/x.test.js > suite > case "
                       "(default: from the traceback)");
  localize->add_option("--time", loc.time, "failure time, ISO-8601 (default: now)");
  localize->add_option("--case", loc.case_file, "take the query from this cases.jsonl (labels are ignored)")
      ->check(CLI::ExistingFile);
  localize->add_option("--id", loc.case_id, "with --case: the case's id (default: every case of the file)");
  localize->add_option("--junit", loc.junit, "a JUnit XML report: localize every failed or erroring test in it")
      ->check(CLI::ExistingFile);
  localize->add_option("--root", loc.root, "with --junit: the repository its test files are in (default .)")
      ->check(CLI::ExistingDirectory);
  bind(localize, "-k", "localize.k", "how many elements to return (default 5)")->check(CLI::Range(1, 100000));
  bind(localize, "--level", "localize.level", "line | statement | block | function")
      ->check(CLI::IsMember({"line", "statement", "block", "function"}));
  bind(localize, "--policy", "localize.policy", "all | all-preceding | closest-by-time | closest-time-preceding");
  localize
      ->add_option("--window-fraction", loc.window_fraction,
                   "closest-* policies: share of the corpus (default " +
                       spark::defaults::text(spark::defaults::kWindowFraction) + ")")
      ->check(CLI::Range(0.0, 1.0));
  localize->add_option("--window", loc.window, "closest-* policies: exact number of cases (overrides the fraction)");
  bind(localize, "-r", "localize.r", "similar cases to retrieve (default 1)")->check(CLI::Range(1, 1000));
  bind(
      localize, "--epsilon", "localize.epsilon",
      "annotation threshold, normalized Levenshtein (default " + spark::defaults::text(spark::defaults::kEpsilon) + ")")
      ->check(CLI::Range(0.0, 1.0));
  bind(localize, "--similarity-floor", "localize.similarity_floor",
       "ignore retrieved cases below this cosine (default " + spark::defaults::text(spark::defaults::kSimilarityFloor) +
           ")");
  localize->add_option("--format", loc.format, "text | json | sarif | github")
      ->check(CLI::IsMember({"text", "json", "sarif", "github"}));
  localize->add_flag("--show-annotated", loc.show_annotated, "also print the annotated test code (text format)");
  localize->add_option("--color", loc.color, "auto | always | never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  bind(localize, "--mode", "llm.mode",
       "builtin | baseline | default | random | annotation-free | directive | naive-rag | hybrid")
      ->check(CLI::IsMember(
          {"builtin", "baseline", "default", "random", "annotation-free", "directive", "naive-rag", "hybrid"}));
  bind_llm_flags(localize);
  bind(localize, "--llm-api-key", "llm.api_key", "API key (prefer env SPARK_LLM_API_KEY: flags show in process lists)");
  bind(localize, "--temperature", "llm.temperature", "sampling temperature (default 0)")->check(CLI::Range(0.0, 2.0));
  bind(localize, "--connect-timeout", "llm.connect_timeout", "seconds to connect (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  auto* structured_flag =
      localize->add_flag("--structured", structured, "ask for a JSON answer (response_format json_schema)");
  auto* require_flag =
      localize->add_flag("--require-llm", require_llm, "exit 1 when the LLM cannot be used, instead of falling back");
  auto* no_redact_flag =
      localize->add_flag("--no-redact", no_redact, "send text as it is (secrets are redacted by default)");
  localize->add_flag("--show-prompt", loc.show_prompt, "print the prompt (and put it into --format json)");
  localize->add_option("--explain", loc.explain,
                       "print every feature value and contribution of one line "
                       "(LINE, or PATH:LINE)");

  auto* config_cmd = app.add_subcommand("config", "print the effective configuration (secrets hidden)");

  // The history options `mine`, `record` and `hooks post-commit` share.
  const auto add_history = [&](CLI::App* sub, HistoryArgs& h) {
    sub->add_option("--repo", h.repo, "the git repository (default .)")->check(CLI::ExistingDirectory);
    sub->add_flag("--all-parents", h.all_parents, "walk every parent, not only the first-parent line");
    sub->add_option("--since", h.since, "only commits from this time (ISO-8601)");
    sub->add_option("--until", h.until, "only commits up to this time (ISO-8601)");
    bind(sub, "--sigma", "mine.sigma", "outlier rule: quarantine above mean + SIGMA * sd faulty lines (default 3)")
        ->check(CLI::Range(0.0, 100.0));
    bind(sub, "--project", "project", "the cases' project (default: the origin URL normalised, else the root commit)");
  };
  bool test_only_fixes = false;
  MineArgs mine_args;
  auto* mine = app.add_subcommand("mine",
                                  "label failures from git history into the knowledge base: each failure's "
                                  "first later passing commit is its fix");
  add_history(mine, mine_args.history);
  mine->add_option("--outcomes", mine_args.outcomes, "outcome files: JSON Lines (.jsonl) or JUnit XML (<sha>.xml)")
      ->check(CLI::ExistingFile);
  mine->add_option("--commit", mine_args.commit, "the commit of JUnit reports not named <sha>.xml");
  auto* mine_test_only =
      mine->add_flag("--test-only-fixes", test_only_fixes, "label only fixes that changed nothing but test code");
  mine->add_option("-o,--output", mine_args.output,
                   "also write the mined corpus (every labelled case) as JSON Lines "
                   "(- = standard output)");
  mine->add_option("--quarantine", mine_args.quarantine, "also write the quarantined cases as JSON Lines");
  mine->add_option("--run", mine_args.run,
                   "no recorded outcomes: run this command per commit, e.g. "
                   "\"python3 -m pytest {test_id}\" (exit 0 = passed)");
  mine->add_option("--test", mine_args.tests, "with --run: a test that fails at --from");
  mine->add_option("--from", mine_args.from, "with --run: the commit the tests fail at");
  mine->add_option("--to", mine_args.to, "with --run: the end of the range searched for the fix (default HEAD)");
  mine->add_option("--run-timeout", mine_args.timeout, "with --run: seconds per run (default 600)")
      ->check(CLI::Range(0.1, 86400.0));

  RecordArgs rec;
  auto* record = app.add_subcommand("record",
                                    "CI post-failure step: record a JUnit report's outcomes at a commit, "
                                    "localize its failures, label the failures its passes fix");
  add_history(record, rec.history);
  record->add_option("--junit", rec.junit, "the JUnit XML report of the test run")
      ->required()
      ->check(CLI::ExistingFile);
  record->add_option("--commit", rec.commit, "the commit tested (default HEAD)");
  auto* record_test_only =
      record->add_flag("--test-only-fixes", test_only_fixes, "label only fixes that changed nothing but test code");
  bool no_localize_flag = false;
  record->add_flag("--no-localize", no_localize_flag, "only record; do not localize the failures");
  record->add_option("--format", rec.localize_args.format, "text | json | sarif | github")
      ->check(CLI::IsMember({"text", "json", "sarif", "github"}));
  std::string record_sarif;
  record->add_option("--sarif", record_sarif, "also write the localization as SARIF to this file (code scanning)");
  bind(record, "-k", "localize.k", "how many elements to return (default 5)")->check(CLI::Range(1, 100000));
  bind(record, "--mode", "llm.mode",
       "builtin | baseline | default | random | annotation-free | directive | naive-rag | hybrid")
      ->check(CLI::IsMember(
          {"builtin", "baseline", "default", "random", "annotation-free", "directive", "naive-rag", "hybrid"}));
  bind_llm_flags(record);

  AuditArgs audit_args;
  auto* audit = app.add_subcommand("audit", "review quarantined mined cases: list, show, accept, reject, trim");
  audit->add_option("action", audit_args.action, "list (default) | show | accept | reject | trim")
      ->check(CLI::IsMember({"list", "show", "accept", "reject", "trim"}));
  audit->add_option("id", audit_args.id, "the mined case's id (or a unique prefix)");
  audit->add_option("--keep", audit_args.keep, "trim: the true faulty lines (12, 12-14, path:12; comma-separated)")
      ->delimiter(',');
  audit->add_option("--author", audit_args.author, "who decides (default: git config user.name <user.email>)");
  audit->add_option("--reason", audit_args.reason, "why (stored with the decision)");
  audit->add_flag("--all", audit_args.all, "list: every mined case, not only the quarantine");
  audit->add_option("--format", audit_args.format, "list: text | json")->check(CLI::IsMember({"text", "json"}));
  audit->add_option("--html", audit_args.html, "list: also write a self-contained HTML report with side-by-side diffs");
  audit->add_option("--repo", audit_args.repo, "the repository whose git config names the author (default .)");
  audit->add_option("--color", audit_args.color, "auto | always | never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  bind(audit, "--sigma", "mine.sigma", "the outlier rule shown (default 3)")->check(CLI::Range(0.0, 100.0));

  HooksArgs hooks_args;
  KbArgs kb_args;
  auto* kb = app.add_subcommand("kb", "make, inspect and copy knowledge bases (SQLite folder or PostgreSQL server)");
  kb->require_subcommand(1);
  auto* kb_init = kb->add_subcommand("init", "create the store named by --kb, or upgrade its schema");
  auto* kb_status = kb->add_subcommand("status", "the store's engine, schema, counts, local index and spool");
  auto* kb_copy = kb->add_subcommand("copy", "copy every case, outcome, failure and decision into an empty store");
  kb_copy->add_option("from", kb_args.from, "source: a folder or a postgresql:// URL")->required();
  kb_copy->add_option("to", kb_args.to, "destination (must be empty; made when absent)")->required();

  auto* hooks = app.add_subcommand("hooks", "git hooks: install | uninstall the post-commit hook; post-commit runs it");
  hooks->add_option("action", hooks_args.action, "install | uninstall | post-commit")
      ->required()
      ->check(CLI::IsMember({"install", "uninstall", "post-commit"}));
  add_history(hooks, hooks_args.history);
  hooks->add_option("--spark", hooks_args.spark_path, "install: the spark binary the hook runs (default: this one)");
  bind(hooks, "--test-command", "record.test_command",
       "post-commit: re-runs tests, {tests} = test ids, {junit} = report path");

  EvalArgs ev;
  bool eval_structured = false;
  auto* eval =
      app.add_subcommand("eval", "leave-one-out evaluation on labelled corpora: the paper's metrics and tables");
  eval->add_option("corpora", ev.corpora, "labelled cases.jsonl files")->required()->check(CLI::ExistingFile);
  eval->add_option("--mode", ev.modes,
                   "modes, comma-separated: builtin, traceback, annotation, baseline, default, random, "
                   "annotation-free, directive, naive-rag, hybrid (default builtin)")
      ->delimiter(',');
  eval->add_option("-k,--k", ev.ks, "k values, comma-separated (default 1,3,5,10)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  eval->add_option("--level", ev.levels, "levels, comma-separated: line, statement, block, function (default line)")
      ->delimiter(',')
      ->check(CLI::IsMember({"line", "statement", "block", "function"}));
  eval->add_option("--policy", ev.policies, "policies, comma-separated (default all)")->delimiter(',');
  eval->add_option(
          "--epsilon", ev.epsilons,
          "annotation thresholds, comma-separated (default " + spark::defaults::text(spark::defaults::kEpsilon) + ")")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  eval->add_option("-r", ev.rs, "retrieved cases, comma-separated (default 1)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  eval->add_option("--compare", ev.compare, "pairs to test, A:B (repeatable; default: every mode against the first)");
  eval->add_option("--window-fraction", ev.window_fraction,
                   "closest-* policies: share of the corpus (default " +
                       spark::defaults::text(spark::defaults::kWindowFraction) + ")")
      ->check(CLI::Range(0.0, 1.0));
  eval->add_option("--similarity-floor", ev.similarity_floor,
                   "ignore retrieved cases below this cosine (default " +
                       spark::defaults::text(spark::defaults::kSimilarityFloor) + ")");
  eval->add_option("--format", ev.format, "markdown | csv | json")->check(CLI::IsMember({"markdown", "csv", "json"}));
  eval->add_option("-o,--output", ev.output, "write the report here (atomically) instead of standard output");
  eval->add_option("--html", ev.html, "also write a self-contained HTML report with plots and a per-case drill-down");
  eval->add_option("--cache", ev.cache, "LLM answer cache (default: <kb>/llm-answers.sqlite)");
  bind_llm_flags(eval);
  auto* eval_structured_flag =
      eval->add_flag("--structured", eval_structured, "ask for JSON answers (response_format)");
  auto* eval_no_redact = eval->add_flag("--no-redact", no_redact, "send text as it is");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  std::optional<std::filesystem::path> file;
  if (!config_path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(config_path, ec)) {
      std::fprintf(stderr, "spark: error: --config %s: no such file\n", config_path.c_str());
      return 2;
    }
    file = config_path;
  } else {
    std::error_code ec;
    const auto here = std::filesystem::current_path(ec);
    if (ec) {
      std::fprintf(stderr, "spark: error: the current folder cannot be read: %s\n", ec.message().c_str());
      return 1;
    }
    file = spark::Config::discover(here);
  }
  auto config = spark::Config::load(file);
  if (!config) {
    std::fprintf(stderr, "spark: error: %s\n", config.error().message.c_str());
    return 1;
  }
  for (const auto& b : bindings)
    if (b.option->count() > 0)
      if (auto s = config->set(b.key, *b.text, "flag " + b.option->get_name()); !s) {
        std::fprintf(stderr, "spark: error: %s\n", s.error().message.c_str());
        return 2;
      }
  if (structured_flag->count() > 0) (void)config->set("llm.structured", "true", "flag --structured");
  if (require_flag->count() > 0) (void)config->set("llm.require", "true", "flag --require-llm");
  if (no_redact_flag->count() > 0 || eval_no_redact->count() > 0)
    (void)config->set("redact.enabled", "false", "flag --no-redact");
  if (eval_structured_flag->count() > 0) (void)config->set("llm.structured", "true", "flag --structured");

  if (config_cmd->parsed()) return cmd_config(*config);
  Common common;
  if (auto s = common_from_config(*config, common); !s) {
    std::fprintf(stderr, "spark: error: %s\n", s.error().message.c_str());
    return 1;
  }
  if (dimension) common.embedder.builtin.dimension = dimension;
  if (mine_test_only->count() > 0 || record_test_only->count() > 0)
    (void)config->set("mine.test_only_fixes", "true", "flag --test-only-fixes");
  for (HistoryArgs* h : {&mine_args.history, &rec.history, &hooks_args.history}) {
    h->sigma = config->number("mine.sigma");
    h->test_only_fixes = config->boolean("mine.test_only_fixes");
    h->project = config->str("project");
  }
  audit_args.sigma = config->number("mine.sigma");
  if (mine->parsed()) return cmd_mine(common, mine_args);
  if (audit->parsed()) return cmd_audit(common, audit_args);
  if (record->parsed()) {
    const std::string format = rec.localize_args.format;
    if (auto s = localize_from_config(*config, rec.localize_args); !s) {
      std::fprintf(stderr, "spark: error: %s\n", s.error().message.c_str());
      return 2;
    }
    rec.localize_args.format = format;
    rec.localize_args.sarif_output = record_sarif;
    rec.localize = !no_localize_flag;
    return cmd_record(common, rec);
  }
  if (kb->parsed()) {
    kb_args.action = kb_init->parsed() ? "init" : kb_status->parsed() ? "status" : "copy";
    return cmd_kb(common, kb_args);
  }
  if (hooks->parsed()) {
    hooks_args.test_command = config->str("record.test_command");
    hooks_args.timeout = config->number("record.timeout");
    if (hooks_args.spark_path.empty()) {
      std::error_code ec;
      auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      hooks_args.spark_path = ec ? std::string("spark") : self.string();
    }
    hooks_args.repo = hooks_args.history.repo;
    return cmd_hooks(common, hooks_args);
  }
  if (import->parsed()) return cmd_import(common, import_args);
  if (exp->parsed()) return cmd_export(common, export_args);
  if (index->parsed()) return cmd_index(common, index_args);
  if (eval->parsed()) {
    if (auto s = localize_from_config(*config, ev.llm); !s) {
      std::fprintf(stderr, "spark: error: %s\n", s.error().message.c_str());
      return 2;
    }
    ev.use_kb = config->get("kb").source != "default";
    for (int i = 0; i < argc; ++i) ev.command_line += (i ? " " : "") + std::string(i == 0 ? "spark" : argv[i]);
    return cmd_eval(common, ev);
  }
  if (localize->parsed()) {
    if (auto s = localize_from_config(*config, loc); !s) {
      std::fprintf(stderr, "spark: error: %s\n", s.error().message.c_str());
      return 2;
    }
    return cmd_localize(common, loc);
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
    std::fprintf(stderr, "spark: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "spark: error: an unknown exception\n");
  }
  return 1;
}
