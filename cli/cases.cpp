// `spark import`, `spark export`, `spark index`: the knowledge base's labelled cases in and out, and their vector
// index.
#include <cstdio>

#include "base/clock.h"
#include "base/text.h"
#include "commands.h"
#include "index_lifecycle.h"
#include "flags.h"
#include "index_build.h"
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
  // Validate every file first: a bad file imports nothing, and neither does the command.
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(args.files, cases, origins); !s) return report_error(s.error());
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  auto summary = (*kb)->import_cases(cases, origins, args.replace);
  if (!summary) return report_error(summary.error());
  std::printf("imported %zu case(s) from %zu file(s) into %s: %zu new, %zu replaced, %zu unchanged\n", cases.size(),
              args.files.size(), (*kb)->name().c_str(), summary->added, summary->replaced, summary->unchanged);
  // Keep an existing index fresh: embed the new cases with its statistics.
  if (summary->replaced == 0 && summary->added > 0 && path_exists((*kb)->index_dir() / "manifest.json")) {
    std::vector<std::string> notes;
    auto caught_up = catch_up_index(**kb, common.embedder, notes);
    if (!caught_up) {
      note("the vector index was not updated: " + caught_up.error().message);
      return 0;
    }
    // The cases are committed: an index that could not be saved (a full disk) is caught up by the next command that
    // opens it, so the import has succeeded, and says so.
    if (caught_up->not_saved) {
      note("the " + std::to_string(summary->added) +
           " new case(s) are in the knowledge base; the vector index was not updated (" +
           caught_up->not_saved->message +
           "): the next `spark localize`, `spark record` or `spark index` catches it up");
      return 0;
    }
    for (const auto& n : notes) note(n);
    if (!caught_up->rebuilt)
      std::printf(
          "added %zu case(s) to the vector index (run `spark index --rebuild` now and then to refit its statistics)\n",
          caught_up->added);
    for (const auto& n : caught_up->learnt) note(n);
  } else if (summary->replaced > 0 && path_exists((*kb)->index_dir() / "manifest.json")) {
    note("cases were replaced: run `spark index --rebuild`");
  }
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
  std::map<std::string, size_t> counts;
  size_t redacted = 0, cases = 0;
  std::string out;
  auto s = (*kb)->for_each([&](int64_t, const Case& stored) -> Status {
    ++cases;
    if (redactor) {
      Case c = stored;
      redacted += redact_case(c, *redactor, counts);
      out += json_text(case_to_json(c));
    } else {
      out += json_text(case_to_json(stored));
    }
    out += '\n';
    if (args.output.empty() && out.size() > (1u << 20)) {
      if (!write_stdout(out)) return fail("cannot write to standard output");
      out.clear();
    }
    return {};
  });
  if (!s) return report_error(s.error());
  if (redactor) {
    std::string rules;
    for (const auto& [rule, n] : counts) rules += (rules.empty() ? "" : ", ") + rule + " " + std::to_string(n);
    note("redacted " + std::to_string(redacted) + " secret(s) in " + std::to_string(cases) + " case(s)" +
         (rules.empty() ? "" : " (" + rules + ")"));
  }
  if (args.output.empty()) return write_output("", out);
  if (auto w = write_file_atomic(args.output, out); !w) return report_error(w.error());
  return 0;
}

namespace {

void print_index_built(const IndexReport& report, double seconds) {
  std::printf("indexed %zu case(s) (%zu labelled) in %.2f s: %s index, embedder %s\n", report.cases, report.labelled,
              seconds, report.kind.c_str(), report.embedder.c_str());
  std::printf("ranker: %s\n", report.ranker.c_str());
  std::printf(
      "time: embedding %.2f s, index %.2f s, ranker %.2f s (%u thread(s); %zu test-code version(s), %zu distinct "
      "vector(s))\n",
      report.embed_seconds, report.index_seconds, report.train_seconds, report.threads, report.versions,
      report.vectors);
  if (report.recall_checked)
    std::printf(
        "hnsw check: the nearest case as similar as an exact search finds for %zu of %zu sampled case(s) (%.2f s)\n",
        report.recall_matched, report.recall_checked, report.recall_seconds);
}

}  // namespace

int cmd_index(const Common& common, const IndexArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  std::vector<std::string> notes;
  auto update = update_index(**kb, common.embedder, args.rebuild, notes);
  for (const auto& n : notes) note(n);
  if (!update) return report_error(update.error());
  switch (update->outcome) {
    case IndexUpdate::Outcome::up_to_date:
      std::printf(
          "the vector index in %s is up to date (%zu cases, %s; every file matches its checksum); use "
          "--rebuild to rebuild it\n",
          (*kb)->index_dir().c_str(), update->cases, update->kind.c_str());
      break;
    case IndexUpdate::Outcome::caught_up:
      std::printf(
          "added %zu case(s) to the vector index in %.2f s (%zu cases; the statistics are kept: "
          "`spark index --rebuild` refits them)\n",
          update->added, update->seconds, update->cases);
      for (const auto& n : update->learnt) note(n);
      break;
    case IndexUpdate::Outcome::built:
      print_index_built(update->report, update->seconds);
      break;
  }
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
