// The annotation distance kernel against the plain dynamic programme, and the bounded comparison the annotation runs
// against the unbounded one it replaced, in the same run.
//   build/bench/spark_bench_levenshtein --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "code/levenshtein.h"
#include "base/text.h"

namespace {

// Code-like lines: identifiers, operators, literals.
std::vector<std::string> code_lines(size_t count, size_t length, unsigned seed) {
  static const char* words[] = {"assert", "result", "==", "self.", "value", "(", ")", "[0]", "42", "'text'", ",",
                                "expected", "call", "data", "=", "+", "x", "None", "True", "len"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string line = "    ";
    while (line.size() < length) line += std::string(words[rng() % 20]) + " ";
    line.resize(length);
    out.push_back(line);
  }
  return out;
}

// 64 pairs of decoded lines of the benchmark's length, compared in turn by `distance`.
template <size_t (*distance)(std::u32string_view, std::u32string_view)>
void run_pairs(benchmark::State& state) {
  const auto a = code_lines(64, static_cast<size_t>(state.range(0)), 1);
  const auto b = code_lines(64, static_cast<size_t>(state.range(0)), 2);
  std::vector<std::u32string> ua, ub;
  for (size_t i = 0; i < a.size(); ++i) {
    ua.push_back(spark::decode_utf8(a[i]));
    ub.push_back(spark::decode_utf8(b[i]));
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(distance(ua[i % 64], ub[i % 64]));
    ++i;
  }
}

void BM_levenshtein_bit_parallel(benchmark::State& state) { run_pairs<spark::levenshtein>(state); }
void BM_levenshtein_dp(benchmark::State& state) { run_pairs<spark::levenshtein_dp>(state); }

// The annotate step as the localizer runs it: every line of a 5,000-line test file against 3 retrieved faulty lines,
// threshold 0.05 (length pruning + bit-parallel kernel), versus the plain programme on every pair.
void BM_annotate_file_pruned_bit_parallel(benchmark::State& state) {
  std::mt19937 rng(3);
  std::vector<spark::PreparedLine> file, faulty;
  for (size_t i = 0; i < 5000; ++i) file.emplace_back(code_lines(1, 10 + rng() % 90, static_cast<unsigned>(i))[0]);
  for (size_t i = 0; i < 3; ++i) faulty.emplace_back(code_lines(1, 40, 100 + static_cast<unsigned>(i))[0]);
  for (auto _ : state) {
    size_t marked = 0;
    for (const auto& l : file)
      for (const auto& f : faulty) marked += spark::normalized_levenshtein_bounded(l, f, 0.05) <= 0.05;
    benchmark::DoNotOptimize(marked);
  }
}

void BM_annotate_file_dp(benchmark::State& state) {
  std::mt19937 rng(3);
  std::vector<std::u32string> file, faulty;
  for (size_t i = 0; i < 5000; ++i) file.push_back(spark::decode_utf8(code_lines(1, 10 + rng() % 90, static_cast<unsigned>(i))[0]));
  for (size_t i = 0; i < 3; ++i) faulty.push_back(spark::decode_utf8(code_lines(1, 40, 100 + static_cast<unsigned>(i))[0]));
  for (auto _ : state) {
    size_t marked = 0;
    for (const auto& l : file)
      for (const auto& f : faulty)
        marked += static_cast<double>(spark::levenshtein_dp(l, f)) / static_cast<double>(std::max(l.size(), f.size())) <= 0.05;
    benchmark::DoNotOptimize(marked);
  }
}

// The normalized comparison as the annotation made it before the bounded kernel: length pruning, equality, then the
// whole bit-parallel programme.
double unbounded_normalized(const spark::PreparedLine& a, const spark::PreparedLine& b, double max_distance) {
  const size_t longer = std::max(a.text.size(), b.text.size());
  if (longer == 0) return 0.0;
  const size_t diff = std::max(a.text.size(), b.text.size()) - std::min(a.text.size(), b.text.size());
  const double lower_bound = static_cast<double>(diff) / static_cast<double>(longer);
  if (lower_bound > max_distance) return lower_bound;
  if (a.text == b.text) return 0.0;
  return static_cast<double>(spark::levenshtein(a.text, b.text)) / static_cast<double>(longer);
}

// 64 pairs of the benchmark's length (±25 %, as one test file's lines differ), unrelated (`near` false) or one
// line and a copy with one to three edits (a faulty line and a query line that resembles it).
std::pair<std::vector<spark::PreparedLine>, std::vector<spark::PreparedLine>> line_pairs(size_t length, bool near) {
  std::mt19937 rng(static_cast<unsigned>(length) * 2 + (near ? 1 : 0));
  std::vector<spark::PreparedLine> a, b;
  for (unsigned i = 0; i < 64; ++i) {
    const size_t la = length * 3 / 4 + rng() % (length / 2 + 1);
    const std::string line = code_lines(1, la, 10 + i)[0];
    std::string other = near ? line : code_lines(1, length * 3 / 4 + rng() % (length / 2 + 1), 1000 + i)[0];
    if (near)
      for (unsigned e = 0, edits = 1 + rng() % 3; e < edits; ++e) other[4 + rng() % (other.size() - 4)] = '#';
    a.emplace_back(line);
    b.emplace_back(other);
  }
  return {std::move(a), std::move(b)};
}

// The annotation's comparison at the resemblance radius 0.5 (what annotation_features asks): the unbounded kernel
// (before) against the bounded one (now), on typical line lengths.
template <bool kBounded, bool kNear>
void run_annotation_pairs(benchmark::State& state) {
  const auto [a, b] = line_pairs(static_cast<size_t>(state.range(0)), kNear);
  size_t i = 0;
  for (auto _ : state) {
    const auto& x = a[i % 64];
    const auto& y = b[i % 64];
    benchmark::DoNotOptimize(kBounded ? spark::normalized_levenshtein_bounded(x, y, 0.5) : unbounded_normalized(x, y, 0.5));
    ++i;
  }
}

void BM_radius_unrelated_before(benchmark::State& state) { run_annotation_pairs<false, false>(state); }
void BM_radius_unrelated_bounded(benchmark::State& state) { run_annotation_pairs<true, false>(state); }
void BM_radius_near_before(benchmark::State& state) { run_annotation_pairs<false, true>(state); }
void BM_radius_near_bounded(benchmark::State& state) { run_annotation_pairs<true, true>(state); }

}  // namespace

BENCHMARK(BM_radius_unrelated_before)->Arg(20)->Arg(60)->Arg(120);
BENCHMARK(BM_radius_unrelated_bounded)->Arg(20)->Arg(60)->Arg(120);
BENCHMARK(BM_radius_near_before)->Arg(20)->Arg(60)->Arg(120);
BENCHMARK(BM_radius_near_bounded)->Arg(20)->Arg(60)->Arg(120);
BENCHMARK(BM_levenshtein_bit_parallel)->Arg(20)->Arg(60)->Arg(120)->Arg(250);
BENCHMARK(BM_levenshtein_dp)->Arg(20)->Arg(60)->Arg(120)->Arg(250);
BENCHMARK(BM_annotate_file_pruned_bit_parallel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_annotate_file_dp)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
