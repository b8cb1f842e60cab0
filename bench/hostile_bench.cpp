// Hostile text against every PCRE2 pattern spark runs (issue 13): 1 MB inputs made to make a backtracking matcher
// work hard, through each entry point that applies patterns to text from outside: redaction (every built-in rule),
// error-message normalisation and traceback parsing, and the LLM answer parser. Also one ordinary 1 MB input per
// entry point as the peer. The ratio hostile/ordinary is what to read: near 1 means no pathological backtracking.
//   build/bench/spark_bench_hostile --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "formats/error_message.h"
#include "formats/redact.h"
#include "localizer/answer.h"

namespace {

constexpr size_t kMB = 1u << 20;

std::string repeat(const std::string& unit, size_t bytes = kMB) {
  std::string s;
  s.reserve(bytes + unit.size());
  while (s.size() < bytes) s += unit;
  return s;
}

// name → input. "ordinary" is the peer: Python-ish code with a traceback, no secrets.
const std::map<std::string, std::string>& inputs() {
  static const std::map<std::string, std::string> m = {
      {"ordinary", repeat("    result = compute(value, 12)  # the expected value\n    assert result == 13\n")},
      {"one_line_of_a", repeat("a")},
      {"one_line_of_equals", repeat("=")},
      {"token_assignments", repeat("password_token_secret_key = ")},
      {"bearer_without_end", "Authorization: Bearer " + repeat("A")},
      {"key_block_never_closed", "-----BEGIN RSA PRIVATE KEY-----\n" + repeat("MIIEowIBAAKCAQEA\n")},
      {"urls_without_at", repeat("postgres://user:pass")},
      {"jwt_prefixes", repeat("eyJhbGciOi.")},
      {"quotes_unbalanced", repeat("secret = '\"")},
      {"traceback_prefixes", repeat("tests/t.py:1: in ")},
      {"file_line_in", repeat("File \"x.py\", line 1, in ")},
      {"hex_and_tmp", repeat("0x7f /tmp/pytest-of- 2026-01-01T")},
      {"line_words", repeat("line 1, line 2 and lines 3-4 ")},
      {"open_brackets", repeat("[{")},
  };
  return m;
}

void BM_redact(benchmark::State& state, const std::string& name) {
  static const spark::Redactor redactor = *spark::Redactor::make();
  const std::string& input = inputs().at(name);
  for (auto _ : state) {
    std::string text = input;
    std::map<std::string, size_t> counts;
    benchmark::DoNotOptimize(redactor.redact(text, counts));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input.size()));
}

void BM_error_message(benchmark::State& state, const std::string& name) {
  const std::string& input = inputs().at(name);
  for (auto _ : state) {
    benchmark::DoNotOptimize(spark::normalize_error_message(input));
    benchmark::DoNotOptimize(spark::parse_traceback(input));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input.size()));
}

void BM_answer(benchmark::State& state, const std::string& name) {
  const std::string& input = inputs().at(name);
  for (auto _ : state)
    benchmark::DoNotOptimize(spark::parse_answer(input, 500, [](int id) { return id % 7 != 0; }));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input.size()));
}

const int registered = [] {
  for (const auto& [name, input] : inputs()) {
    benchmark::RegisterBenchmark(("redact/" + name).c_str(), BM_redact, name)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("error_message/" + name).c_str(), BM_error_message, name)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("answer/" + name).c_str(), BM_answer, name)->Unit(benchmark::kMillisecond);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
