// The LLM stage of SPARK: L = LLM(τ', k). For each failure the localizer retrieves and annotates (per the mode),
// the prompt is built from the mode's template, the model answers, and its ids become the ranking. Ids the answer
// lacks are filled from the built-in ranker (marked "filled"); when the model cannot be reached or its answer is
// unusable, the built-in ranker's answer stands and the report says why.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/defaults.h"
#include "llm/llm_client.h"
#include "localizer/answer.h"
#include "localizer/localizer.h"
#include "localizer/prompt.h"

namespace spark {

struct LlmStageOptions {
  Mode mode = Mode::default_mode;
  std::string template_text;                 // a user's template (--template); "" = the mode's built-in one
  bool keep_prompt = false;                  // put the prompt into the report (--show-prompt)
  std::shared_ptr<const Redactor> redactor;  // null = --no-redact
  TokenBudget tokens;            // the prompt's bounds when no client gives them (--show-prompt, measurement)
  bool test_scope_only = false;  // show only the failing test's reach (--prompt-scope test)
  // The built-in ranker per query (evaluation: one that never saw the query's labels); unset = the index's.
  std::function<const RankerModel*(const Case&)> ranker_for;
};

// Ranked elements from a parsed answer: the model's ids in its order (mapped to units above line level), then the
// built-in ranking `builtin` (longer than k) for the rest, up to k.
std::vector<RankedElement> merge_answer(const Case& query, const Prompt& prompt, const ParsedAnswer& answer,
                                        const std::vector<RankedElement>& builtin, Level level, size_t k,
                                        StructureCache& cache);

class LlmStage {
 public:
  // `client` null: no LLM configured — the built-in ranker answers (prompts are still built for --show-prompt).
  LlmStage(Localizer& localizer, StructureCache& cache, LlmClient* client, LlmStageOptions options)
      : localizer_(localizer), cache_(cache), client_(client), options_(std::move(options)) {}

  // Localizes every query; the model is asked for all of them at once (the client's concurrency), results in
  // input order. An error is per query (bad input); a model failure is not an error (see LlmReport::error).
  std::vector<Result<Localization>> run(const std::vector<Case>& queries, LocalizeOptions options,
                                        const std::function<void(size_t, size_t)>& progress = {});

 private:
  // The run's prompt options: the client's window and answer (lowered to the server's own context where it says
  // it, ServerFacts), the token scale for the model's family (src/code/tokens.h).
  PromptOptions prompt_options(size_t k);
  // The mode's prompt for one localized failure (naive RAG: with its most similar case loaded whole).
  Result<Prompt> build_prompt_for(const Case& query, const Localization& loc, PromptOptions& popts);
  // build_prompt_for, then, where the server counts tokens, counted; while it does not fit, built again with the
  // scale the count gave (kept in `popts` for the next failures), at most three times. `counted`: the server's count
  // is the prompt's estimated_tokens.
  Result<Prompt> fitted_prompt(const Case& query, const Localization& loc, PromptOptions& popts, bool& counted);
  // One failure's prompt as sent: the budget it was cut to, where its window came from, whether it was counted.
  struct Sent {
    Prompt prompt;
    TokenBudget budget;
    std::string context_source;
    bool counted = false;
    size_t request = static_cast<size_t>(-1);  // its index in the answers; -1: not asked
  };
  // The prompts the server refused as longer than its context, cut to the window and count its refusal gave, and
  // asked once more; answers[sent[i].request] is replaced by the new answer (or the reason there is none).
  void retry_overflows(const std::vector<Case>& queries, const std::vector<Result<Localization>>& results,
                       std::vector<Sent>& sent, std::vector<Result<ChatAnswer>>& answers, const PromptOptions& popts);
  // The model's answer read and merged into `loc` (the ranking, notes, ranker) and its report `r`.
  void use_answer(const Case& query, const Prompt& p, const ChatAnswer& a, Level level, size_t k, Localization& loc,
                  LlmReport& r);

  Localizer& localizer_;
  StructureCache& cache_;
  LlmClient* client_;
  LlmStageOptions options_;
  std::string context_source_ = "llm.context_tokens";  // where the run's window came from
};

}  // namespace spark
