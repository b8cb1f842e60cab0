// `spark eval`: leave-one-out evaluation on labelled corpora (localizer/eval/): the paper's metrics and tables.
#include <unistd.h>

#include <cstdio>

#include "base/clock.h"
#include "base/text.h"
#include "commands.h"
#include "eval/eval_report.h"
#include "eval/evaluation.h"
#include "flags.h"
#include "llm/answer_cache.h"
#include "index_build.h"
#include "settings.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

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
  LocalizeSettings llm;      // the LLM settings (from the configuration)
};

}  // namespace


namespace {

// The settings of the evaluation from the command line; 0, or the exit code of a usage error (said on stderr).
int eval_settings(const EvalArgs& args, EvalOptions& options, std::vector<std::pair<EvalMode, EvalMode>>& compare) {
  options.modes.clear();
  for (const auto& m : args.modes) {
    auto mode = EvalMode::parse(m);
    if (!mode) return usage_error("--mode: " + mode.error().message);
    options.modes.push_back(*mode);
  }
  options.ks = args.ks;
  std::sort(options.ks.begin(), options.ks.end());
  options.ks.erase(std::unique(options.ks.begin(), options.ks.end()), options.ks.end());
  options.levels.clear();
  for (const auto& l : args.levels) {
    Level level;
    if (!parse_level(l, level))
      return usage_error("--level: unknown level \"" + l + "\" (known: line, statement, block, function)");
    options.levels.push_back(level);
  }
  options.policies = args.policies;
  for (const auto& p : options.policies)
    if (auto ok = parse_policy(p); !ok) return report_error(ok.error());
  options.epsilons = args.epsilons;
  options.rs = args.rs;
  options.window_fraction = args.window_fraction;
  options.similarity_floor = args.similarity_floor;
  options.seed = args.llm.localize.seed;
  for (const auto& c : args.compare) {
    const auto colon = c.find(':');
    if (colon == std::string::npos) return usage_error("--compare " + c + ": give two modes as A:B");
    auto a = EvalMode::parse(c.substr(0, colon));
    auto b = a ? EvalMode::parse(c.substr(colon + 1)) : a;
    if (!b) return usage_error("--compare " + c + ": " + b.error().message);
    compare.push_back({*a, *b});
  }

  return 0;
}

// The LLM stage of the evaluation: a client with the answer cache when a mode needs one, the prompt settings.
Status eval_llm(const Common& common, const EvalArgs& args, EvalOptions& options, std::optional<LlmClient>& client,
                std::unique_ptr<AnswerCache>& cache) {
  bool needs_llm = false;
  for (const EvalMode& m : options.modes) needs_llm = needs_llm || m.needs_llm();
  if (needs_llm) {
    if (!args.llm.llm)
      return fail(
          "the LLM modes need an LLM: set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL "
          "(or llm.base_url and llm.model in .spark.toml, or --llm-url and --model)");
    client.emplace(*args.llm.llm);
    const std::string cache_path =
        args.cache.empty() ? (fs::path(local_folder(common)) / "llm-answers.sqlite").string() : args.cache;
    auto c = AnswerCache::open(cache_path);
    TRY(c);
    cache = std::move(*c);
    client->set_cache(cache.get());
    options.client = &*client;
    note("LLM answers are cached in " + cache_path + " (a re-run or a resumed run asks only for what is missing)");
  }
  options.stage.redactor = common.redactor;
  options.stage.tokens = args.llm.stage.tokens;
  options.stage.test_scope_only = args.llm.stage.test_scope_only;
  if (!args.llm.template_path.empty()) {
    auto t = read_file(args.llm.template_path);
    TRY(t);
    if (auto s = check_template(*t, args.llm.template_path); !s) return s;
    options.stage.template_text = std::move(*t);
  }

  return {};
}

// The knowledge base the evaluation retrieves from: the one given with --kb, or a temporary one of the corpora with
// its index (its folder in `temp`, which the caller removes).
Result<std::unique_ptr<KnowledgeBase>> eval_knowledge_base(const Common& common, const EvalArgs& args,
                                                           const std::vector<Case>& cases,
                                                           const std::vector<CaseOrigin>& origins, fs::path& temp) {
  std::unique_ptr<KnowledgeBase> kb;
  if (args.use_kb) {
    auto opened = open_kb(common, false);
    TRY(opened);
    return std::move(*opened);
  }
  temp = temp_folder() / ("spark-eval-" + std::to_string(::getpid()));
  std::error_code ignored;
  fs::remove_all(temp, ignored);
  auto opened = KnowledgeBase::open(temp, true);
  TRY(opened);
  kb = std::move(*opened);
  TRY(kb->import_cases(cases, origins, false));
  note("indexing " + std::to_string(cases.size()) + " case(s) into a temporary knowledge base");
  TRY(build_index(*kb, common.embedder, IndexBuildOptions{}));
  return kb;
}

// Progress on stderr: a bar on a terminal, a line per tenth otherwise (CI logs).
std::function<void(const std::string&, size_t, size_t)> eval_progress() {
  const bool tty = ::isatty(STDERR_FILENO);
  std::string current;
  auto started = std::chrono::steady_clock::now();
  size_t last_tenth = 0;
  return [=](const std::string& label, size_t done, size_t total) mutable {
    if (label != current) {
      if (tty && !current.empty()) std::fprintf(stderr, "\n");
      current = label;
      started = std::chrono::steady_clock::now();
      last_tenth = 0;
    }
    const double elapsed = seconds_since(started);
    const double eta = done ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    const size_t tenth = total ? done * 10 / total : 10;
    if (tty) {
      std::string bar(20, ' ');
      for (size_t i = 0; i < 20 * done / std::max<size_t>(1, total); ++i) bar[i] = '=';
      std::fprintf(stderr, "\rspark eval: %s [%s] %zu/%zu ETA %s   ", label.c_str(), bar.c_str(), done, total,
                   duration_text(eta).c_str());
      if (done == total) std::fprintf(stderr, "\n");
    } else if (tenth > last_tenth || done == total) {
      last_tenth = tenth;
      std::fprintf(stderr, "spark eval: %s %zu/%zu ETA %s\n", label.c_str(), done, total, duration_text(eta).c_str());
    }
  };
}

// The HTML report (--html). It shows the cases' code and is meant to be shared: made from redacted copies unless
// redaction is off.
Status write_eval_html(const Common& common, const EvalArgs& args, const EvalReport& report,
                       const Evaluation& evaluation, const std::vector<Case>& cases) {
  std::vector<Case> shown;
  if (common.redactor) {
    shown = cases;
    std::map<std::string, size_t> counts;
    size_t n = 0;
    for (auto& c : shown) n += redact_case(c, *common.redactor, counts);
    if (n) note("redacted " + std::to_string(n) + " secret(s) from the HTML report");
  }
  auto page = render_html(report, evaluation, common.redactor ? shown : cases);
  TRY(page);
  if (auto w = write_file_atomic(args.html, *page); !w) return w;
  note("wrote " + args.html);
  return {};
}

}  // namespace

