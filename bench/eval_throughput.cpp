// `spark eval` throughput: leave-one-out over a corpus with the built-in ranker (no LLM), and in default mode
// against the in-process scripted LLM server with a fixed latency and 16 requests in flight. Usage:
//   spark_eval_throughput [--llm-cases 200] [--latency 2] [--concurrency 16] CASES.jsonl...
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "chat_server.h"
#include "localizer/eval/evaluation.h"
#include "localizer/index_build.h"
#include "store/knowledge_base.h"

using namespace spark;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  size_t llm_cases = 200, concurrency = 16;
  double latency = 2.0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--llm-cases") == 0 && i + 1 < argc) llm_cases = std::stoul(argv[++i]);
    else if (std::strcmp(argv[i], "--latency") == 0 && i + 1 < argc) latency = std::stod(argv[++i]);
    else if (std::strcmp(argv[i], "--concurrency") == 0 && i + 1 < argc) concurrency = std::stoul(argv[++i]);
    else files.push_back(argv[i]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: spark_eval_throughput [--llm-cases N] [--latency S] [--concurrency N] CASES.jsonl...\n");
    return 2;
  }
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(files, cases, origins); !s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    return 1;
  }
  const fs::path dir = fs::temp_directory_path() / ("spark-evalbench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto kb = KnowledgeBase::open(dir, true);
  if (!kb || !(*kb)->import_cases(cases, {}, false)) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  if (auto r = build_index(**kb, {}, {}); !r) return 1;
  const double index_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, {}, notes);
  if (!engine) return 1;

  EvalOptions builtin;
  builtin.modes = {Mode::builtin};
  auto e1 = run_evaluation(**kb, **engine, cases, builtin);
  if (!e1) {
    std::fprintf(stderr, "%s\n", e1.error().message.c_str());
    return 1;
  }
  std::printf("index: %zu cases in %.1f s\n", cases.size(), index_s);
  std::printf("builtin, k 1,3,5,10, line: %zu cases in %.2f s = %.1f cases/s (incl. fold-ranker training)\n",
              e1->cases.size(), e1->seconds, static_cast<double>(e1->cases.size()) / e1->seconds);

  testing::ChatServer server(
      [latency](const httplib::Request&, httplib::Response& res, int) {
        std::this_thread::sleep_for(std::chrono::duration<double>(latency));
        res.set_content(testing::ChatServer::completion("line 1\nline 2\nline 3\nline 4\nline 5"), "application/json");
      },
      concurrency * 2 + 4);
  LlmOptions o;
  o.base_url = server.url();
  o.model = "bench";
  o.concurrency = concurrency;
  LlmClient client(o);
  std::vector<Case> subset(cases.begin(), cases.begin() + static_cast<long>(std::min(llm_cases, cases.size())));
  EvalOptions llm;
  llm.modes = {Mode::default_mode};
  llm.ks = {5};
  llm.client = &client;
  llm.stage.redactor = std::make_shared<const Redactor>(*Redactor::make());
  auto e2 = run_evaluation(**kb, **engine, subset, llm);
  if (!e2) {
    std::fprintf(stderr, "%s\n", e2.error().message.c_str());
    return 1;
  }
  const double ideal = static_cast<double>(subset.size()) / static_cast<double>(concurrency) * latency;
  std::printf("default mode, k 5, scripted server %.1f s latency, %zu in flight: %zu cases in %.2f s = %.2f cases/s; "
              "ideal %.1f s, ratio %.3f (%zu requests)\n",
              latency, concurrency, subset.size(), e2->seconds, static_cast<double>(subset.size()) / e2->seconds, ideal,
              e2->seconds / ideal, server.calls());
  fs::remove_all(dir);
  return 0;
}
