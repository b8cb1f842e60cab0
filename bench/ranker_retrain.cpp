// The built-in ranker learning again as cases arrive (issue 34, part 8): what one retraining costs at N labelled
// cases, and what that costs per case arriving under the retraining margin.
//
//   build/bench/spark_retrain REPETITIONS N[,N...] ../shared/data/dev/*/cases.jsonl
//
// For each N: a knowledge base of N labelled cases (the corpus's cases, then perturbed copies: bench/grown_corpus.h,
// one in five a new test-file version), its index built as `spark index` builds it; then learn_ranker_if_due (what
// `spark record`, `import`, `localize` and `index` call) REPETITIONS times on the loaded engine, each time after
// setting the prior ranker so that it is due. Prints the median and the range of the retraining times, the sample
// learnt from (IndexBuildOptions::max_training_cases), and the median divided by the cases that arrive between two
// retrainings at N (next_training_at(N) − N): the amortised cost per labelled case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>

#include <unistd.h>

#include "grown_corpus.h"
#include "localizer/index_build.h"

using namespace spark;
namespace fs = std::filesystem;

namespace {

int fail_with(const Error& e) {
  std::fprintf(stderr, "spark_retrain: %s\n", e.message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: spark_retrain REPETITIONS N[,N...] CASES.jsonl...\n");
    return 2;
  }
  const size_t repetitions = std::max<size_t>(1, std::stoul(argv[1]));
  std::vector<size_t> sizes;
  std::stringstream list(argv[2]);
  for (std::string n; std::getline(list, n, ',');) sizes.push_back(std::stoul(n));
  std::vector<Case> corpus;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora({argv + 3, argv + argc}, corpus, origins); !s) return fail_with(s.error());
  std::erase_if(corpus, [](const Case& c) { return c.faulty_lines.empty(); });
  if (corpus.empty()) return fail_with(Error{"no labelled case in the corpus"});

  const IndexBuildOptions options;
  std::printf("| labelled cases | learnt from | retraining median s (min–max, %zu runs) | next at | amortised ms per "
              "arriving case | `spark index` ranker s |\n|---|---|---|---|---|---|\n",
              repetitions);
  for (const size_t n : sizes) {
    const fs::path dir = fs::temp_directory_path() / ("spark-retrain-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto kb = KnowledgeBase::open(dir, true);
    if (!kb) return fail_with(kb.error());
    std::mt19937 rng(42);
    for (size_t start = 0; start < n; start += 1000) {
      std::vector<Case> batch;
      for (size_t j = start; j < std::min(n, start + 1000); ++j)
        batch.push_back(j < corpus.size() ? corpus[j] : bench::perturb(corpus[j % corpus.size()], j, rng, 0.2));
      if (auto s = (*kb)->import_cases(batch, {}, false); !s) return fail_with(s.error());
    }
    auto built = build_index(**kb, {}, options);
    if (!built) return fail_with(built.error());
    std::vector<std::string> notes;
    auto engine = SearchEngine::open(**kb, {}, notes);
    if (!engine) return fail_with(engine.error());
    std::vector<double> seconds;
    std::string origin;
    for (size_t r = 0; r < repetitions; ++r) {
      if (auto s = (*engine)->replace_ranker(**kb, RankerModel::prior()); !s) return fail_with(s.error());
      const auto t0 = std::chrono::steady_clock::now();
      auto report = learn_ranker_if_due(**kb, **engine, options);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!report) return fail_with(report.error());
      if (!*report) return fail_with(Error{"the prior ranker was not due at " + std::to_string(n) + " cases"});
      seconds.push_back(elapsed);
      origin = (*report)->now.origin;
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const size_t next = next_training_at(built->labelled, options);
    std::printf("| %zu | %s | %.2f (%.2f–%.2f) | %zu | %.1f | %.2f |\n", built->labelled, origin.c_str(), median,
                seconds.front(), seconds.back(), next,
                median * 1000.0 / static_cast<double>(next - built->labelled), built->train_seconds);
    std::fflush(stdout);
    engine->reset();
    kb->reset();
    fs::remove_all(dir);
  }
  return 0;
}
