// Micro-benchmarks of `spark index`'s two new steps, each against its peer in the same run:
//   build/bench/spark_bench_index --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// - The built-in embedder per test-file version: N cases sharing one 70 KB test file embedded from shared code and
//   test-function blocks (HashedTfidfEmbedder::block + assemble, as build_index does) against each case embedded alone
//   (count_terms + vectorize, as before; its code-term cache already spares the tokenising, not the hashing,
//   copying and weighting).
// - The collapse of identical vectors in VectorIndex::add: 20,000 vectors of which three in four repeat one
//   already added, against 20,000 distinct ones.
// - The inner product of two 1,024-float vectors: spark's (eight accumulators) against faiss's (Debian's generic
//   build), the distance of every HNSW step and exact search.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "retrieval/embedder.h"
#include "random_vectors.h"
#include "retrieval/vector_index.h"

#include <faiss/utils/distances.h>

namespace {

using namespace spark;

std::string test_file(size_t lines) {
  std::string out = "import pytest\n\n";
  for (size_t i = 0; i < lines; ++i) {
    if (i % 6 == 0) out += "\ndef test_case_" + std::to_string(i) + "(tmp_path):\n";
    out += "    value_" + std::to_string(i % 97) + " = compute(" + std::to_string(i) + ", 'name_" +
           std::to_string(i % 13) + "')\n";
  }
  return out;
}

std::vector<EmbedText> cases_sharing_a_version(size_t n) {
  static const std::string code = test_file(2000);  // ~70 KB
  std::vector<EmbedText> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back({"tests/test_x.py:40: in test_case_36\n    assert value_3 == 7\nE   assert " + std::to_string(i) +
                       " == 7\nE    +  where " + std::to_string(i) + " = compute(36, 'name_10')",
                   code, "def test_case_36(tmp_path):\n    value_3 = compute(36, 'name_10')\n    assert value_3 == 7\n"});
  return out;
}

HashedTfidfEmbedder fitted(const std::vector<EmbedText>& texts) {
  HashedTfidfEmbedder e;
  e.fit_begin();
  for (const auto& t : texts) e.fit_add(e.count_terms(t));
  e.fit_end();
  return e;
}

void BM_embed_each_case_alone(benchmark::State& state) {
  const auto texts = cases_sharing_a_version(static_cast<size_t>(state.range(0)));
  auto e = fitted(texts);
  for (auto _ : state)
    for (const auto& t : texts) benchmark::DoNotOptimize(e.vectorize(e.count_terms(t)));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_embed_per_version(benchmark::State& state) {
  const auto texts = cases_sharing_a_version(static_cast<size_t>(state.range(0)));
  auto e = fitted(texts);
  const auto l = e.layout();
  std::vector<float> code(l.code), test_function(l.test_function), error(l.error);
  for (auto _ : state) {
    e.block(HashedTfidfEmbedder::code_terms(texts[0].code), code.data(), l.code);
    e.block(HashedTfidfEmbedder::test_function_terms(texts[0].test_function_code), test_function.data(), l.test_function);
    for (const auto& t : texts) {
      e.block(e.error_terms(t.error_message), error.data(), l.error);
      benchmark::DoNotOptimize(e.assemble(error.data(), test_function.data(), code.data()));
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}


// range(0): how many of every 4 vectors repeat an earlier one (0: all distinct).
void BM_index_add(benchmark::State& state) {
  constexpr size_t n = 20000, dim = 1024;
  const auto repeats = static_cast<size_t>(state.range(0));
  const auto distinct = spark::testing::random_unit_vectors(n, dim, 3);
  std::vector<float> vectors(n * dim);
  std::vector<int64_t> rowids(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t source = i % 4 < repeats ? (i / 4) : i;  // a repeat copies an earlier vector
    std::copy(distinct.begin() + static_cast<std::ptrdiff_t>(source * dim),
              distinct.begin() + static_cast<std::ptrdiff_t>((source + 1) * dim), vectors.begin() + static_cast<std::ptrdiff_t>(i * dim));
    rowids[i] = static_cast<int64_t>(i + 1);
  }
  VectorIndexOptions o;
  o.hnsw_threshold = n + 1;  // flat: the collapse alone is measured, not HNSW construction
  size_t entries = 0;
  for (auto _ : state) {
    VectorIndex index(dim, o);
    for (size_t start = 0; start < n; start += 1024) {
      const size_t end = std::min(n, start + 1024);
      index.add(std::vector<int64_t>(rowids.begin() + static_cast<std::ptrdiff_t>(start), rowids.begin() + static_cast<std::ptrdiff_t>(end)),
                std::vector<float>(vectors.begin() + static_cast<std::ptrdiff_t>(start * dim), vectors.begin() + static_cast<std::ptrdiff_t>(end * dim)));
    }
    entries = index.distinct();
  }
  state.counters["entries"] = static_cast<double>(entries);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

}  // namespace

void BM_inner_product(benchmark::State& state) {
  const auto v = testing::random_unit_vectors(64, 1024, 5);
  size_t i = 0;
  for (auto _ : state) {
    const float* a = &v[(i % 64) * 1024];
    const float* b = &v[((i + 1) % 64) * 1024];
    benchmark::DoNotOptimize(state.range(0) == 0 ? faiss::fvec_inner_product(a, b, 1024) : inner_product(a, b, 1024));
    ++i;
  }
}

BENCHMARK(BM_embed_each_case_alone)->Arg(1)->Arg(16)->Arg(200)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_embed_per_version)->Arg(1)->Arg(16)->Arg(200)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_index_add)->Arg(0)->Arg(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_inner_product)->Arg(0)->Arg(1);  // 0: faiss's, 1: spark's
BENCHMARK_MAIN();
