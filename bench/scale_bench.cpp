// Knowledge bases of N cases grown from a corpus by perturbing copies; measures import + index throughput, localize
// latency (p50/p95, in process, no LLM), the index's cold load, and peak memory (RSS). One size per process, so the
// peak RSS is that size's: bench/scale.sh runs 1k, 10k and 100k.
//
//   build/bench/spark_scale N QUERIES NEW_VERSION_SHARE ../shared/data/dev/*/cases.jsonl
//
// Perturbation of copy j of case i: numbers in the error message changed at random (30 % of them), the failure time
// moved by j minutes, and with probability NEW_VERSION_SHARE (e.g. 0.2) one non-blank line of the test file gets a
// trailing comment: a new version of the file, which spark must parse. With 0.2, one case in five brings a new file
// version, as when many failures share a test-file version; with 0, only messages and times differ.
//
// Last, `spark localize` (build/spark, beside bench/) runs as a new process for up to 20 new failures, twice: first
// with no parsed structures kept, then again; beside them, `spark --version` as many times (the floor: a process
// that loads spark and does nothing). SPARK_SCALE_KEEP=1 keeps the store (its path is printed) for profiling;
// SPARK_SCALE_STOP=import ends after the import; SPARK_SCALE_EF_CONSTRUCTION and SPARK_SCALE_HNSW_M build the graph
// with another efConstruction or M (the defaults: VectorIndexOptions); SPARK_SCALE_HOLDOUT=CASES.jsonl takes the queries
// from a corpus left out of the knowledge base (below); SPARK_SCALE_UNLABELLED=SHARE (e.g. 0.02) stores that share of
// the cases without faulty lines, as recorded failures not fixed yet (a policy then keeps most cases, not all: the
// restricted search).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/text.h"
#include "grown_corpus.h"
#include "localizer/index_build.h"
#include "localizer/localizer.h"
#include "process.h"

using namespace spark;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double new_version_share = 0.2;

