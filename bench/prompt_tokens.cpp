// Prompt sizes per mode on a corpus (the paper's Table 1 and Table 4 analogues), without an LLM: every case in turn
// is the query against the rest of the corpus (leave-one-out), the prompt of each mode is built as `spark localize`
// would send it, and its tokens are estimated (src/code/tokens.h). Usage:
//   spark_prompt_tokens [--context N] [--test-scope] [--dump DIR] CASES.jsonl...
// --dump DIR writes each default-mode prompt to DIR/N.txt and DIR/index.tsv (N, case id, project, estimate), for
// bench/token_ratio.py, which counts them with real tokenizers.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "base/files.h"
#include "code/structure_cache.h"
#include "code/tokens.h"
#include "localizer/index_build.h"
#include "localizer/llm_stage.h"
#include "localizer/localizer.h"
#include "store/knowledge_base.h"

using namespace spark;
namespace fs = std::filesystem;

namespace {

struct Stats {
  std::vector<double> tokens;
  size_t truncated = 0, annotated_lines = 0;
  void add(double t) { tokens.push_back(t); }
  double mean() const {
    double s = 0;
    for (double t : tokens) s += t;
    return tokens.empty() ? 0 : s / static_cast<double>(tokens.size());
  }
  double median() const {
    if (tokens.empty()) return 0;
    auto v = tokens;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

}  // namespace

int main(int argc, char** argv) {
  size_t context = 32768;
  bool test_scope = false;
  std::string dump;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--context") == 0 && i + 1 < argc)
      context = std::stoul(argv[++i]);
    else if (std::strcmp(argv[i], "--test-scope") == 0)
      test_scope = true;
    else if (std::strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
      dump = argv[++i];
    else
      files.push_back(argv[i]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: spark_prompt_tokens [--context N] [--test-scope] CASES.jsonl...\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = fs::temp_directory_path() / ("spark-tokens-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(files, cases, origins); !s) {
    std::fprintf(stderr, "spark_prompt_tokens: %s\n", s.error().message.c_str());
    return 1;
  }
  auto kb = KnowledgeBase::open(dir, true);
  if (!kb || !(*kb)->import_cases(cases, {}, false)) return 1;
  if (auto r = build_index(**kb, {}, {}); !r) {
    std::fprintf(stderr, "spark_prompt_tokens: %s\n", r.error().message.c_str());
    return 1;
  }
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, {}, notes);
  if (!engine) return 1;
  std::vector<Case> queries = cases;
  for (auto& q : queries) {
    q.faulty_lines.clear();
    q.record.erase("meta");
  }
  const std::vector<Mode> modes = {Mode::baseline,        Mode::default_mode, Mode::random,
                                   Mode::annotation_free, Mode::directive,    Mode::naive_rag};
  std::map<std::string, std::map<Mode, Stats>> by_project;  // "" = all
  std::map<std::string, Stats> query_tokens;
  for (Mode m : modes) {
    Localizer localizer(kb->get(), engine->get());
    StructureCache cache;
    LlmStageOptions o;
    o.mode = m;
    o.keep_prompt = true;
    o.redactor = std::make_shared<const Redactor>(*Redactor::make());
    o.tokens.context = context;
    o.test_scope_only = test_scope;
    LlmStage stage(localizer, cache, nullptr, o);
    LocalizeOptions lo;
    lo.k = 5;
    lo.seed = 1;
    const auto results = stage.run(queries, lo);
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i] || !results[i]->llm) {
        std::fprintf(stderr, "%s: %s\n", queries[i].id.c_str(),
                     results[i] ? "no prompt" : results[i].error().message.c_str());
        continue;
      }
      const LlmReport& r = *results[i]->llm;
      if (!dump.empty() && m == Mode::default_mode) {
        static size_t n = 0;
        fs::create_directories(dump);
        const std::string name = std::to_string(n++);
        if (auto s = write_file_atomic(fs::path(dump) / (name + ".txt"), r.prompt); !s) return 1;
        const std::string row = name + "\t" + queries[i].id + "\t" + queries[i].project + "\t" +
                                std::to_string(estimate_tokens(r.prompt)) + "\n";
        std::FILE* f = std::fopen((fs::path(dump) / "index.tsv").c_str(), "a");
        if (!f) return 1;
        std::fputs(row.c_str(), f);
        std::fclose(f);
      }
      for (const std::string& p : {queries[i].project, std::string("all")}) {
        Stats& s = by_project[p][m];
        s.add(static_cast<double>(r.prompt_tokens));
        s.truncated += r.truncated ? 1 : 0;
        s.annotated_lines += mode_annotates(m) ? results[i]->annotations.size() : 0;
      }
      if (m == Mode::baseline)
        for (const std::string& p : {queries[i].project, std::string("all")}) {
          std::string code;
          for (const auto& f : queries[i].files) code += f.content;
          query_tokens[p].add(static_cast<double>(estimate_tokens(code) + estimate_tokens(queries[i].error_message)));
        }
    }
  }
  std::printf(
      "# prompt tokens per mode (estimated, src/code/tokens.h), leave-one-out over %zu cases, k = 5, context %zu "
      "tokens, "
      "prompt scope %s\n\n",
      cases.size(), context, test_scope ? "test" : "file");
  std::printf(
      "| project | cases | query code+error (mean) | mode | mean | median | vs baseline (mean) | cut to fit | "
      "annotated lines / case |\n");
  std::printf("|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [project, per_mode] : by_project) {
    const double base = per_mode.at(Mode::baseline).mean();
    for (Mode m : modes) {
      const Stats& s = per_mode.at(m);
      std::printf(
          "| %s | %zu | %.0f | %s | %.1f | %.0f | %+.1f | %zu | %.2f |\n", project.c_str(), s.tokens.size(),
          query_tokens[project].mean(), std::string(mode_name(m)).c_str(), s.mean(), s.median(), s.mean() - base,
          s.truncated,
          mode_annotates(m) ? static_cast<double>(s.annotated_lines) / static_cast<double>(s.tokens.size()) : 0.0);
    }
  }
  fs::remove_all(dir);
  std::printf("\n(%.1f s)\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
