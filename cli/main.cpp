// spark: find the faulty lines in a failing test by reusing what earlier fixes taught (SPARK).
//
// main parses the command line with CLI11: each subcommand's file (commands.h) adds its flags and returns what it
// runs. Flags that name a configuration key are bound through `Flags`, so they win over the environment and the
// configuration file (src/formats/config.h); the command runs once the configuration is complete.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>

#include "base/text.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/flags.h"
#include "code/levenshtein.h"
#include "formats/trust.h"

namespace {

using namespace spark::cli;
using spark::Config;

// The global options: -C (the folder to run in), --config (read here) and the store (--kb, --local-dir).
void add_global(CLI::App& app, Flags& flags, std::string& config_path, std::string& run_in) {
  app.add_option("-C", run_in,
                 "run as if spark was started in this folder, as git -C does (for agents and editors that start "
                 "`spark mcp` elsewhere)");
  app.add_option("--config", config_path, "configuration file (default: .spark.toml here or above, up to the git top)");
  flags.bind(&app, "--kb", "kb");
  flags.bind(&app, "--local-dir", "local_dir");
}

// The configuration: the file given or found, the environment, then the flags given.
spark::Result<Config> load_config(const std::string& config_path, const Flags& flags, int& exit_code) {
  std::optional<std::filesystem::path> file;
  std::error_code ec;
  const auto here = std::filesystem::current_path(ec);
  if (ec) {
    exit_code = 1;
    return spark::fail("the current folder cannot be read: " + ec.message());
  }
  if (!config_path.empty()) {
    if (!std::filesystem::is_regular_file(config_path, ec)) {
      exit_code = 2;
      return spark::fail("--config " + config_path + ": no such file");
    }
    file = config_path;
  } else {
    file = Config::discover(here);
  }
  auto config = Config::load(spark::config_layers(file, !config_path.empty()));
  if (!config) {
    exit_code = 1;
    return config;
  }
  if (auto s = flags.apply(*config); !s) {
    exit_code = 2;
    return std::unexpected(s.error());
  }
  config->place_folders(here);
  config->bind_keys();
  return config;
}

// For each option the command line gave that its command does not have, the one it most likely meant: a known
// option's name is a prefix of it ("--junitxml" → "--junit", pytest's own flag given to spark) or a few edits away.
// One line per unknown option that has such a neighbour, "did you mean --junit?".
std::string option_hints(const CLI::App& app) {
  std::vector<std::string> known;
  const auto add_options = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      for (const auto& name : o->get_lnames()) known.push_back("--" + name);
  };
  add_options(app);
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    add_options(*sub);
  }
  std::string out;
  for (std::string given : app.remaining(true)) {
    given = given.substr(0, given.find('='));
    if (!given.starts_with("--") || given.size() < 4) continue;
    if (const std::string best = spark::closest_name(given, known); !best.empty() && best != given)
      out += "spark: error: unknown option " + given + ": did you mean " + best + "?\n";
  }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"spark — localize the faulty lines of a failing test from similar failures fixed before"};
  app.require_subcommand(1);
  app.fallthrough();  // global options (--kb, --config) also after the subcommand
  app.set_version_flag("--version", std::string("spark ") + SPARK_VERSION);
  Flags flags;
  std::string config_path, run_in;
  add_global(app, flags, config_path, run_in);
  const std::vector<Command> commands = {
      add_import(app),
      add_export(app),
      add_index(app, flags),
      add_localize(app, flags),
      add_config(app),
      add_trust(app),
      add_mine(app, flags),
      add_record(app, flags),
      add_audit(app, flags),
      add_failures(app),
      add_kb(app),
      add_hooks(app, flags),
      add_eval(app, flags, argc, argv),
      add_mcp(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // An unknown option is an extra, or the reason a required one seems missing (`record --junitxml r.xml`).
    if (dynamic_cast<const CLI::ExtrasError*>(&e) || dynamic_cast<const CLI::RequiredError*>(&e))
      std::fputs(option_hints(app).c_str(), stderr);
    return code == 0 ? 0 : 2;
  }
  if (!run_in.empty()) {
    std::error_code ec;
    std::filesystem::current_path(run_in, ec);
    if (ec) {
      report_error(spark::Error{"-C " + run_in + ": " + ec.message()});
      return 2;
    }
  }
  int exit_code = 1;
  auto config = load_config(config_path, flags, exit_code);
  if (!config) {
    report_error(config.error());
    return exit_code;
  }
  for (const auto& command : commands) {
    if (!command.app->parsed()) continue;
    // What the configuration did not use, in one line (`spark trust` says it its own way).
    if (const std::string warning = config->trust_warning(); !warning.empty() && command.app->get_name() != "trust")
      std::fprintf(stderr, "%s\n", spark::terminal_lines(warning).c_str());
    Common common;
    if (command.needs_common)
      if (auto s = common_from_config(*config, common); !s) {
        return report_error(s.error());
      }
    return command.run(*config, common);
  }
  return 2;
}

}  // namespace

// Every failure spark knows of is a returned error; this is the last guard for the ones it does not (an exception from
// a library, an allocation that fails): a line naming it and exit 1, never std::terminate's abort.
int main(int argc, char** argv) {
  // A file-size limit (RLIMIT_FSIZE) must end in a clear error, not a kill: with SIGXFSZ ignored the write fails with
  // EFBIG, which SQLite and write_file_atomic report like a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "spark: error: out of memory\n");
  } catch (const std::exception& e) {
    spark::cli::report_error(spark::Error{e.what()});
  } catch (...) {
    std::fprintf(stderr, "spark: error: an unknown exception\n");
  }
  return 1;
}
