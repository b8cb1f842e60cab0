#include "localizer/store_status.h"

#include <set>

#include "base/files.h"
#include "localizer/index_lifecycle.h"
#include "miner/mining_store.h"
#include "miner/recording.h"
#include "store/row_count.h"

namespace spark {

Result<std::string> store_status_text(KnowledgeBase& kb, const std::string& chosen_by,
                                      const std::string& local_folder) {
  std::string out = "store: " + kb.name() + " (" + (kb.engine() == Engine::sqlite ? "SQLite" : "PostgreSQL") + ")\n";
  if (!chosen_by.empty()) out += "chosen by: " + chosen_by + "\n";
  out += "schema version: " + std::to_string(kSchemaVersion) + "\n";
  for (const std::string table : {"cases", "blobs", "outcomes", "failures"}) {
    auto n = count_rows(kb.database(), table);
    TRY(n);
    out += (table == "blobs" ? "file versions" : table) + ": " + std::to_string(*n) + "\n";
  }
  auto open = MiningStore(kb).failures({FailureStatus::open});
  TRY(open);
  std::set<std::string> tests;
  for (const auto& f : *open) tests.insert(f.test_id);
  out += "open failures: " + std::to_string(open->size()) + " (in " + std::to_string(tests.size()) +
         " test(s); `spark failures list`)\n";
  auto generation = kb.generation();
  TRY(generation);
  out += "generation: " + std::to_string(*generation) + "\n";
  out += "local index: " + kb.index_dir().string() +
         (path_exists(kb.index_dir() / "manifest.json") ? "" : " (not built)") + "\n";
  if (const std::string ranker = ranker_status(kb); !ranker.empty()) out += "ranker: " + ranker + "\n";
  if (const auto spooled = spool_files(local_folder); !spooled.empty())
    out += "spool: " + std::to_string(spooled.size()) + " report(s) waiting in " + spool_dir(local_folder).string() +
           "\n";
  return out;
}

}  // namespace spark
