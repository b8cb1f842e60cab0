// `spark eval`'s set-up from what its command line asked: the grid of settings by name checked and parsed, the LLM the
// LLM modes ask (with its answer cache), the knowledge base it retrieves from, and the HTML report from redacted
// copies. Plain inputs, notes returned; nothing is printed.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llm/answer_cache.h"
#include "llm/llm_client.h"
#include "localizer/case_embedding.h"
#include "localizer/eval/eval_report.h"
#include "localizer/eval/evaluation.h"
#include "localizer/settings.h"
#include "store/knowledge_base.h"

namespace spark {

// The grid as the command line gives it: names and numbers, checked by eval_options.
struct EvalGrid {
  std::vector<std::string> modes = {"builtin"};
  std::vector<size_t> ks = {1, 3, 5, 10};
  std::vector<std::string> levels = {"line"};
  std::vector<std::string> policies = {"all"};
  std::vector<double> epsilons = {defaults::kEpsilon};
  std::vector<size_t> rs = {defaults::kRetrieved};
  std::vector<std::string> compare;  // "A:B"
  double window_fraction = defaults::kWindowFraction;
  double similarity_floor = defaults::kSimilarityFloor;
};

using ModePair = std::pair<EvalMode, EvalMode>;

// The evaluation's options for `grid` (its k values sorted and unique), and in `compare` the pairs --compare names; an
// error names the flag and the value.
Result<EvalOptions> eval_options(const EvalGrid& grid, uint64_t seed, std::vector<ModePair>& compare);

// The LLM the LLM modes ask and the cache its answers are kept in; both empty when no mode needs one. It must
// outlive the run: the options point at its client.
struct EvalLlm {
  std::optional<LlmClient> client;
  std::unique_ptr<AnswerCache> cache;
};

// Sets `options`' LLM stage from `settings` (stage_options: the template read and checked, the redactor) and, when a
// mode needs an LLM, opens `llm`'s client with its answer cache at `cache_path`; without a configured LLM that is an
// error saying how to configure one.
Status prepare_eval_llm(const LocalizeSettings& settings, std::shared_ptr<const Redactor> redactor,
                        const std::string& cache_path, EvalOptions& options, EvalLlm& llm,
                        std::vector<std::string>& notes);

// A knowledge base of `cases` in the folder `dir` (emptied first), with its vector index: what an evaluation of
// corpora retrieves from. The caller removes the folder.
Result<std::unique_ptr<KnowledgeBase>> corpus_knowledge_base(const std::filesystem::path& dir,
                                                             const std::vector<Case>& cases,
                                                             const std::vector<CaseOrigin>& origins,
                                                             const EmbedderConfig& embedder,
                                                             std::vector<std::string>& notes);

// The HTML report (render_html). It shows the cases' code and is meant to be shared: made from redacted copies
// unless `redactor` is null (redaction off).
Result<std::string> eval_html(const EvalReport& report, const Evaluation& evaluation, const std::vector<Case>& cases,
                              const Redactor* redactor, std::vector<std::string>& notes);

// The evaluation's progress on stderr (EvalOptions::progress, base/progress.h): a bar per setting on a terminal, a
// line per tenth of it otherwise (CI logs).
std::function<void(const std::string&, size_t, size_t)> eval_progress();

}  // namespace spark
