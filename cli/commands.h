// The `spark` subcommands, one file each (cli/NAME.cpp): each registers its flags with CLI11 and returns what it runs
// (flags.h's Command). main.cpp lists them. A command's body only parses, calls the libraries and prints; its
// exit code is 0 on success, 1 when the command failed (bad input, a damaged store), 2 on a usage error.
#pragma once

#include "cli/flags.h"

namespace spark::cli {

Command add_import(CLI::App& app);                                     // cases.cpp
Command add_export(CLI::App& app);                                     // cases.cpp
Command add_index(CLI::App& app, Flags& flags);                        // cases.cpp
Command add_localize(CLI::App& app, Flags& flags);                     // localize.cpp
Command add_config(CLI::App& app);                                     // config.cpp
Command add_trust(CLI::App& app);                                      // trust.cpp
Command add_mine(CLI::App& app, Flags& flags);                         // mine.cpp (with --discover)
Command add_record(CLI::App& app, Flags& flags);                       // record.cpp
Command add_audit(CLI::App& app, Flags& flags);                        // audit.cpp
Command add_failures(CLI::App& app);                                   // failures.cpp
Command add_kb(CLI::App& app);                                         // kb.cpp
Command add_hooks(CLI::App& app, Flags& flags);                        // hooks.cpp
Command add_eval(CLI::App& app, Flags& flags, int argc, char** argv);  // eval.cpp
Command add_mcp(CLI::App& app);                                        // mcp.cpp

}  // namespace spark::cli
