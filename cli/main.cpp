// spark: find the faulty lines in a failing test by reusing what earlier fixes taught (SPARK).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "commands.h"

namespace {

std::string env(const char* name, std::string fallback = {}) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spark::cli;
  CLI::App app{"spark — localize the faulty lines of a failing test from similar failures fixed before"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("spark ") + SPARK_VERSION);
  Common common;
  common.kb_dir = env("SPARK_KB", ".spark");
  common.embedder.openai.base_url = env("SPARK_EMBED_BASE_URL");
  common.embedder.openai.model = env("SPARK_EMBED_MODEL", "bge-m3");
  common.embedder.openai.api_key = env("SPARK_EMBED_API_KEY", env("OPENAI_API_KEY"));
  app.add_option("--kb", common.kb_dir, "knowledge base folder (env SPARK_KB; default .spark)");

  ImportArgs import_args;
  auto* import = app.add_subcommand("import", "import labelled cases (JSON Lines) into the knowledge base");
  import->add_option("files", import_args.files, "cases.jsonl files")->required()->check(CLI::ExistingFile);
  import->add_flag("--replace", import_args.replace, "overwrite stored cases whose id is imported with a different record");

  ExportArgs export_args;
  auto* exp = app.add_subcommand("export", "write every stored case as JSON Lines (lossless)");
  exp->add_option("-o,--output", export_args.output, "file to write atomically (default: standard output)");

  IndexArgs index_args;
  auto* index = app.add_subcommand("index", "embed the cases, build the vector index, learn the ranker");
  index->add_flag("--rebuild", index_args.rebuild, "rebuild from scratch even when the index is up to date");
  index->add_option("--embedder", common.embedder.kind, "builtin (default) or openai")
      ->check(CLI::IsMember({"builtin", "openai"}));
  index->add_option("--dimension", common.embedder.builtin.dimension, "built-in embedder dimension (default 1024)")
      ->check(CLI::Range(16, 65536));
  index->add_option("--embed-url", common.embedder.openai.base_url, "OpenAI-compatible base URL (env SPARK_EMBED_BASE_URL)");
  index->add_option("--embed-model", common.embedder.openai.model, "embedding model (env SPARK_EMBED_MODEL; default bge-m3)");

  LocalizeArgs loc;
  auto* localize = app.add_subcommand("localize", "rank the suspicious lines of a failing test");
  localize->add_option("--test", loc.tests, "the failing test's file(s); the first holds the test")->check(CLI::ExistingFile);
  localize->add_option("--error", loc.error, "file with the failure output (traceback + message), or - for stdin");
  localize->add_option("--test-id", loc.test_id, "pytest node id (default: from the traceback)");
  localize->add_option("--time", loc.time, "failure time, ISO-8601 (default: now)");
  localize->add_option("--case", loc.case_file, "take the query from this cases.jsonl (labels are ignored)")->check(CLI::ExistingFile);
  localize->add_option("--id", loc.case_id, "with --case: the case's id");
  localize->add_option("-k", loc.k, "how many elements to return (default 5)")->check(CLI::Range(1, 100000));
  localize->add_option("--level", loc.level, "line | statement | block | function")
      ->check(CLI::IsMember({"line", "statement", "block", "function"}));
  localize->add_option("--policy", loc.policy, "all | all-preceding | closest-by-time | closest-time-preceding");
  localize->add_option("--window-fraction", loc.window_fraction, "closest-* policies: share of the corpus (default 0.10)")
      ->check(CLI::Range(0.0, 1.0));
  localize->add_option("--window", loc.window, "closest-* policies: exact number of cases (overrides the fraction)");
  localize->add_option("-r", loc.r, "similar cases to retrieve (default 1)")->check(CLI::Range(1, 1000));
  localize->add_option("--epsilon", loc.epsilon, "annotation threshold, normalized Levenshtein (default 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  localize->add_option("--similarity-floor", loc.similarity_floor, "ignore retrieved cases below this cosine (default 0.10)");
  localize->add_option("--format", loc.format, "text | json | sarif | github")
      ->check(CLI::IsMember({"text", "json", "sarif", "github"}));
  localize->add_flag("--show-annotated", loc.show_annotated, "also print the annotated test code (text format)");
  localize->add_option("--color", loc.color, "auto | always | never")->check(CLI::IsMember({"auto", "always", "never"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (import->parsed()) return cmd_import(common, import_args);
  if (exp->parsed()) return cmd_export(common, export_args);
  if (index->parsed()) return cmd_index(common, index_args);
  if (localize->parsed()) return cmd_localize(common, loc);
  return 2;
}
