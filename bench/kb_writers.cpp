// The shared PostgreSQL store under many CI runners (issue 14), each figure beside its SQLite peer from the same run:
//   1. W concurrent `spark record` processes (W = 8, 16, 32) into one store: records/s, and the rows lost or
//      duplicated, counted after the run against what the reports hold;
//   2. `spark localize` p50 at N cases, PostgreSQL vs SQLite (the index is local to the runner either way);
//   3. a runner 1,000 cases behind: its first localize catches its index up; the time that adds.
// The server is a real one started for the run (tests/pg_cluster.h: initdb + pg_ctl in a temporary folder).
//
//   build/bench/spark_kb_writers build/spark [CASES=10000] [TESTS_PER_REPORT=200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pg_cluster.h"
#include "process.h"


namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string g_spark;

using spark::bench::spawn;
using spark::bench::wait_for;

int run(const std::vector<std::string>& args, const fs::path& cwd) {
  const pid_t pid = spawn(args, cwd, cwd / "last.err");
  return pid < 0 ? 127 : wait_for(pid);
}

// Runs args; its standard output.
std::string capture(const std::vector<std::string>& args, const fs::path& cwd) {
  const fs::path out = cwd / "captured.out";
  const pid_t pid = spawn(args, cwd, cwd / "captured.err", out);
  if (pid >= 0) wait_for(pid);
  std::ifstream in(out);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string report(int tests, const std::string& prefix) {
  std::string xml = "<testsuite name=\"ci\">\n";
  for (int i = 0; i < tests; ++i) {
    xml += "<testcase classname=\"tests.test_a\" name=\"" + prefix + std::to_string(i) + "\"";
    xml += i % 2 ? "><failure message=\"m\">E   assert " + std::to_string(i) + " == 0</failure></testcase>\n" : "/>\n";
  }
  return xml + "</testsuite>\n";
}

// A labelled case of a small synthetic test file; contents vary with i.
std::string case_line(int i) {
  std::string content = "import pytest\n\n";
  for (int f = 0; f < 6; ++f) {
    content += "def test_" + std::to_string(f) + "_" + std::to_string(i % 97) + "():\n";
    content += "    value = compute(" + std::to_string(i * 7 + f) + ")\n";
    content += "    assert value == " + std::to_string((i + f) % 13) + "\n\n";
  }
  const nlohmann::json c = {
      {"id", "c" + std::to_string(i)}, {"project", "bench"}, {"test_id", "tests/test_a.py::test_0_" + std::to_string(i % 97)},
      {"language", "python"}, {"failure_time", "2026-01-01T00:00:00Z"},
      {"error_message", "tests/test_a.py:5: in test_0\n    assert value == 1\nE   assert " + std::to_string(i % 31) + " == 1"},
      {"files", {{{"path", "tests/test_a.py"}, {"content", content}}}},
      {"faulty_lines", {{{"path", "tests/test_a.py"}, {"line", 5}}}}, {"source", "seeded"}};
  return c.dump() + "\n";
}

struct Counts {
  long outcomes = 0, failures = 0;
};

Counts server_counts(spark::testing::PgCluster& pg, const std::string& url) {
  const std::string db = url.substr(url.rfind('/') + 1);
  return {std::atol(pg.psql(db, "SELECT count(*) FROM spark.outcomes").c_str()),
          std::atol(pg.psql(db, "SELECT count(*) FROM spark.failures").c_str())};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SPARK_BINARY [CASES=10000] [TESTS_PER_REPORT=200]\n", argv[0]);
    return 2;
  }
  g_spark = fs::absolute(argv[1]).string();
  const int cases = argc > 2 ? std::atoi(argv[2]) : 10000;
  const int tests = argc > 3 ? std::atoi(argv[3]) : 200;
  std::string why;
  auto pg = spark::testing::PgCluster::start_new(why);
  if (!pg) {
    std::fprintf(stderr, "kb_writers: no PostgreSQL server: %s\n", why.c_str());
    return 1;
  }
  std::random_device rd;
  const fs::path work = fs::temp_directory_path() / ("spark-kb-writers-" + std::to_string(rd()));
  const fs::path repo = work / "repo";
  write(repo / "tests" / "test_a.py", "def test_a():\n    assert 1 == 2\n");
  run({"git", "init", "-q", "."}, repo);
  run({"git", "add", "tests"}, repo);
  run({"git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "first"}, repo);

  std::printf("== 1. concurrent `spark record`, %d tests per report (half failing), 20 shared by every report\n", tests);
  std::printf("%-8s %-10s %10s %12s %8s %8s\n", "writers", "store", "wall s", "records/s", "lost", "dup");
  for (int writers : {8, 16, 32}) {
    for (bool server : {true, false}) {
      const std::string url = server ? pg->new_database() : (work / ("sqlite-" + std::to_string(writers))).string();
      const fs::path local = work / ("local-" + std::to_string(writers) + (server ? "pg" : "lite"));
      run({g_spark, "--kb", url, "--local-dir", local.string(), "kb", "init"}, repo);
      for (int w = 0; w < writers; ++w) {
        std::string xml = report(tests, "w" + std::to_string(w) + "_");
        xml.resize(xml.size() - std::string("</testsuite>\n").size());
        const std::string shared = report(20, "shared_");
        xml += shared.substr(shared.find('\n') + 1);
        write(repo / ("r" + std::to_string(w) + ".xml"), xml);
      }
      const auto t0 = Clock::now();
      std::vector<pid_t> pids;
      for (int w = 0; w < writers; ++w)
        pids.push_back(spawn({g_spark, "--kb", url, "--local-dir", local.string(), "record", "--junit",
                              "r" + std::to_string(w) + ".xml", "--no-localize"},
                             repo, work / ("w" + std::to_string(w) + ".err")));
      int failed = 0;
      for (pid_t p : pids) failed += wait_for(p) != 0;
      const double wall = seconds_since(t0);
      const long expected_outcomes = static_cast<long>(writers) * tests + 20;
      const long expected_failures = static_cast<long>(writers) * (tests / 2) + 10;
      Counts got;
      if (server) {
        got = server_counts(*pg, url);
      } else {
        // The SQLite peer, counted through `spark kb status`.
        std::istringstream st(capture({g_spark, "--kb", url, "kb", "status"}, repo));
        std::string line;
        while (std::getline(st, line)) {
          if (line.starts_with("outcomes: ")) got.outcomes = std::atol(line.c_str() + 10);
          if (line.starts_with("failures: ")) got.failures = std::atol(line.c_str() + 10);
        }
      }
      const long lost = std::max(0L, expected_outcomes - got.outcomes) + std::max(0L, expected_failures - got.failures);
      const long dup = std::max(0L, got.outcomes - expected_outcomes) + std::max(0L, got.failures - expected_failures);
      std::printf("%-8d %-10s %10.2f %12.0f %8ld %8ld%s\n", writers, server ? "postgresql" : "sqlite", wall,
                  static_cast<double>(writers) * (tests + 20) / wall, lost, dup,
                  failed ? ("  (" + std::to_string(failed) + " writer(s) failed)").c_str() : "");
      std::fflush(stdout);
    }
  }

  std::printf("\n== 2. `spark localize` p50 at %d cases, each store with its local index built\n", cases);
  std::string corpus;
  for (int i = 0; i < cases; ++i) corpus += case_line(i);
  write(work / "corpus.jsonl", corpus);
  std::string behind;
  for (int i = cases; i < cases + 1000; ++i) behind += case_line(i);
  write(work / "behind.jsonl", behind);
  write(work / "q" / "tests" / "test_a.py", "def test_0_5():\n    value = compute(40)\n    assert value == 1\n");
  write(work / "q" / "error.txt", "tests/test_a.py:3: in test_0_5\n    assert value == 1\nE   assert 9 == 1\n");
  const std::string pg_url = pg->new_database();
  const std::string lite = (work / "lite").string();
  for (const auto& [url, local] : {std::pair{pg_url, work / "runner-a"}, std::pair{lite, work / "runner-lite"}}) {
    const auto t0 = Clock::now();
    run({g_spark, "--kb", url, "--local-dir", local.string(), "import", (work / "corpus.jsonl").string()}, work);
    const double import_s = seconds_since(t0);
    const auto t1 = Clock::now();
    run({g_spark, "--kb", url, "--local-dir", local.string(), "index"}, work);
    std::printf("%-10s import %.1f s (%.0f cases/s), index %.1f s\n", url == lite ? "sqlite" : "postgresql", import_s,
                cases / import_s, seconds_since(t1));
  }
  const std::vector<std::string> query = {"localize", "--test", "q/tests/test_a.py", "--error", "q/error.txt",
                                          "--format", "json"};
  std::vector<double> t_pg, t_lite;
  for (int r = 0; r < 15; ++r) {
    for (bool server : {true, false}) {
      std::vector<std::string> args = {g_spark, "--kb", server ? pg_url : lite, "--local-dir",
                                       (work / (server ? "runner-a" : "runner-lite")).string()};
      args.insert(args.end(), query.begin(), query.end());
      const auto t0 = Clock::now();
      run(args, work);
      (server ? t_pg : t_lite).push_back(seconds_since(t0) * 1000);
    }
  }
  std::printf("localize p50: postgresql %.1f ms, sqlite %.1f ms, ratio %.2f (15 runs each, alternating)\n",
              median(t_pg), median(t_lite), median(t_pg) / median(t_lite));

  std::printf("\n== 3. a runner 1,000 cases behind (another runner imported them)\n");
  run({g_spark, "--kb", pg_url, "--local-dir", (work / "runner-b").string(), "import", (work / "behind.jsonl").string()}, work);
  std::vector<std::string> args = {g_spark, "--kb", pg_url, "--local-dir", (work / "runner-a").string()};
  args.insert(args.end(), query.begin(), query.end());
  const auto tc = Clock::now();
  run(args, work);
  const double catch_up = seconds_since(tc) * 1000;
  std::vector<double> after;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    run(args, work);
    after.push_back(seconds_since(t0) * 1000);
  }
  std::printf("first localize after: %.0f ms; then p50 %.1f ms: the catch-up of 1,000 cases at %d took ~%.0f ms\n",
              catch_up, median(after), cases, catch_up - median(after));
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
