// `spark eval`: leave-one-out evaluation on labelled corpora (localizer/eval/): the paper's metrics and tables.
#include <unistd.h>

#include <set>

#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "localizer/eval/eval_setup.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

struct EvalArgs {
  std::vector<std::string> corpora;
  EvalGrid grid;
  std::string format = "markdown";
  std::string output;
  std::string html;
  std::string cache;
  bool use_kb = false;       // --kb given: retrieve from that knowledge base instead of a temporary one
  std::string command_line;  // shown in the reports
  LocalizeSettings llm;      // the LLM settings (from the configuration)
};

// Removes the temporary knowledge base's folder however the command ends.
struct RemovedAtEnd {
  fs::path dir;
  ~RemovedAtEnd() {
    std::error_code ignored;
    if (!dir.empty()) fs::remove_all(dir, ignored);
  }
};

int cmd_eval(const Common& common, const EvalArgs& args) {
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(args.corpora, cases, origins); !s) return report_error(s.error());
  // Ids must be unique across the corpora: they name the cases in the reports.
  std::set<std::string> ids;
  for (size_t i = 0; i < cases.size(); ++i)
    if (!ids.insert(cases[i].id).second)
      return report_error(Error{origins[i].where + ": case id \"" + cases[i].id + "\" appears twice"});

  std::vector<ModePair> compare;
  auto options = eval_options(args.grid, args.llm.localize.seed, compare);
  if (!options) return usage_error(options.error());
  std::vector<std::string> notes;
  EvalLlm llm;
  const std::string cache_path =
      args.cache.empty() ? (fs::path(local_folder(common)) / "llm-answers.sqlite").string() : args.cache;
  const Status prepared = prepare_eval_llm(args.llm, common.redactor, cache_path, *options, llm, notes);
  for (const auto& n : std::exchange(notes, {})) note(n);
  if (!prepared) return report_error(prepared.error());

  RemovedAtEnd temporary;
  auto kb = args.use_kb ? open_kb(common, false) : Result<std::unique_ptr<KnowledgeBase>>(nullptr);
  if (kb && !args.use_kb) {
    temporary.dir = temp_folder() / ("spark-eval-" + std::to_string(::getpid()));
    kb = corpus_knowledge_base(temporary.dir, cases, origins, common.embedder, notes);
  }
  if (!kb) return report_error(kb.error());
  auto engine = SearchEngine::open(**kb, common.embedder, notes);
  for (const auto& n : std::exchange(notes, {})) note(n);
  if (!engine) return report_error(engine.error());

  options->progress = eval_progress();
  auto evaluation = run_evaluation(**kb, **engine, cases, *options);
  if (!evaluation) return report_error(evaluation.error());
  if (llm.cache)
    note("LLM answer cache: " + std::to_string(llm.cache->hits()) + " answer(s) reused, " +
         std::to_string(llm.cache->stores()) + " new");
  EvalReport report = make_report(*evaluation, cases, compare);
  report.command = args.command_line;
  const std::string out = args.format == "json"  ? render_json(report, *evaluation)
                          : args.format == "csv" ? render_csv(report)
                                                 : render_markdown(report);
  if (!args.html.empty()) {
    auto page = eval_html(report, *evaluation, cases, common.redactor.get(), notes);
    for (const auto& n : std::exchange(notes, {})) note(n);
    if (!page) return report_error(page.error());
    if (auto w = write_file_atomic(args.html, *page); !w) return report_error(w.error());
    note("wrote " + args.html);
  }
  const size_t runs = evaluation->cases.size() * evaluation->runs.size();
  note("evaluated " + std::to_string(evaluation->cases.size()) + " labelled case(s) in " +
       duration_text(evaluation->seconds) + " (" +
       std::to_string(static_cast<int>(static_cast<double>(runs) / std::max(1e-9, evaluation->seconds))) +
       " case-settings/s)");
  // Markdown and CSV on the terminal hold the corpus's project names: printed as every untrusted text is.
  const bool terminal = args.format != "json" && (args.output.empty() || args.output == "-");
  return write_output(args.output, terminal ? terminal_lines(out) : out);
}

}  // namespace

Command add_eval(CLI::App& app, Flags& flags, int argc, char** argv) {
  auto args = std::make_shared<EvalArgs>();
  EvalArgs& ev = *args;
  EvalGrid& grid = ev.grid;
  auto* sub =
      app.add_subcommand("eval", "leave-one-out evaluation on labelled corpora: the paper's metrics and tables");
  sub->add_option("corpora", ev.corpora, "labelled cases.jsonl files")->required()->check(CLI::ExistingFile);
  sub->add_option("--mode", grid.modes,
                  "modes, comma-separated: builtin, traceback, annotation, baseline, default, random, "
                  "annotation-free, directive, naive-rag, hybrid (default builtin)")
      ->delimiter(',');
  sub->add_option("-k,--k", grid.ks, "k values, comma-separated (default 1,3,5,10)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  sub->add_option("--level", grid.levels, "levels, comma-separated: line, statement, block, function (default line)")
      ->delimiter(',')
      ->check(CLI::IsMember(kLevels));
  sub->add_option("--policy", grid.policies, "policies, comma-separated (default all)")->delimiter(',');
  sub->add_option(
         "--epsilon", grid.epsilons,
         "annotation thresholds, comma-separated (default " + spark::defaults::text(spark::defaults::kEpsilon) + ")")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("-r", grid.rs,
                  "retrieved cases, comma-separated (default " + std::to_string(spark::defaults::kRetrieved) + ")")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  sub->add_option("--compare", grid.compare, "pairs to test, A:B (repeatable; default: every mode against the first)");
  sub->add_option("--window-fraction", grid.window_fraction,
                  "closest-* policies: share of the labelled cases (default " +
                      spark::defaults::text(spark::defaults::kWindowFraction) + ")")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--similarity-floor", grid.similarity_floor,
                  "ignore retrieved cases below this cosine (default " +
                      spark::defaults::text(spark::defaults::kSimilarityFloor) + ")");
  sub->add_option("--format", ev.format, "markdown | csv | json")->check(CLI::IsMember({"markdown", "csv", "json"}));
  sub->add_option("-o,--output", ev.output, "write the report here (atomically) instead of standard output");
  sub->add_option("--html", ev.html, "also write a self-contained HTML report with plots and a per-case drill-down");
  sub->add_option("--cache", ev.cache, "LLM answer cache (default: <kb>/llm-answers.sqlite)");
  add_llm_flags(sub, flags);
  flags.bind_switch(sub, "--no-redact", "redact.enabled", "false", "send text as it is");

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(i == 0 ? "spark" : argv[i]);
  return {sub, [args, command_line](Config& config, Common& common) {
            if (auto s = localize_settings(config, args->llm); !s) return usage_error(s.error());
            args->use_kb = !config.get("kb").source.starts_with("default");
            args->command_line = command_line;
            return cmd_eval(common, *args);
          }};
}

}  // namespace spark::cli
