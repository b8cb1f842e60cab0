// `spark trust`: which project configuration files are believed whole (formats/trust.h, docs/SECURITY.md).

#include <cstdio>
#include <filesystem>

#include "base/text.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "formats/trust.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

struct TrustArgs {
  std::string file;  // "" = the project's .spark.toml found from the working directory
  bool remove = false;
  bool list = false;
};

int cmd_trust(const TrustArgs& args) {
  if (args.list) return write_output("", terminal_lines(trusted_files_text()));
  std::error_code ec;
  std::optional<fs::path> file;
  if (!args.file.empty()) {
    if (!fs::is_regular_file(args.file, ec)) return usage_error(args.file + ": no such file");
    file = fs::absolute(args.file, ec);
  } else {
    file = Config::discover(fs::current_path(ec));
    if (!file) return usage_error("no .spark.toml here or above (up to the git work tree's top): name the file");
  }
  if (args.remove) {
    auto removed = untrust_file(*file);
    if (!removed) return report_error(removed.error());
    std::fprintf(
        stderr, "%s\n",
        terminal_lines("spark: " + file->string() + (*removed ? ": no longer trusted" : ": was not trusted")).c_str());
    return 0;
  }
  // What trusting it changes: the settings it holds that an untrusted repository file may not set so.
  auto untrusted = Config::load(std::vector<Config::File>{{*file, false}});
  if (!untrusted) return report_error(untrusted.error());
  if (auto s = trust_file(*file); !s) return report_error(s.error());
  std::fputs(terminal_lines(trusted_now_text(*file, *untrusted)).c_str(), stderr);
  return 0;
}

}  // namespace

Command add_trust(CLI::App& app) {
  auto args = std::make_shared<TrustArgs>();
  auto* sub =
      app.add_subcommand("trust",
                         "trust the project's .spark.toml as it is now: its settings that send data, hold keys, "
                         "run commands, write outside the repository or weaken a safety rule are then used "
                         "(docs/SECURITY.md)");
  sub->add_option("file", args->file, "the file (default: the .spark.toml spark finds here)");
  sub->add_flag("--remove", args->remove, "forget the file: untrusted again");
  sub->add_flag("--list", args->list, "list the trusted files and whether each is unchanged");
  return {sub, [args](Config&, Common&) { return cmd_trust(*args); }, /*needs_common=*/false};
}

}  // namespace spark::cli
