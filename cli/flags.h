// Parsing the command line (CLI11): flags bound to configuration keys, a subcommand once registered, and the flags
// several subcommands share. Each subcommand's file registers its own (add_localize, add_record, …: commands.h).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli/common.h"
#include "code/code_structure.h"
#include "formats/config.h"
#include "localizer/prompt.h"

namespace spark::cli {

// The flags that set configuration keys, across all subcommands.
class Flags {
 public:
  // An option whose value sets `key`. Its help is the settings table's (config.h's option_help): `prose`, else the
  // key's own help, then the key's default and environment variables.
  CLI::Option* bind(CLI::App* sub, const std::string& names, const std::string& key, const std::string& prose = "") {
    std::string* slot = &text_[key + "@" + sub->get_name() + "@" + names];
    CLI::Option* o = sub->add_option(names, *slot, option_help(key, prose));
    bindings_.push_back({o, key, slot, {}});
    return o;
  }
  // A switch that sets `key` to `value` when given.
  CLI::Option* bind_switch(CLI::App* sub, const std::string& names, const std::string& key, const std::string& value,
                           const std::string& help) {
    CLI::Option* o = sub->add_flag(names, help);
    bindings_.push_back({o, key, nullptr, value});
    return o;
  }
  // Sets every key whose flag was given; an error names the flag.
  Status apply(Config& config) const {
    for (const auto& b : bindings_)
      if (b.option->count() > 0)
        if (auto s = config.set(b.key, b.text ? *b.text : b.fixed, "flag " + b.option->get_name()); !s) return s;
    return {};
  }

 private:
  struct Binding {
    CLI::Option* option;
    std::string key;
    std::string* text;  // the option's value; null for a switch
    std::string fixed;  // a switch's value
  };
  std::map<std::string, std::string> text_;  // stable addresses for the options' values
  std::vector<Binding> bindings_;
};

// A subcommand once registered: what it runs with the complete configuration and the settings every command shares.
struct Command {
  CLI::App* app = nullptr;
  std::function<int(Config&, Common&)> run;
  bool needs_common = true;  // false: runs on the configuration alone (`spark config`)
};

// The names `--mode`, `--format` and `--level` take.
inline const std::vector<std::string> kModes = mode_names();
inline const std::vector<std::string> kFormats = {"text", "json", "sarif", "github", "markdown"};
inline const std::vector<std::string> kLevels = level_names();

// The LLM settings `spark localize`, `record` and `eval` share.
void add_llm_flags(CLI::App* sub, Flags& flags);

}  // namespace spark::cli
