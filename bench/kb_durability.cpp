// What the store's durability costs (issue 40, item 6): SQLite's synchronous=FULL, spark's setting (a commit returns
// once its WAL frames are on the disk, so a power cut loses no command that said it stored something), against
// NORMAL, the setting before (the WAL is synced only at checkpoints, so a power cut may lose the commits since the
// last one), measured in the same run, the two settings alternating round by round.
//
//   build/bench/spark_kb_durability [CASES] [ROUNDS] [FOLDER]
//
// Each round, on each setting, in a new store in FOLDER (default the system's temporary folder; it must be on the
// disk to measure, not a tmpfs, where a sync costs nothing):
//   - one import of CASES cases in one transaction (`spark import`, `spark record`'s sync: one commit per command);
//   - CASES imports of one case each (`spark mine`, which commits each labelled failure with its case).
// Prints the median seconds of each (min–max over ROUNDS) and the ratio FULL / NORMAL of the medians.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "store/knowledge_base.h"

using namespace spark;
namespace fs = std::filesystem;

namespace {

// Case i of the run: a small test file of its own (so every case writes a blob, as a new failure does).
Case bench_case(size_t i) {
  const std::string n = std::to_string(i);
  Case c;
  c.id = "durability-" + n;
  c.project = "bench/durability";
  c.test_id = "tests/test_d.py::test_" + n;
  c.language = "python";
  c.failure_epoch = 1767225600 + static_cast<int64_t>(i);
  c.failure_time = "2026-01-01T00:00:00Z";
  c.error_message = "E   assert " + n + " == " + std::to_string(i + 1);
  std::string code = "import pytest\n\n\ndef test_" + n + "():\n";
  for (int line = 0; line < 30; ++line)
    code += "    v" + std::to_string(line) + " = compute(" + std::to_string(i * 31 + line) + ")\n";
  code += "    assert v0 == " + std::to_string(i + 1) + "\n";
  c.files.push_back({"tests/test_d.py", code});
  c.faulty_lines.push_back({"tests/test_d.py", 35});
  c.source = "seeded";
  return c;
}

struct Timing {
  double one_transaction = 0, each_its_own = 0;
};

Result<Timing> run(const fs::path& dir, const std::string& synchronous, size_t cases, size_t round) {
  fs::remove_all(dir);
  auto kb = KnowledgeBase::open(dir, true);
  if (!kb) return std::unexpected(kb.error());
  // A per-connection setting: the store opens FULL; the baseline sets NORMAL on its connection.
  if (auto s = (*kb)->database().exec("PRAGMA synchronous=" + synchronous); !s) return std::unexpected(s.error());
  const size_t base = round * 4 * cases;
  std::vector<Case> batch;
  for (size_t i = 0; i < cases; ++i) batch.push_back(bench_case(base + i));
  Timing t;
  auto t0 = std::chrono::steady_clock::now();
  if (auto s = (*kb)->import_cases(batch, {}, false); !s) return std::unexpected(s.error());
  t.one_transaction = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < cases; ++i)
    if (auto s = (*kb)->import_cases({bench_case(base + cases + i)}, {}, false); !s) return std::unexpected(s.error());
  t.each_its_own = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kb->reset();
  fs::remove_all(dir);
  return t;
}

std::string summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  char text[96];
  std::snprintf(text, sizeof text, "%.3f (%.3f–%.3f)", v[v.size() / 2], v.front(), v.back());
  return text;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t cases = argc > 1 ? std::max<size_t>(1, std::stoul(argv[1])) : 200;
  const size_t rounds = argc > 2 ? std::max<size_t>(1, std::stoul(argv[2])) : 5;
  const fs::path folder = argc > 3 ? fs::path(argv[3]) : fs::temp_directory_path();
  const fs::path dir = folder / ("spark-durability-" + std::to_string(::getpid()));
  std::vector<double> full_one, full_each, normal_one, normal_each;
  for (size_t r = 0; r < rounds; ++r) {
    // Alternating which setting goes first, so a drift of the machine's speed touches both alike.
    const std::vector<std::string> order = r % 2 == 0 ? std::vector<std::string>{"FULL", "NORMAL"}
                                                        : std::vector<std::string>{"NORMAL", "FULL"};
    for (const std::string& setting : order) {
      auto t = run(dir, setting, cases, r);
      if (!t) {
        std::fprintf(stderr, "spark_kb_durability: %s\n", t.error().message.c_str());
        return 1;
      }
      (setting == "FULL" ? full_one : normal_one).push_back(t->one_transaction);
      (setting == "FULL" ? full_each : normal_each).push_back(t->each_its_own);
    }
  }
  std::printf("| %zu cases, %zu rounds, in %s | FULL s, median (min–max) | NORMAL s | FULL / NORMAL |\n|---|---|---|---|\n",
              cases, rounds, folder.c_str());
  std::printf("| one transaction (import, record) | %s | %s | %.2f |\n", summary(full_one).c_str(),
              summary(normal_one).c_str(), median(full_one) / median(normal_one));
  std::printf("| a transaction per case (mine) | %s | %s | %.2f |\n", summary(full_each).c_str(),
              summary(normal_each).c_str(), median(full_each) / median(normal_each));
  std::printf("| per commit, ms (a transaction per case) | %.2f | %.2f | |\n",
              median(full_each) * 1000.0 / static_cast<double>(cases),
              median(normal_each) * 1000.0 / static_cast<double>(cases));
  return 0;
}
