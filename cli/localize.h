// `spark localize`, and the localization run `spark record` shares: its settings from the configuration, the failures
// as queries (localizer/queries.h), the run, the triage and the report.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "formats/config.h"
#include "formats/defaults.h"
#include "llm/llm_client.h"
#include "localizer/llm_stage.h"
#include "localizer/localizer.h"
#include "localizer/settings.h"
#include "localizer/verify.h"

namespace spark::cli {

// `spark localize`'s arguments: the failure (or failures) to localize and how to show them, with the settings from the
// configuration (LocalizeSettings; the policy's window and window fraction, and keep_prompt, come from flags).
struct LocalizeArgs : LocalizeSettings {
  std::vector<std::string> tests;
  std::string error;  // file or "-"
  std::string test_id;
  std::string time;
  std::string case_file, case_id;
  std::string junit;       // a JUnit XML report: every failed or erroring test in it is a query
  // With --junit: the repository the report's test files are in ("": not given; default_junit_root decides).
  std::string root;
  // The commit the failures are at (`spark record`'s); "" = the work tree at `root` (HEAD and its uncommitted edits).
  std::string commit;
  // --since COMMIT: the tests last passed there; what changed since is ranking evidence (miner/change_since.h).
  std::string since;
  std::string format = "text";
  std::string sarif_output;     // also write SARIF here (any --format)
  std::string markdown_output;  // also write the Markdown summary here (any --format)
  bool show_annotated = false;
  std::string color = "auto";
  std::string explain;  // --explain LINE or PATH:LINE: every feature of that line
  // --verify CMD and its bounds: each suggested edit tried in a scratch work tree (localizer/verify.h); the command
  // empty: not asked for.
  VerifyOptions verify;
};

// --verify, --verify-timeout and --verify-budget (and, `with_jobs`, -j) into `verify`: for `spark localize`,
// `spark record` and `spark mcp`.
void add_verify_flags(CLI::App* sub, VerifyOptions& verify, bool with_jobs);

// Localizes these failures and prints the report in args.format (`batch`: JSON is always an array).
int localize_queries(const Common& common, const LocalizeArgs& args, std::vector<Case>& queries, bool batch);

}  // namespace spark::cli
