// The spool of `spark record` with a server store: a report whose outcomes could not be stored (the server down or
// unreachable) is kept as an outcomes file (the corpus format's JSON Lines) in LOCAL_DIR/spool/, written atomically;
// the next `spark record` that reaches the server stores it with its own outcomes and then removes it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "miner.h"

namespace spark::cli {

std::filesystem::path spool_dir(const std::string& local_dir);
// The spooled reports, oldest first.
std::vector<std::filesystem::path> spool_files(const std::string& local_dir);
// Writes `outcomes` as a new spool file; its path.
Result<std::filesystem::path> spool_outcomes(const std::string& local_dir,
                                             const std::vector<RecordedOutcome>& outcomes);

}  // namespace spark::cli
