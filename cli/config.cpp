// `spark config`: the effective configuration, secrets hidden; with --markdown, the table of every setting instead
// (settings_markdown, docs/SETTINGS.md).
#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"

namespace spark::cli {

namespace {

int cmd_config(const Config& config, bool markdown) {
  if (markdown) return write_output("", settings_markdown());
  const std::string out = terminal_lines(config.describe());  // values from a .spark.toml the repository holds
  return write_output("", out);
}

}  // namespace

Command add_config(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("config", "print the effective configuration (secrets hidden)");
  sub->add_flag("--markdown", *markdown,
                "print the table of every setting instead (key, type, default, environment, help), as Markdown: "
                "docs/SETTINGS.md holds it");
  return {sub, [markdown](Config& config, Common&) { return cmd_config(config, *markdown); },
          /*needs_common=*/false};
}

}  // namespace spark::cli
