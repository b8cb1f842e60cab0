// The settings of a localization, read once from the effective configuration (src/formats/config.h): the localizer's
// (k, level, policy, r, ε, similarity floor), the LLM stage's (mode, prompt scope, token budget, template) and the LLM
// client's (server, model, timeouts, retries), with the run's deadline. A bad value is an error naming where it was set.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "formats/config.h"
#include "formats/defaults.h"
#include "llm/llm_client.h"
#include "localizer/llm_stage.h"
#include "localizer/localizer.h"

namespace spark {

struct LocalizeSettings {
  LocalizeOptions localize;  // the policy's window and window fraction are kept as they were (they come from flags)
  LlmStageOptions stage;     // its template text and redactor are set where the stage is made
  std::string template_path;
  bool require_llm = false;
  std::optional<LlmOptions> llm;              // absent: no LLM configured (llm.base_url unset)
  double llm_deadline = defaults::kDeadline;  // seconds for all of the run's LLM requests; 0: none
  std::string test_code;  // what is test code (`mine.test_code`): the verdict weighs what changed since a last pass
};

// Fills `settings` from `config` (flags already applied to it).
Status localize_settings(const Config& config, LocalizeSettings& settings);

// The LLM stage's options: the settings' with `redactor` (null: redaction off), and the template file read and
// checked (check_template).
Result<LlmStageOptions> stage_options(const LocalizeSettings& settings, std::shared_ptr<const Redactor> redactor);

// The client's options for one run: every request ends by `deadline` seconds from now (0: no deadline), and the
// client says it is waiting every 10 s, or every tenth of a shorter deadline.
LlmOptions with_run_deadline(LlmOptions options, double deadline);

}  // namespace spark
