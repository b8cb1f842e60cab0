#include "localizer/eval/eval_setup.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "base/clock.h"
#include "base/files.h"
#include "base/progress.h"
#include "base/text.h"
#include "localizer/index_build.h"
#include "localizer/policy.h"
#include "localizer/prompt.h"

namespace spark {

Result<EvalOptions> eval_options(const EvalGrid& grid, uint64_t seed, std::vector<ModePair>& compare) {
  EvalOptions options;
  options.modes.clear();
  for (const auto& m : grid.modes) {
    auto mode = EvalMode::parse(m);
    if (!mode) return fail("--mode: " + mode.error().message);
    options.modes.push_back(*mode);
  }
  options.ks = grid.ks;
  std::sort(options.ks.begin(), options.ks.end());
  options.ks.erase(std::unique(options.ks.begin(), options.ks.end()), options.ks.end());
  options.levels.clear();
  for (const auto& l : grid.levels) {
    Level level;
    if (!parse_level(l, level)) return fail("--level: unknown level \"" + l + "\" (known: line, statement, block, function)");
    options.levels.push_back(level);
  }
  options.policies = grid.policies;
  for (const auto& p : options.policies) TRY(parse_policy(p));
  options.epsilons = grid.epsilons;
  options.rs = grid.rs;
  options.window_fraction = grid.window_fraction;
  options.similarity_floor = grid.similarity_floor;
  options.seed = seed;
  for (const auto& c : grid.compare) {
    const auto colon = c.find(':');
    if (colon == std::string::npos) return fail("--compare " + c + ": give two modes as A:B");
    auto a = EvalMode::parse(c.substr(0, colon));
    auto b = a ? EvalMode::parse(c.substr(colon + 1)) : a;
    if (!b) return fail("--compare " + c + ": " + b.error().message);
    compare.emplace_back(*a, *b);
  }
  return options;
}

Status prepare_eval_llm(const LocalizeSettings& settings, std::shared_ptr<const Redactor> redactor,
                        const std::string& cache_path, EvalOptions& options, EvalLlm& llm,
                        std::vector<std::string>& notes) {
  auto stage = stage_options(settings, std::move(redactor));
  TRY(stage);
  options.stage = std::move(*stage);
  if (std::none_of(options.modes.begin(), options.modes.end(), [](const EvalMode& m) { return m.needs_llm(); }))
    return {};
  if (!settings.llm)
    return fail(
        "the LLM modes need an LLM: set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL "
        "(or llm.base_url and llm.model in .spark.toml, or --llm-url and --model)");
  llm.client.emplace(*settings.llm);
  auto cache = AnswerCache::open(cache_path);
  TRY(cache);
  llm.cache = std::move(*cache);
  llm.client->set_cache(llm.cache.get());
  options.client = &*llm.client;
  notes.push_back("LLM answers are cached in " + cache_path +
                  " (a re-run or a resumed run asks only for what is missing)");
  return {};
}

Result<std::unique_ptr<KnowledgeBase>> corpus_knowledge_base(const std::filesystem::path& dir,
                                                             const std::vector<Case>& cases,
                                                             const std::vector<CaseOrigin>& origins,
                                                             const EmbedderConfig& embedder,
                                                             std::vector<std::string>& notes) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  auto kb = KnowledgeBase::open(dir, true);
  TRY(kb);
  TRY((*kb)->import_cases(cases, origins, false));
  notes.push_back("indexing " + std::to_string(cases.size()) + " case(s) into a temporary knowledge base");
  TRY(build_index(**kb, embedder, IndexBuildOptions{}));
  return kb;
}

Result<std::string> eval_html(const EvalReport& report, const Evaluation& evaluation, const std::vector<Case>& cases,
                              const Redactor* redactor, std::vector<std::string>& notes) {
  if (!redactor) return render_html(report, evaluation, cases);
  return render_html(report, evaluation, redacted_copies(cases, *redactor, redact_case, "the HTML report", notes));
}

std::function<void(const std::string&, size_t, size_t)> eval_progress() {
  const ProgressLine line;
  std::string current;
  auto started = std::chrono::steady_clock::now();
  size_t last_tenth = 0;
  return [=](const std::string& label, size_t done, size_t total) mutable {
    if (label != current) {
      current = label;
      started = std::chrono::steady_clock::now();
      last_tenth = 0;
    }
    const std::string eta = duration_text(eta_seconds(seconds_since(started), done, total));
    const size_t tenth = total ? done * 10 / total : 10;
    if (line.terminal()) {
      std::string bar(20, ' ');
      for (size_t i = 0; i < 20 * done / std::max<size_t>(1, total); ++i) bar[i] = '=';
      line.show("spark eval: " + label + " [" + bar + "] " + std::to_string(done) + "/" + std::to_string(total) +
                    " ETA " + eta,
                done == total);
    } else if (tenth > last_tenth || done == total) {
      last_tenth = tenth;
      line.show("spark eval: " + label + " " + std::to_string(done) + "/" + std::to_string(total) + " ETA " + eta,
                true);
    }
  };
}

}  // namespace spark
