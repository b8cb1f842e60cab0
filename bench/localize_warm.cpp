// Localizes each case of a corpus as a new failure in one process, against a knowledge base that `spark import` and
// `spark index` made (the index opened once): each localization's wall time, p50 and p95 (bench/peers.sh, beside
// its Python peer's `localizer_peer.py warm`). The localization is Localizer::localize (filter, search, retrieve,
// annotate, rank; no LLM), as `spark localize --case` runs it per case, without the command's triage and output: the
// engine opened as it opens it (open_or_build_engine), parsed test-file versions kept in KB_FOLDER/structures as it
// keeps them (a version an earlier process parsed is read, not parsed again; SPARK_BENCH_NO_STRUCTURES=1 parses
// every version in this process).
//
//   build/bench/spark_localize_warm KB_FOLDER QUERIES.jsonl          prints: "P50_MS P95_MS"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "localizer/index_lifecycle.h"
#include "localizer/localizer.h"

using namespace spark;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: spark_localize_warm KB_FOLDER QUERIES.jsonl\n");
    return 2;
  }
  auto kb = KnowledgeBase::open(argv[1], false);
  if (!kb) {
    std::fprintf(stderr, "%s\n", kb.error().message.c_str());
    return 1;
  }
  auto queries = read_cases_jsonl(argv[2]);
  if (!queries) {
    std::fprintf(stderr, "%s\n", queries.error().message.c_str());
    return 1;
  }
  std::vector<std::string> notes;
  auto engine = open_or_build_engine(**kb, {}, notes);
  if (!engine || !*engine) {
    std::fprintf(stderr, "%s\n", engine ? "the knowledge base holds no case" : engine.error().message.c_str());
    return 1;
  }
  // As `spark localize` keeps them: test-file versions parsed by an earlier process are read, not parsed again.
  if (!std::getenv("SPARK_BENCH_NO_STRUCTURES"))
    (*engine)->structures().persist_in(std::filesystem::path(argv[1]) / "structures");
  Localizer localizer(kb->get(), engine->get());
  std::vector<double> ms;
  for (Case& query : queries->cases) {
    query.faulty_lines.clear();
    const auto t = Clock::now();
    auto loc = localizer.localize(query, {});
    if (!loc) {
      std::fprintf(stderr, "%s: %s\n", query.id.c_str(), loc.error().message.c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  std::sort(ms.begin(), ms.end());
  const auto pct = [&](double p) { return ms[std::min(ms.size() - 1, static_cast<size_t>(p * static_cast<double>(ms.size())))]; };
  std::printf("%.1f %.1f\n", pct(0.50), pct(0.95));
  return 0;
}