namespace {

int cmd_eval(const Common& common, const EvalArgs& args) {
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(args.corpora, cases, origins); !s) return report_error(s.error());
  // Ids must be unique across the corpora: they name the cases in the reports.
  std::set<std::string> ids;
  for (size_t i = 0; i < cases.size(); ++i)
    if (!ids.insert(cases[i].id).second)
      return report_error(Error{origins[i].where + ": case id \"" + cases[i].id + "\" appears twice"});

  EvalOptions options;
  std::vector<std::pair<EvalMode, EvalMode>> compare;
  if (int code = eval_settings(args, options, compare); code != 0) return code;
  std::optional<LlmClient> client;
  std::unique_ptr<AnswerCache> cache;
  if (auto s = eval_llm(common, args, options, client, cache); !s) return report_error(s.error());

  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup;
  auto kb = eval_knowledge_base(common, args, cases, origins, cleanup.dir);
  if (!kb) return report_error(kb.error());
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, common.embedder, notes);
  if (!engine) return report_error(engine.error());
  for (const auto& n : notes) note(n);

  options.progress = eval_progress();
  auto evaluation = run_evaluation(**kb, **engine, cases, options);
  if (!evaluation) return report_error(evaluation.error());
  if (cache)
    note("LLM answer cache: " + std::to_string(cache->hits()) + " answer(s) reused, " +
         std::to_string(cache->stores()) + " new");
  EvalReport report = make_report(*evaluation, cases, compare);
  report.command = args.command_line;
  const std::string out = args.format == "json"  ? render_json(report, *evaluation)
                          : args.format == "csv" ? render_csv(report)
                                                 : render_markdown(report);
  if (!args.html.empty())
    if (auto s = write_eval_html(common, args, report, *evaluation, cases); !s) return report_error(s.error());
  note("evaluated " + std::to_string(evaluation->cases.size()) + " labelled case(s) in " +
       duration_text(evaluation->seconds) + " (" +
       std::to_string(static_cast<int>(static_cast<double>(evaluation->cases.size() * evaluation->runs.size()) /
                                       std::max(1e-9, evaluation->seconds))) +
       " case-settings/s)");
  // Markdown and CSV on the terminal hold the corpus's project names: printed as every untrusted text is.
  const bool terminal = args.format != "json" && (args.output.empty() || args.output == "-");
  return write_output(args.output, terminal ? terminal_lines(out) : out);
}

}  // namespace

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
            if (auto s = localize_settings(config, args->llm); !s) return usage_error(s.error());
            args->use_kb = !config.get("kb").source.starts_with("default");
            args->command_line = command_line;
            return cmd_eval(common, *args);
          }};
}

}  // namespace spark::cli