// Runs a command in cwd with its output to /dev/null; its exit status. (Its peak RSS is not measured here: Linux
// carries a process's maximum RSS across exec, so a spawned child reports this process's; use /usr/bin/time.)
int run_quiet(const std::vector<std::string>& args, const fs::path& cwd) {
  const pid_t pid = bench::spawn(args, cwd, cwd / "last.err");
  return pid < 0 ? 127 : bench::wait_for(pid);
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: spark_scale N QUERIES NEW_VERSION_SHARE CASES.jsonl...\n");
    return 2;
  }
  const size_t n = std::stoul(argv[1]);
  const size_t queries = std::stoul(argv[2]);
  new_version_share = std::stod(argv[3]);
  std::vector<Case> corpus;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora({argv + 4, argv + argc}, corpus, origins); !s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    return 1;
  }
  // SPARK_SCALE_HOLDOUT=CASES.jsonl: the queries are failures of that corpus (perturbed as above), none of whose
  // cases is in the knowledge base: a project the index has never seen, where similarities are flat and HNSW's walk
  // is hardest (leave-one-project-out). Pass the other projects' corpora as CASES.jsonl.
  std::vector<Case> held;
  if (const char* holdout = std::getenv("SPARK_SCALE_HOLDOUT"); holdout && *holdout) {
    std::vector<CaseOrigin> held_origins;
    if (auto s = read_corpora({holdout}, held, held_origins); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      return 1;
    }
  }
  const std::vector<Case>& query_pool = held.empty() ? corpus : held;
  std::mt19937 rng(42);
  const fs::path dir = fs::temp_directory_path() / ("spark-scale-" + std::to_string(::getpid()));
  fs::remove_all(dir);

  auto kb = KnowledgeBase::open(dir, true);
  if (!kb) return 1;
  // Generated and imported in batches of 1,000 (one transaction each), as a stream of `spark import` calls would:
  // only one batch is in memory at a time, so the peak RSS is spark's, not the generator's. The import time is
  // spark's alone (the generation of each batch is not counted).
  double import_s = 0, generate_s = 0;
  double unlabelled_share = 0;
  if (const char* u = std::getenv("SPARK_SCALE_UNLABELLED"); u && *u) unlabelled_share = std::stod(u);
  std::mt19937 unlabelled_rng(7);  // its own stream: the perturbations are those of a run without it
  size_t unlabelled = 0;
  for (size_t start = 0; start < n; start += 1000) {
    const auto g = Clock::now();
    std::vector<Case> batch;
    for (size_t j = start; j < std::min(n, start + 1000); ++j) {
      batch.push_back(j < corpus.size() ? corpus[j] : bench::perturb(corpus[j % corpus.size()], j, rng, new_version_share));
      if (unlabelled_share > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(unlabelled_rng) < unlabelled_share) {
        batch.back().faulty_lines.clear();
        ++unlabelled;
      }
    }
    generate_s += since(g);
    const auto t = Clock::now();
    if (auto s = (*kb)->import_cases(batch, {}, false); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      return 1;
    }
    import_s += since(t);
  }
  // SPARK_SCALE_STOP=import ends here (for profiling the import alone).
  if (const char* stop = std::getenv("SPARK_SCALE_STOP"); stop && std::string_view(stop) == "import") {
    std::printf("import of %zu cases: %.2f s (generation %.2f s apart)\n", n, import_s, generate_s);
    fs::remove_all(dir);
    return 0;
  }
  IndexBuildOptions build_options;
  if (const char* efc = std::getenv("SPARK_SCALE_EF_CONSTRUCTION")) build_options.index.ef_construction = std::atoi(efc);
  if (const char* m = std::getenv("SPARK_SCALE_HNSW_M")) build_options.index.hnsw_m = std::atoi(m);
  auto t = Clock::now();
  auto report = build_index(**kb, {}, build_options);
  if (!report) {
    std::fprintf(stderr, "%s\n", report.error().message.c_str());
    return 1;
  }
  const double index_s = since(t);

  t = Clock::now();
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, {}, notes);
  if (!engine) {
    std::fprintf(stderr, "%s\n", engine.error().message.c_str());
    return 1;
  }
  const double load_s = since(t);
  Localizer localizer(kb->get(), engine->get());
  std::vector<double> ms;
  size_t recall_hits = 0, recall_same_similarity = 0;
  std::vector<std::vector<float>> query_vectors;
  for (size_t q = 0; q < queries; ++q) {
    Case query = bench::perturb(query_pool[rng() % query_pool.size()], n + q, rng, new_version_share);
    query.faulty_lines.clear();
    const auto q0 = Clock::now();
    auto loc = localizer.localize(query, {});
    if (!loc) {
      std::fprintf(stderr, "%s\n", loc.error().message.c_str());
      return 1;
    }
    ms.push_back(since(q0) * 1000.0);
    // HNSW's top-1 against the exact top-1 over all vectors (1.0 for a flat index by construction).
    auto v = (*engine)->embed(query);
    if (v) query_vectors.push_back(*v);
    if (v) {
      const auto approx = (*engine)->index().search(v->data(), 1, std::nullopt, {});
      const auto exact = (*engine)->index().search_exact(v->data(), 1);
      recall_hits += !approx.empty() && !exact.empty() && approx[0].rowid == exact[0].rowid;
      // Perturbed copies can be exact duplicates in vector space: a different id at the same similarity is a tie.
      recall_same_similarity += !approx.empty() && !exact.empty() && approx[0].similarity >= exact[0].similarity - 1e-5f;
    }
  }
  std::sort(ms.begin(), ms.end());
  const auto pct = [&](double p) { return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(p * static_cast<double>(ms.size())))]; };
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("| %7zu | %4.2f | %7.1f | %7.1f | %9.0f | %5s | %6.2f | %7.1f | %7.1f | %7.0f |\n", n, new_version_share, import_s, index_s,
              static_cast<double>(n) / (import_s + index_s), report->kind.c_str(), load_s, pct(0.50), pct(0.95),
              static_cast<double>(ru.ru_maxrss) / 1024.0);
  std::error_code ec;
  const auto store_bytes = fs::file_size((*kb)->db_path(), ec);
  uint64_t index_bytes = 0;
  for (const auto& e : fs::directory_iterator((*kb)->index_dir(), ec)) index_bytes += e.is_regular_file() ? e.file_size() : 0;
  std::fprintf(stderr, "  n=%zu: generating the cases took %.1f s (not in the import column)\n", n, generate_s);
  if (unlabelled > 0)
    std::fprintf(stderr, "  n=%zu: %zu cases stored without faulty lines (SPARK_SCALE_UNLABELLED)\n", n, unlabelled);
  std::fprintf(stderr, "  n=%zu: store %.1f KB/case, index %.1f KB/case; %zu distinct vectors, %zu versions, %u threads\n", n,
               static_cast<double>(store_bytes) / 1024.0 / static_cast<double>(n),
               static_cast<double>(index_bytes) / 1024.0 / static_cast<double>(n), report->vectors, report->versions,
               report->threads);
  std::fprintf(stderr, "  n=%zu: embedding %.1f s, vector index %.1f s, ranker %.1f s (%s); top-1 vs exact: same case %.3f, same similarity %.3f\n",
               n, report->embed_seconds, report->index_seconds, report->train_seconds, report->ranker.c_str(),
               queries ? static_cast<double>(recall_hits) / static_cast<double>(queries) : 1.0,
               queries ? static_cast<double>(recall_same_similarity) / static_cast<double>(queries) : 1.0);
  std::fflush(stdout);
  // The HNSW trade-off on the same queries: top-1 as similar as the exact top-1, and vector-search time alone.
  if ((*engine)->index().is_hnsw()) {
    std::vector<float> exact_best;
    exact_best.reserve(query_vectors.size());
    for (const auto& v : query_vectors) exact_best.push_back((*engine)->index().search_exact(v.data(), 1)[0].similarity);
    {
      std::vector<float> sorted = exact_best;
      std::sort(sorted.begin(), sorted.end());
      const float bound = (*engine)->index().exact_below();
      const auto below = std::lower_bound(sorted.begin(), sorted.end(), bound) - sorted.begin();
      std::fprintf(stderr, "  exact top-1 similarity: p5 %.3f, p50 %.3f, p95 %.3f; below %.2f (searched exactly): %.3f\n",
                   sorted[sorted.size() * 5 / 100], sorted[sorted.size() / 2], sorted[sorted.size() * 95 / 100], bound,
                   static_cast<double>(below) / static_cast<double>(sorted.size()));
    }
    // Without the exact scoring of the hits' groups first (the graph walk alone), then with it.
    // Each with the exact search below the bound (as spark searches), and the default also without it (the graph's
    // answer alone).
    const float bound = (*engine)->index().exact_below();
    std::vector<std::tuple<int, size_t, bool>> settings = {{128, 0, true}, {16, 4, true},  {64, 4, true},  {128, 4, true},
                                                           {256, 4, true}, {128, 8, true}, {256, 8, true}, {128, 4, false}};
    for (const auto& [ef, refine, fallback] : settings) {
      (*engine)->index().set_ef_search(ef);
      (*engine)->index().set_refine_hits(refine);
      (*engine)->index().set_exact_below(fallback ? bound : -2.0f);
      size_t same = 0;
      std::vector<double> us, gaps;  // gap: the exact top-1's similarity less the found one's
      for (size_t i = 0; i < query_vectors.size(); ++i) {
        const auto t0 = Clock::now();
        const auto hits = (*engine)->index().search(query_vectors[i].data(), 1, std::nullopt, {});
        us.push_back(since(t0) * 1e6);
        same += !hits.empty() && hits[0].similarity >= exact_best[i] - 1e-5f;
        gaps.push_back(hits.empty() ? 1.0 : std::max(0.0, static_cast<double>(exact_best[i] - hits[0].similarity)));
      }
      std::sort(us.begin(), us.end());
      std::sort(gaps.begin(), gaps.end());
      double mean_gap = 0;
      for (double g : gaps) mean_gap += g / static_cast<double>(gaps.size());
      std::fprintf(stderr, "  efSearch %4d, refine %zu%s: top-1 as similar as exact %.3f, search p50 %.0f us, p95 %.0f us; "
                   "similarity short of exact: mean %.4f, p95 %.4f, max %.4f\n", ef, refine,
                   fallback ? "" : ", graph only",
                   static_cast<double>(same) / static_cast<double>(query_vectors.size()), us[us.size() / 2],
                   us[us.size() * 95 / 100], mean_gap, gaps[gaps.size() * 95 / 100], gaps.back());
    }
    const auto t0 = Clock::now();
    for (const auto& v : query_vectors) (void)(*engine)->index().search_exact(v.data(), 1);
    std::fprintf(stderr, "  exact search: mean %.0f us\n", since(t0) * 1e6 / static_cast<double>(query_vectors.size()));
  }
  engine->reset();  // the in-process engine goes: the incremental update loads its own, as `spark import` does
  // Incremental: 1,000 new cases imported into the store, and the index brought up to date as `spark import` and
  // `spark index` do (embed the new with the index's statistics, add, save). Then a cold start: a new engine loaded
  // from disk (manifest, checksums, FAISS) and its first localize, with fresh caches.
  {
    std::vector<Case> batch;
    for (size_t j = 0; j < 1000; ++j) batch.push_back(bench::perturb(corpus[rng() % corpus.size()], n + queries + j, rng, new_version_share));
    auto t0 = Clock::now();
    if (auto s = (*kb)->import_cases(batch, {}, false); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      return 1;
    }
    const double import_inc = since(t0);
    t0 = Clock::now();
    std::vector<std::string> inc_notes;
    auto updated = SearchEngine::open(**kb, {}, inc_notes);
    if (!updated || !(*updated)->persist(**kb)) {
      std::fprintf(stderr, "incremental index update failed\n");
      return 1;
    }
    const double update_s = since(t0);
    const size_t added = (*updated)->added_since_load();
    updated->reset();
    t0 = Clock::now();
    auto cold = SearchEngine::open(**kb, {}, inc_notes);
    if (!cold) return 1;
    const double cold_open = since(t0);
    Localizer cold_localizer(kb->get(), cold->get());
    Case query = bench::perturb(query_pool[rng() % query_pool.size()], n + queries + 5000, rng, new_version_share);
    query.faulty_lines.clear();
    const auto t1 = Clock::now();
    auto loc = cold_localizer.localize(query, {});
    if (!loc) return 1;
    std::fprintf(stderr, "  incremental: import of 1000 new cases %.2f s, index update %.2f s (%zu added); cold start: "
                 "engine open %.3f s, first localize %.1f ms\n",
                 import_inc, update_s, added, cold_open, since(t1) * 1000.0);
  }
  // `spark localize` as a new process, as CI runs it: each query's test file and failure output written to a folder,
  // one process per query (the page cache is warm; nothing else is). The binary is the build's, beside bench/.
  const fs::path spark_binary = fs::weakly_canonical(fs::path(argv[0])).parent_path().parent_path() / "spark";
  const size_t process_queries = std::min<size_t>(queries, 20);
  if (process_queries > 0 && fs::exists(spark_binary)) {
    const fs::path work = dir / "queries";
    std::vector<std::vector<std::string>> commands;
    for (size_t q = 0; q < process_queries; ++q) {
      Case query = bench::perturb(query_pool[rng() % query_pool.size()], n + queries + 6000 + q, rng, new_version_share);
      const fs::path qdir = work / std::to_string(q);
      write_file(qdir / query.files.front().path, query.files.front().content);
      write_file(qdir / "error.txt", query.error_message);
      commands.push_back({spark_binary.string(), "--kb", dir.string(), "localize", "--test", query.files.front().path,
                          "--error", "error.txt", "--test-id", query.test_id, "--format", "json"});
    }
    // Twice: first as failures of test-file versions no process has parsed yet (the structures persisted by earlier
    // processes are removed first), then the same failures again (CI re-running a failure: its version was parsed).
    fs::remove_all(dir / "structures", ec);
    // The peer measured in the same run: `spark --version`, a process that loads spark's libraries and does nothing
    // (no new-process figure can be below it).
    {
      std::vector<double> floor_ms;
      for (size_t q = 0; q < commands.size(); ++q) {
        const auto t0 = Clock::now();
        if (run_quiet({spark_binary.string(), "--version"}, work) != 0) return 1;
        floor_ms.push_back(since(t0) * 1000.0);
      }
      std::sort(floor_ms.begin(), floor_ms.end());
      std::fprintf(stderr, "  new process (floor): `spark --version` x %zu: p50 %.1f ms, p95 %.1f ms\n", floor_ms.size(),
                   floor_ms[floor_ms.size() / 2], floor_ms[floor_ms.size() * 95 / 100]);
    }
    for (const char* pass : {"first", "again"}) {
      std::vector<double> process_ms;
      for (size_t q = 0; q < commands.size(); ++q) {
        const auto t0 = Clock::now();
        const int rc = run_quiet(commands[q], work / std::to_string(q));
        process_ms.push_back(since(t0) * 1000.0);
        if (rc != 0) {
          std::fprintf(stderr, "spark localize exited %d (see %s)\n", rc, (work / std::to_string(q) / "last.err").c_str());
          return 1;
        }
      }
      std::sort(process_ms.begin(), process_ms.end());
      std::fprintf(stderr, "  new process (%s): `spark localize` x %zu: p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", pass,
                   process_queries, process_ms[process_ms.size() / 2], process_ms[process_ms.size() * 95 / 100],
                   process_ms.back());
    }
  }
  if (const char* keep = std::getenv("SPARK_SCALE_KEEP"); keep && *keep) {
    std::fprintf(stderr, "  kept the store: %s\n", dir.c_str());
    return 0;
  }
  fs::remove_all(dir);
  return 0;
}
