// `spark import`, `spark export`, `spark index`: the knowledge base's labelled cases in and out, and their vector
// index.
#include <cstdio>

#include "base/huge_pages.h"
#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "localizer/index_lifecycle.h"
#include "store/knowledge_base.h"

namespace spark::cli {

namespace {

struct ImportArgs {
  std::vector<std::string> files;
  bool replace = false;
};

struct ExportArgs {
  std::string output;   // "" = standard output
  bool redact = false;  // redact error messages, file contents and meta (not lossless then)
};

struct IndexArgs {
  bool rebuild = false;
};

int cmd_import(const Common& common, const ImportArgs& args) {
  // Streamed, in one transaction: a bad line anywhere imports nothing, and neither does the command.
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  auto summary = (*kb)->import_stream(
      [&](const KnowledgeBase::CaseSink& take) { return stream_corpora(args.files, take); }, args.replace);
  if (!summary) return report_error(summary.error());
  const size_t cases = summary->added + summary->replaced + summary->unchanged;
  std::printf("imported %zu case(s) from %zu file(s) into %s: %zu new, %zu replaced, %zu unchanged\n", cases,
              args.files.size(), (*kb)->name().c_str(), summary->added, summary->replaced, summary->unchanged);
  // Keep an existing index fresh: embed the new cases with its statistics.
  std::vector<std::string> notes;
  const std::string out = index_after_import(**kb, common.embedder, *summary, notes);
  if (!write_stdout(out)) return report_error(Error{"cannot write to standard output"});
  for (const auto& n : notes) note(n);
  return 0;
}

int cmd_export(const Common& common, const ExportArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  // --redact asks for redaction, so it applies the configured rules even where redaction is off for the LLM.
  std::shared_ptr<const Redactor> redactor;
  if (args.redact) {
    redactor = common.redactor;
    if (!redactor) {
      auto r = Redactor::make(common.redaction_rules);
      if (!r) return report_error(r.error());
      redactor = std::make_shared<const Redactor>(std::move(*r));
    }
  }
  std::string file;  // -o: written at once, atomically
  auto done = export_cases(**kb, redactor.get(), [&](const std::string& text) -> Status {
    if (!args.output.empty())
      file += text;
    else if (!write_stdout(text))
      return fail("cannot write to standard output");
    return {};
  });
  if (!done) return report_error(done.error());
  if (redactor) {
    std::string rules;
    for (const auto& [rule, n] : done->by_rule) rules += (rules.empty() ? "" : ", ") + rule + " " + std::to_string(n);
    note("redacted " + std::to_string(done->redacted) + " secret(s) in " + std::to_string(done->cases) + " case(s)" +
         (rules.empty() ? "" : " (" + rules + ")"));
  }
  if (args.output.empty()) return 0;
  if (auto w = write_file_atomic(args.output, file); !w) return report_error(w.error());
  return 0;
}

int cmd_index(const Common& common, const IndexArgs& args) {
  keep_freed_memory();  // the embedding and the ranker's views free and take blocks of test files (base/huge_pages.h)
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  std::vector<std::string> notes;
  auto update = update_index(**kb, common.embedder, args.rebuild, notes);
  for (const auto& n : notes) note(n);
  if (!update) return report_error(update.error());
  if (!write_stdout(index_update_text(*update, (*kb)->index_dir())))
    return report_error(Error{"cannot write to standard output"});
  for (const auto& n : update->learnt) note(n);
  return 0;
}

}  // namespace

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

}  // namespace spark::cli
