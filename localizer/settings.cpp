#include "localizer/settings.h"

#include <algorithm>

#include "base/files.h"
#include "localizer/policy.h"
#include "localizer/prompt.h"

namespace spark {

Status localize_settings(const Config& config, LocalizeSettings& args) {
  LocalizeOptions& lo = args.localize;
  lo.k = static_cast<size_t>(config.integer("localize.k"));
  lo.epsilon = config.number("localize.epsilon");
  lo.r = static_cast<size_t>(config.integer("localize.r"));
  lo.similarity_floor = config.number("localize.similarity_floor");
  args.test_code = config.str("mine.test_code");
  if (lo.k < 1) return fail(config.get("localize.k").source + ": localize.k must be at least 1");
  if (lo.r < 1) return fail(config.get("localize.r").source + ": localize.r must be at least 1");
  if (const std::string level = config.str("localize.level"); !parse_level(level, lo.level))
    return fail(config.get("localize.level").source + ": unknown level \"" + level + "\"");
  auto policy = parse_policy(config.str("localize.policy"));
  if (!policy) return fail(config.get("localize.policy").source + ": " + policy.error().message);
  policy->window_fraction = lo.policy.window_fraction;
  policy->window = lo.policy.window;
  lo.policy = *policy;
  auto mode = parse_mode(config.str("llm.mode"));
  if (!mode) return fail(config.get("llm.mode").source + ": " + mode.error().message);
  args.stage.mode = *mode;
  args.template_path = config.str("llm.template");
  args.require_llm = config.boolean("llm.require");
  args.llm_deadline = config.number("llm.deadline");
  if (args.llm_deadline < 0)
    return fail(config.get("llm.deadline").source + ": llm.deadline must be 0 (none) or more seconds");
  lo.seed = static_cast<uint64_t>(config.integer("llm.seed"));
  args.stage.tokens = {static_cast<size_t>(std::max(256LL, config.integer("llm.context_tokens"))),
                       static_cast<size_t>(std::max(1LL, config.integer("llm.max_tokens")))};
  const std::string scope = config.str("llm.prompt_scope");
  if (scope != "file" && scope != "test")
    return fail(config.get("llm.prompt_scope").source + ": llm.prompt_scope is file or test, not \"" + scope + "\"");
  args.stage.test_scope_only = scope == "test";
  if (!config.is_set("llm.base_url")) {
    args.llm.reset();
    return {};
  }
  LlmOptions o;
  o.base_url = config.str("llm.base_url");
  if (!o.base_url.starts_with("http://") && !o.base_url.starts_with("https://"))
    return fail(config.get("llm.base_url").source + ": llm.base_url must start with http:// or https://, not \"" +
                o.base_url + "\"");
  o.model = config.str("llm.model");
  if (o.model.empty())
    return fail("llm.base_url is set (" + config.get("llm.base_url").source +
                ") but no model: set SPARK_LLM_MODEL, --model or llm.model");
  o.api_key = config.str("llm.api_key");
  o.temperature = config.number("llm.temperature");
  o.max_tokens = static_cast<int>(config.integer("llm.max_tokens"));
  if (config.is_set("llm.seed")) o.seed = config.integer("llm.seed");
  o.structured = config.boolean("llm.structured");
  o.probe = config.boolean("llm.probe");
  o.concurrency = static_cast<size_t>(std::max(1LL, config.integer("llm.concurrency")));
  o.context_tokens = static_cast<size_t>(std::max(256LL, config.integer("llm.context_tokens")));
  o.http.connect_timeout_ms = static_cast<long>(config.number("llm.connect_timeout") * 1000);
  o.http.timeout_ms = static_cast<long>(config.number("llm.timeout") * 1000);
  o.retry.max_retries = static_cast<int>(config.integer("llm.retries"));
  o.retry.initial_delay_s = config.number("llm.retry_delay");
  if (o.max_tokens < 1) return fail(config.get("llm.max_tokens").source + ": llm.max_tokens must be at least 1");
  args.llm = o;
  return {};
}

Result<LlmStageOptions> stage_options(const LocalizeSettings& settings, std::shared_ptr<const Redactor> redactor) {
  LlmStageOptions stage = settings.stage;
  stage.redactor = std::move(redactor);
  if (!settings.template_path.empty()) {
    auto text = read_file(settings.template_path);
    TRY(text);
    TRY(check_template(*text, settings.template_path));
    stage.template_text = std::move(*text);
  }
  return stage;
}

LlmOptions with_run_deadline(LlmOptions options, double deadline) {
  if (deadline <= 0) return options;
  options.retry.deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(deadline));
  options.waiting_interval_s = std::min(10.0, std::max(0.2, deadline / 10));
  return options;
}

}  // namespace spark
