#include "cli/flags.h"

namespace spark::cli {

void add_llm_flags(CLI::App* sub, Flags& flags) {
  flags.bind(sub, "--llm-url", "llm.base_url");
  flags.bind(sub, "--model", "llm.model");
  flags.bind(sub, "--template", "llm.template");
  flags.bind(sub, "--prompt-scope", "llm.prompt_scope")->check(CLI::IsMember({"file", "test"}));
  flags.bind(sub, "--max-tokens", "llm.max_tokens")->check(CLI::Range(1, 1000000));
  flags.bind(sub, "--seed", "llm.seed");
  flags.bind(sub, "--concurrency", "llm.concurrency")->check(CLI::Range(1, 256));
  flags.bind(sub, "--context-tokens", "llm.context_tokens")->check(CLI::Range(256, 10000000));
  flags.bind(sub, "--timeout", "llm.timeout")->check(CLI::Range(0.1, 86400.0));
  flags.bind(sub, "--retries", "llm.retries")->check(CLI::Range(0, 100));
  flags.bind(sub, "--retry-delay", "llm.retry_delay")->check(CLI::Range(0.0, 600.0));
  flags.bind(sub, "--deadline", "llm.deadline")->check(CLI::Range(0.0, 1e9));
  flags.bind_switch(sub, "--structured", "llm.structured", "true",
                    "ask for a JSON answer (response_format json_schema; the default)");
  flags.bind_switch(sub, "--no-structured", "llm.structured", "false",
                    "ask for a free-text answer, as the paper does (not response_format json_schema)");
  flags.bind_switch(sub, "--no-probe", "llm.probe", "false",
                    "do not ask the server its context and token counts (GET /props, POST /tokenize)");
}
}  // namespace spark::cli
