#include "kb_spool.h"

#include <unistd.h>

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "base/text.h"

namespace spark::cli {

namespace fs = std::filesystem;

fs::path spool_dir(const std::string& local_dir) { return fs::path(local_dir) / "spool"; }

std::vector<fs::path> spool_files(const std::string& local_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spool_dir(local_dir), ec))
    if (e.path().extension() == ".jsonl") out.push_back(e.path());
  std::sort(out.begin(), out.end());  // names start with the time
  return out;
}

Result<fs::path> spool_outcomes(const std::string& local_dir, const std::vector<RecordedOutcome>& outcomes) {
  std::string text;
  for (const auto& o : outcomes) {
    nlohmann::json j = {{"commit", o.commit}, {"test_id", o.test_id}, {"outcome", outcome_name(o.outcome)}};
    if (o.time) j["time"] = format_iso8601(*o.time);
    if (!o.message.empty()) j["message"] = o.message;
    text += json_text(j) + "\n";
  }
  const fs::path dir = spool_dir(local_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  std::random_device rd;
  char name[96];
  std::snprintf(name, sizeof name, "%lld-%d-%08x.jsonl", static_cast<long long>(now_epoch()),
                static_cast<int>(::getpid()), rd());
  const fs::path path = dir / name;
  TRY(write_file_atomic(path, text));
  return path;
}

}  // namespace spark::cli
