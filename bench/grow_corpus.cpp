// Writes the knowledge base bench/scale_bench.cpp grows, as a corpus (JSON Lines), so that spark's `import` and a
// peer read the very same cases (bench/peers.sh): the first N cases spark_scale imports for the same arguments, the
// same perturbed copies in the same order (bench/grown_corpus.h, the same seed).
//
//   build/bench/spark_grow_corpus N NEW_VERSION_SHARE OUT.jsonl ../shared/data/dev/*/cases.jsonl
#include <cstdio>
#include <fstream>
#include <random>

#include "base/text.h"
#include "grown_corpus.h"
#include "store/knowledge_base.h"

using namespace spark;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: spark_grow_corpus N NEW_VERSION_SHARE OUT.jsonl CASES.jsonl...\n");
    return 2;
  }
  const size_t n = std::stoul(argv[1]);
  const double share = std::stod(argv[2]);
  std::vector<Case> corpus;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora({argv + 4, argv + argc}, corpus, origins); !s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    return 1;
  }
  std::ofstream out(argv[3], std::ios::binary);
  if (!out) {
    std::fprintf(stderr, "%s: cannot write\n", argv[3]);
    return 1;
  }
  std::mt19937 rng(42);  // spark_scale's seed and draw order: its knowledge base of N cases, case for case
  for (size_t j = 0; j < n; ++j) {
    const Case c = j < corpus.size() ? corpus[j] : bench::perturb(corpus[j % corpus.size()], j, rng, share);
    out << json_text(case_to_json(c)) << '\n';
  }
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: write failed\n", argv[3]);
    return 1;
  }
  return 0;
}
