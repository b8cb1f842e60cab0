// The `spark` subcommands: thin bodies over the libraries. Each returns the process exit code and prints errors as
// "spark: error: …" (0 = success, 1 = the command failed: bad input, a damaged store; 2 = usage).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "llm_client.h"
#include "localizer.h"

namespace spark::cli {

struct Common {
  std::string kb_dir = ".spark";
  EmbedderConfig embedder;
  std::shared_ptr<const Redactor> redactor;  // null when redaction is off (--no-redact, redact.enabled = false)
};

// Fills Common from the effective configuration (the OpenAI embedder gets the redactor).
Status common_from_config(const Config& config, Common& common);

// `spark config`: the effective configuration, secrets hidden.
int cmd_config(const Config& config);

struct ImportArgs {
  std::vector<std::string> files;
  bool replace = false;
};
int cmd_import(const Common& common, const ImportArgs& args);

struct ExportArgs {
  std::string output;  // "" = standard output
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
  std::string junit;        // a JUnit XML report: every failed or erroring test in it is a query
  std::string root = ".";   // with --junit: the repository the report's test files are in
  std::string policy = "all";
  double window_fraction = 0.10;
  size_t window = 0;
  size_t r = 1;
  double epsilon = 0.05;
  size_t k = 5;
  std::string level = "line";
  std::string format = "text";
  double similarity_floor = 0.10;
  bool show_annotated = false;
  std::string color = "auto";
  // The LLM stage.
  std::string mode = "default";
  std::string template_path;
  bool show_prompt = false;
  bool require_llm = false;
  std::optional<LlmOptions> llm;  // absent: no LLM configured (llm.base_url unset)
  uint64_t seed = 0;              // random mode's draw
  size_t context_tokens = 32768;  // prompt bounds, also without an LLM (--show-prompt)
  size_t answer_tokens = 512;
  bool test_scope_only = false;
};

// The localize settings from the effective configuration (flags already applied to it).
Status localize_from_config(const Config& config, LocalizeArgs& args);
int cmd_localize(const Common& common, const LocalizeArgs& args);

struct EvalArgs {
  std::vector<std::string> corpora;
  std::vector<std::string> modes = {"builtin"};
  std::vector<size_t> ks = {1, 3, 5, 10};
  std::vector<std::string> levels = {"line"};
  std::vector<std::string> policies = {"all"};
  std::vector<double> epsilons = {0.05};
  std::vector<size_t> rs = {1};
  std::vector<std::string> compare;  // "A:B"
  double window_fraction = 0.10;
  double similarity_floor = 0.10;
  std::string format = "markdown";
  std::string output;
  std::string html;
  std::string cache;
  bool use_kb = false;               // --kb given: retrieve from that knowledge base instead of a temporary one
  std::string command_line;          // shown in the reports
  LocalizeArgs llm;                  // LLM settings (from the configuration)
};
int cmd_eval(const Common& common, const EvalArgs& args);

struct MineArgs {
  std::string repo = ".";
  std::vector<std::string> outcomes;
  std::string commit;        // for JUnit reports not named <sha>.xml
  bool all_parents = false;
  std::string since, until;  // ISO-8601
  double sigma = 3.0;
  std::string project;
  std::string output;        // cases.jsonl ("" = standard output)
  std::string quarantine;    // quarantined cases ("" = not written, only counted)
};
int cmd_mine(const MineArgs& args);

// Reads a test file for a query: valid UTF-8 text; a binary file or invalid bytes are errors naming file and line.
Result<std::string> read_test_file(const std::string& path);

}  // namespace spark::cli
