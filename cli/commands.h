// The `spark` subcommands: thin bodies over the libraries. Each returns the process exit code and prints errors as
// "spark: error: …" (0 = success, 1 = the command failed: bad input, a damaged store; 2 = usage).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine.h"
#include "formats/config.h"
#include "formats/defaults.h"
#include "llm/llm_client.h"
#include "llm_stage.h"
#include "localizer.h"
#include "policy.h"
#include "prompt.h"
#include "store/knowledge_base.h"

namespace spark {
class GitRepository;
}

namespace spark::cli {

struct Common {
  std::string kb_dir = ".spark";     // a folder (SQLite) or a postgresql:// URL
  std::string kb_source;             // how it was chosen: "flag --kb", "env SPARK_KB", "default: the nearest …"
  std::string local_dir = ".spark";  // with a server store: this runner's index, spool and LLM answer cache
  EmbedderConfig embedder;
  std::shared_ptr<const Redactor> redactor;    // null when redaction is off (--no-redact, redact.enabled = false)
  std::vector<RedactionRule> redaction_rules;  // the user's rules (for `export --redact`, which asks for redaction)
};

// Fills Common from the effective configuration (the OpenAI embedder gets the redactor).
Status common_from_config(const Config& config, Common& common);

// `spark config`: the effective configuration, secrets hidden; with `markdown`, the table of every setting instead
// (settings_markdown, docs/SETTINGS.md).
int cmd_config(const Config& config, bool markdown);

struct TrustArgs {
  std::string file;  // "" = the project's .spark.toml found from the working directory
  bool remove = false;
  bool list = false;
};
// `spark trust`: records the project's configuration file as trusted as it is now (formats/trust.h), so that the
// settings a repository may not set on its own are used; --remove forgets it; --list shows every trusted file.
int cmd_trust(const TrustArgs& args);

struct ImportArgs {
  std::vector<std::string> files;
  bool replace = false;
};
int cmd_import(const Common& common, const ImportArgs& args);

struct ExportArgs {
  std::string output;   // "" = standard output
  bool redact = false;  // redact error messages, file contents and meta (not lossless then)
};
int cmd_export(const Common& common, const ExportArgs& args);

struct IndexArgs {
  bool rebuild = false;
};
int cmd_index(const Common& common, const IndexArgs& args);

struct LocalizeArgs {
  std::vector<std::string> tests;
  std::string error;  // file or "-"
  std::string test_id;
  std::string time;
  std::string case_file, case_id;
  std::string junit;       // a JUnit XML report: every failed or erroring test in it is a query
  std::string root = ".";  // with --junit: the repository the report's test files are in
  // The commit the failures are at (`spark record`'s); "" = the work tree at `root` (HEAD and its uncommitted edits).
  std::string commit;
  std::string test_code;  // what is test code (`mine.test_code`): the verdict weighs what changed since a last pass
  // The localizer's and the LLM stage's settings, parsed once by localize_from_config (an unknown name is an error
  // naming where it was set); the policy's window and window fraction, and keep_prompt, come from flags.
  LocalizeOptions localize;
  LlmStageOptions stage;  // its template text and redactor are set where the stage is made
  std::string format = "text";
  std::string sarif_output;     // also write SARIF here (any --format)
  std::string markdown_output;  // also write the Markdown summary here (any --format)
  bool show_annotated = false;
  std::string color = "auto";
  // The LLM stage.
  std::string template_path;
  bool require_llm = false;
  std::optional<LlmOptions> llm;  // absent: no LLM configured (llm.base_url unset)
  double llm_deadline = defaults::kDeadline;  // seconds for all of the run's LLM requests; 0: none
  std::string explain;            // --explain LINE or PATH:LINE: every feature of that line
};

// The localize settings from the effective configuration (flags already applied to it).
Status localize_from_config(const Config& config, LocalizeArgs& args);
int cmd_localize(const Common& common, const LocalizeArgs& args);
// Localizes these failures and prints the report in args.format (`batch`: JSON is always an array).
int localize_queries(const Common& common, const LocalizeArgs& args, const std::vector<Case>& queries, bool batch);

struct EvalArgs {
  std::vector<std::string> corpora;
  std::vector<std::string> modes = {"builtin"};
  std::vector<size_t> ks = {1, 3, 5, 10};
  std::vector<std::string> levels = {"line"};
  std::vector<std::string> policies = {"all"};
  std::vector<double> epsilons = {defaults::kEpsilon};
  std::vector<size_t> rs = {defaults::kRetrieved};
  std::vector<std::string> compare;  // "A:B"
  double window_fraction = defaults::kWindowFraction;
  double similarity_floor = defaults::kSimilarityFloor;
  std::string format = "markdown";
  std::string output;
  std::string html;
  std::string cache;
  bool use_kb = false;       // --kb given: retrieve from that knowledge base instead of a temporary one
  std::string command_line;  // shown in the reports
  LocalizeArgs llm;          // LLM settings (from the configuration)
};
int cmd_eval(const Common& common, const EvalArgs& args);

// The miner and the CI lifecycle (cli/lifecycle.cpp).
struct HistoryArgs {
  std::string repo = ".";
  std::vector<std::string> repos;  // `spark mine`: --repo given several times
  bool all_parents = false;
  std::string since, until;  // ISO-8601
  double sigma = defaults::kSigma;
  std::string project;
  bool test_only_fixes = false;
  std::string test_code;  // `mine.test_code`: globs of test code ("" = the default rule)
};

struct MineArgs {
  HistoryArgs history;
  std::vector<std::string> outcomes;
  std::string commit;      // for JUnit reports not named <sha>.xml
  std::string output;      // also write this run's labelled cases here ("-" = standard output)
  std::string quarantine;  // also write this run's quarantined cases here
  // --run: find the fix by running the tests (no recorded outcomes).
  std::string run;  // "CMD {test_id}"
  std::vector<std::string> tests;
  std::string from;  // the failing commit
  std::string to = "HEAD";
  double timeout = 600;
  // --discover: every test-code fix of the history, found by running the candidates at each commit and its parent.
  bool discover = false;
  bool dry_run = false;           // list the candidates, run nothing
  unsigned jobs = 1;              // runs at once
  std::string shard;              // "I/N": this runner's part of the commits
  bool retry_unrunnable = false;  // run again what was stored as could-not-run
  size_t max_tests = 100;         // a commit reaching more tests is left out (0: no bound)
};
int cmd_mine(const Common& common, const MineArgs& args);

struct RecordArgs {
  HistoryArgs history;
  std::string junit;
  std::string commit;  // default HEAD
  bool localize = true;
  LocalizeArgs localize_args;
};
int cmd_record(const Common& common, const RecordArgs& args);

struct AuditArgs {
  std::string action = "list";  // list | show | accept | reject | trim | serve
  std::string id;
  std::vector<std::string> keep;  // trim: "12", "path:12", "12-14"
  std::string author;             // default: git config user
  std::string reason;
  bool all = false;             // list: decided ones too
  std::string format = "text";  // list: text | json
  std::string html;
  std::string repo = ".";  // for the author from git config
  double sigma = defaults::kSigma;
  std::string color = "auto";
  int port = 0;  // serve: 0 picks a free port
};
int cmd_audit(const Common& common, const AuditArgs& args);
// Who decides: `given`, else git config's user of `repo_path`, else $USER.
std::string author_or_default(const std::string& given, const std::string& repo_path);

// `spark failures` (cli/failures.cpp): the open failures, and closing those that will never be fixed.
struct FailuresArgs {
  std::string action = "list";  // list | show | dismiss | expire
  std::string id;               // a failure id (or a unique prefix), or a test id
  std::string format = "text";  // list, show: text | json
  std::string author;           // dismiss: who (default: git config user)
  std::string reason;           // dismiss: why
  std::string repo = ".";       // the repository: HEAD's test files and history
};
int cmd_failures(const Common& common, const FailuresArgs& args);
struct HooksArgs {
  std::string action;  // install | uninstall | post-commit
  std::string repo = ".";
  std::string test_command;  // post-commit: "CMD {junit} {tests}"
  double timeout = defaults::kHookTimeout;
  std::string spark_path;  // install: the spark binary the hook calls
  HistoryArgs history;
};
int cmd_hooks(const Common& common, const HooksArgs& args);

// Shared by the commands: "spark: error: …" (returns 1), "spark: …" on stderr, the knowledge base, and a result
// written atomically to a file or to standard output ("" or "-").
int report_error(const Error& e);
// A usage error (an argument missing, malformed or naming what does not exist): said as report_error says an error;
// returns 2, the exit code of a usage error.
int usage_error(const std::string& message);
int usage_error(const Error& e);
void note(const std::string& message);
Result<std::unique_ptr<KnowledgeBase>> open_kb(const Common& common, bool create);
// True when there may be a store to open: a server store, or a folder holding kb.sqlite.
bool kb_exists(const Common& common);
// The local folder of this store: the SQLite store's own folder, or local_dir for a server store.
std::string local_folder(const Common& common);

// When the ranker is due to learn again (`spark record` localizing nothing): learn_ranker_if_due (localizer/engine.h)
// on the store, its notes said; a failure is a note, the ranker staying as it was, and the command goes on.
void keep_ranker_learning(const Common& common);

// `spark kb init | status | copy`.
struct KbArgs {
  std::string action;    // init | status | copy
  std::string from, to;  // copy
};
int cmd_kb(const Common& common, const KbArgs& args);
int write_output(const std::string& path, const std::string& text);
// Writes `text` to standard output; false when any of it could not be written (a full disk, a file-size limit, a
// closed pipe), fwrite's short count and the stream's error flag both read: a large write bypasses the buffer, so
// fflush alone does not see its failure.
bool write_stdout(std::string_view text);

}  // namespace spark::cli
