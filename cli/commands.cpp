#include "commands.h"

#include "base/clock.h"
#include "base/huge_pages.h"
#include "store/postgres_db.h"

#include <unistd.h>
#include <limits>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/text.h"
#include "code/structure_cache.h"
#include "code/test_scope.h"
#include "eval/eval_report.h"
#include "eval/evaluation.h"
#include "formats/error_message.h"
#include "formats/junit.h"
#include "llm/answer_cache.h"
#include "llm_stage.h"
#include "mining_store.h"
#include "prompt.h"
#include "queries.h"
#include "report.h"
#include "triage.h"
#include "store/knowledge_base.h"
#include "verdict.h"

namespace spark::cli {

namespace fs = std::filesystem;

// Messages quote what spark read (test ids, reports, a server's answer): printed through terminal_lines, so no
// control character or workflow command in them reaches a terminal or a CI log (base/text.h).
int report_error(const Error& e) {
  std::fprintf(stderr, "spark: error: %s\n", terminal_lines(e.message).c_str());
  return 1;
}

int usage_error(const Error& e) {
  report_error(e);
  return 2;
}

int usage_error(const std::string& message) { return usage_error(Error{message}); }

void note(const std::string& message) { std::fprintf(stderr, "spark: %s\n", terminal_lines(message).c_str()); }

namespace {

// Makes spark's own folder with a .gitignore of `*` (its contents never belong in the repository it sits in).
Status make_spark_folder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  if (path_exists(dir / ".gitignore")) return {};  // a user's own, kept
  return write_file_atomic(dir / ".gitignore", "*\n");
}

}  // namespace

Result<std::unique_ptr<KnowledgeBase>> open_kb(const Common& common, bool create) {
  // A store made here is made with its folder's .gitignore; a folder that exists already is the user's.
  if (const fs::path own = local_folder(common); create && !path_exists(own)) TRY(make_spark_folder(own));
  return open_knowledge_base(common.kb_dir, create, 30000, common.local_dir);
}

bool kb_exists(const Common& common) {
  return is_postgres_url(common.kb_dir) || path_exists(fs::path(common.kb_dir) / "kb.sqlite");
}

std::string local_folder(const Common& common) {
  return is_postgres_url(common.kb_dir) ? common.local_dir : common.kb_dir;
}

// Writes a command's result to `path` atomically, or to standard output when `path` is empty; the exit code.
bool write_stdout(std::string_view text) {
  const size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 && written == text.size() && !std::ferror(stdout);
}

int write_output(const std::string& path, const std::string& text) {
  if (!path.empty() && path != "-") {
    if (auto w = write_file_atomic(path, text); !w) return report_error(w.error());
    return 0;
  }
  return write_stdout(text) ? 0 : report_error(Error{"cannot write to standard output"});
}

namespace {

// The heap a localize prepares for huge pages: the index's load fills ~30 MB at 100k cases at once.
constexpr size_t kLocalizeHeap = size_t{64} << 20;
// SPARK_HUGE_PAGES=0 leaves the heap on 4 KiB pages.
bool huge_pages_allowed() { return std::strtoll(environment_setting("SPARK_HUGE_PAGES").c_str(), nullptr, 10) != 0; }

}  // namespace

void keep_ranker_learning(const Common& common) {
  std::vector<std::string> notes;
  auto kb = open_kb(common, false);
  const Status learnt = kb ? learn_ranker_if_due(**kb, common.embedder, notes) : Status(std::unexpected(kb.error()));
  for (const auto& n : notes) note(n);
  if (!learnt) note("the ranker did not learn again (it stays as it was): " + learnt.error().message);
}

int cmd_import(const Common& common, const ImportArgs& args) {
  // Validate every file first: a bad file imports nothing, and neither does the command.
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(args.files, cases, origins); !s) return report_error(s.error());
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  auto summary = (*kb)->import_cases(cases, origins, args.replace);
  if (!summary) return report_error(summary.error());
  std::printf("imported %zu case(s) from %zu file(s) into %s: %zu new, %zu replaced, %zu unchanged\n", cases.size(),
              args.files.size(), (*kb)->name().c_str(), summary->added, summary->replaced, summary->unchanged);
  // Keep an existing index fresh: embed the new cases with its statistics.
  if (summary->replaced == 0 && summary->added > 0 && path_exists((*kb)->index_dir() / "manifest.json")) {
    std::vector<std::string> notes;
    auto caught_up = catch_up_index(**kb, common.embedder, notes);
    if (!caught_up) {
      note("the vector index was not updated: " + caught_up.error().message);
      return 0;
    }
    // The cases are committed: an index that could not be saved (a full disk) is caught up by the next command that
    // opens it, so the import has succeeded, and says so.
    if (caught_up->not_saved) {
      note("the " + std::to_string(summary->added) +
           " new case(s) are in the knowledge base; the vector index was not updated (" +
           caught_up->not_saved->message +
           "): the next `spark localize`, `spark record` or `spark index` catches it up");
      return 0;
    }
    for (const auto& n : notes) note(n);
    if (!caught_up->rebuilt)
      std::printf(
          "added %zu case(s) to the vector index (run `spark index --rebuild` now and then to refit its statistics)\n",
          caught_up->added);
    for (const auto& n : caught_up->learnt) note(n);
  } else if (summary->replaced > 0 && path_exists((*kb)->index_dir() / "manifest.json")) {
    note("cases were replaced: run `spark index --rebuild`");
  }
  return 0;
}

int cmd_export(const Common& common, const ExportArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  // --redact asks for redaction, so it applies the configured rules even where redaction is off for the LLM.
  std::shared_ptr<const Redactor> redactor;
  if (args.redact) {
    redactor = common.redactor;
    if (!redactor) {
      auto r = Redactor::make(common.redaction_rules);
      if (!r) return report_error(r.error());
      redactor = std::make_shared<const Redactor>(std::move(*r));
    }
  }
  std::map<std::string, size_t> counts;
  size_t redacted = 0, cases = 0;
  std::string out;
  auto s = (*kb)->for_each([&](int64_t, const Case& stored) -> Status {
    ++cases;
    if (redactor) {
      Case c = stored;
      redacted += redact_case(c, *redactor, counts);
      out += json_text(case_to_json(c));
    } else {
      out += json_text(case_to_json(stored));
    }
    out += '\n';
    if (args.output.empty() && out.size() > (1u << 20)) {
      if (!write_stdout(out)) return fail("cannot write to standard output");
      out.clear();
    }
    return {};
  });
  if (!s) return report_error(s.error());
  if (redactor) {
    std::string rules;
    for (const auto& [rule, n] : counts) rules += (rules.empty() ? "" : ", ") + rule + " " + std::to_string(n);
    note("redacted " + std::to_string(redacted) + " secret(s) in " + std::to_string(cases) + " case(s)" +
         (rules.empty() ? "" : " (" + rules + ")"));
  }
  if (args.output.empty()) return write_output("", out);
  if (auto w = write_file_atomic(args.output, out); !w) return report_error(w.error());
  return 0;
}

namespace {

void print_index_built(const IndexReport& report, double seconds) {
  std::printf("indexed %zu case(s) (%zu labelled) in %.2f s: %s index, embedder %s\n", report.cases, report.labelled,
              seconds, report.kind.c_str(), report.embedder.c_str());
  std::printf("ranker: %s\n", report.ranker.c_str());
  std::printf(
      "time: embedding %.2f s, index %.2f s, ranker %.2f s (%u thread(s); %zu test-code version(s), %zu distinct "
      "vector(s))\n",
      report.embed_seconds, report.index_seconds, report.train_seconds, report.threads, report.versions,
      report.vectors);
  if (report.recall_checked)
    std::printf(
        "hnsw check: the nearest case as similar as an exact search finds for %zu of %zu sampled case(s) (%.2f s)\n",
        report.recall_matched, report.recall_checked, report.recall_seconds);
}

}  // namespace

int cmd_index(const Common& common, const IndexArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  std::vector<std::string> notes;
  auto update = update_index(**kb, common.embedder, args.rebuild, notes);
  for (const auto& n : notes) note(n);
  if (!update) return report_error(update.error());
  switch (update->outcome) {
    case IndexUpdate::Outcome::up_to_date:
      std::printf(
          "the vector index in %s is up to date (%zu cases, %s; every file matches its checksum); use "
          "--rebuild to rebuild it\n",
          (*kb)->index_dir().c_str(), update->cases, update->kind.c_str());
      break;
    case IndexUpdate::Outcome::caught_up:
      std::printf(
          "added %zu case(s) to the vector index in %.2f s (%zu cases; the statistics are kept: "
          "`spark index --rebuild` refits them)\n",
          update->added, update->seconds, update->cases);
      for (const auto& n : update->learnt) note(n);
      break;
    case IndexUpdate::Outcome::built:
      print_index_built(update->report, update->seconds);
      break;
  }
  return 0;
}

namespace {

// The folder where parsed test-file versions persist between processes (StructureCache::persist_in); "" without a
// knowledge base.
fs::path structures_folder(const Common& common) {
  return kb_exists(common) ? fs::path(local_folder(common)) / "structures" : fs::path();
}

// The query of `spark localize --test FILE… --error FILE|-`: the failure output read from its file or standard input.
Result<Case> query_from_args(const Common& common, const LocalizeArgs& args) {
  TestFileFailure failure;
  failure.test_files = args.tests;
  failure.error_name = args.error;
  if (args.error == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    failure.error_text = ss.str();
  } else {
    auto m = read_file(args.error);
    TRY(m);
    failure.error_text = std::move(*m);
  }
  failure.test_id = args.test_id;
  failure.time = args.time;
  failure.structures = structures_folder(common);
  std::vector<std::string> notes;
  auto q = query_from_test_files(failure, notes);
  for (const auto& n : notes) note(n);
  return q;
}

}  // namespace

Status common_from_config(const Config& config, Common& common) {
  common.kb_dir = config.str("kb");
  common.kb_source = config.get("kb").source;
  common.local_dir = config.str("local_dir");
  common.embedder.kind = config.str("embedder.kind");
  common.embedder.openai.base_url = config.str("embedder.base_url");
  common.embedder.openai.model = config.str("embedder.model");
  common.embedder.openai.api_key = config.str("embedder.api_key");
  common.redaction_rules = config.redaction_rules();
  if (config.boolean("redact.enabled")) {
    auto r = Redactor::make(common.redaction_rules);
    if (!r) return std::unexpected(with_context(config.file() ? config.file()->string() + ": " : "", r.error()));
    common.redactor = std::make_shared<const Redactor>(std::move(*r));
  }
  common.embedder.openai.redactor = common.redactor;
  return {};
}

int cmd_config(const Config& config, bool markdown) {
  if (markdown) return write_output("", settings_markdown());
  const std::string out = terminal_lines(config.describe());  // values from a .spark.toml the repository holds
  return write_output("", out);
}

Status localize_from_config(const Config& config, LocalizeArgs& args) {
  LocalizeOptions& lo = args.localize;
  lo.k = static_cast<size_t>(config.integer("localize.k"));
  lo.epsilon = config.number("localize.epsilon");
  lo.r = static_cast<size_t>(config.integer("localize.r"));
  lo.similarity_floor = config.number("localize.similarity_floor");
  args.test_code = config.str("mine.test_code");
  if (lo.k < 1) return fail(config.get("localize.k").source + ": localize.k must be at least 1");
  if (lo.r < 1) return fail(config.get("localize.r").source + ": localize.r must be at least 1");
  if (const std::string level = config.str("localize.level"); !parse_level(level, lo.level))
    return fail(config.get("localize.level").source + ": unknown level \"" + level + "\"");
  auto policy = parse_policy(config.str("localize.policy"));
  if (!policy) return fail(config.get("localize.policy").source + ": " + policy.error().message);
  policy->window_fraction = lo.policy.window_fraction;
  policy->window = lo.policy.window;
  lo.policy = *policy;
  auto mode = parse_mode(config.str("llm.mode"));
  if (!mode) return fail(config.get("llm.mode").source + ": " + mode.error().message);
  args.stage.mode = *mode;
  args.template_path = config.str("llm.template");
  args.require_llm = config.boolean("llm.require");
  args.llm_deadline = config.number("llm.deadline");
  if (args.llm_deadline < 0)
    return fail(config.get("llm.deadline").source + ": llm.deadline must be 0 (none) or more seconds");
  lo.seed = static_cast<uint64_t>(config.integer("llm.seed"));
  args.stage.tokens = {static_cast<size_t>(std::max(256LL, config.integer("llm.context_tokens"))),
                       static_cast<size_t>(std::max(1LL, config.integer("llm.max_tokens")))};
  const std::string scope = config.str("llm.prompt_scope");
  if (scope != "file" && scope != "test")
    return fail(config.get("llm.prompt_scope").source + ": llm.prompt_scope is file or test, not \"" + scope + "\"");
  args.stage.test_scope_only = scope == "test";
  if (!config.is_set("llm.base_url")) {
    args.llm.reset();
    return {};
  }
  LlmOptions o;
  o.base_url = config.str("llm.base_url");
  if (!o.base_url.starts_with("http://") && !o.base_url.starts_with("https://"))
    return fail(config.get("llm.base_url").source + ": llm.base_url must start with http:// or https://, not \"" +
                o.base_url + "\"");
  o.model = config.str("llm.model");
  if (o.model.empty())
    return fail("llm.base_url is set (" + config.get("llm.base_url").source +
                ") but no model: set SPARK_LLM_MODEL, --model or llm.model");
  o.api_key = config.str("llm.api_key");
  o.temperature = config.number("llm.temperature");
  o.max_tokens = static_cast<int>(config.integer("llm.max_tokens"));
  if (config.is_set("llm.seed")) o.seed = config.integer("llm.seed");
  o.structured = config.boolean("llm.structured");
  o.concurrency = static_cast<size_t>(std::max(1LL, config.integer("llm.concurrency")));
  o.context_tokens = static_cast<size_t>(std::max(256LL, config.integer("llm.context_tokens")));
  o.http.connect_timeout_ms = static_cast<long>(config.number("llm.connect_timeout") * 1000);
  o.http.timeout_ms = static_cast<long>(config.number("llm.timeout") * 1000);
  o.retry.max_retries = static_cast<int>(config.integer("llm.retries"));
  o.retry.initial_delay_s = config.number("llm.retry_delay");
  if (o.max_tokens < 1) return fail(config.get("llm.max_tokens").source + ": llm.max_tokens must be at least 1");
  args.llm = o;
  return {};
}

int cmd_localize(const Common& common, const LocalizeArgs& args) {
  // Before the query is read and parsed: its allocations then come from huge pages too (src/base/huge_pages.h).
  prefer_huge_pages(kLocalizeHeap, huge_pages_allowed());
  // Missing arguments are usage errors (exit 2), like those the parser itself finds.
  std::string usage;
  if (!args.case_id.empty() && args.case_file.empty())
    usage = "--id needs --case";
  else if (!args.junit.empty() && (!args.case_file.empty() || !args.tests.empty()))
    usage = "--junit takes the failures from the report: not with --test or --case";
  else if (!args.junit.empty())
    usage = "";
  else if (args.case_file.empty() && args.tests.empty() && args.junit.empty())
    usage = "give the failing test's file with --test (or a cases file with --case [--id])";
  else if (args.case_file.empty() && args.junit.empty() && args.error.empty())
    usage = "give the failure output with --error FILE (or --error - for standard input)";
  if (!usage.empty()) return usage_error(usage);
  std::vector<Case> queries;
  if (!args.junit.empty()) {
    std::vector<std::string> notes;
    auto q = queries_from_junit(args.junit, args.root, args.test_id, notes);
    for (const auto& n : notes) note(n);
    if (!q) return report_error(q.error());
    if (q->empty()) {
      note(args.junit + ": no failed or erroring test to localize");
      if (args.format == "json") std::printf("[]\n");
      return 0;
    }
    queries = std::move(*q);
  } else if (!args.case_file.empty()) {
    auto q = queries_from_case_file(args.case_file, args.case_id);
    if (!q) return report_error(q.error());
    queries = std::move(*q);
  } else {
    auto q = query_from_args(common, args);
    if (!q) return report_error(q.error());
    queries.push_back(std::move(*q));
  }
  const bool batch = !args.junit.empty() || (!args.case_file.empty() && args.case_id.empty());
  return localize_queries(common, args, queries, batch);
}

namespace {

// --explain LINE or PATH:LINE; nullopt when it names no line.
std::optional<LineRef> explained_line(const std::string& explain) {
  const size_t colon = explain.rfind(':');
  const std::string number = colon == std::string::npos ? explain : explain.substr(colon + 1);
  char* end = nullptr;
  const long line = std::strtol(number.c_str(), &end, 10);
  if (number.empty() || *end != '\0' || line < 1 || line > std::numeric_limits<int>::max()) return std::nullopt;
  return LineRef{colon == std::string::npos ? "" : explain.substr(0, colon), static_cast<int>(line)};
}

// The LLM stage's settings: the flags' and the configuration's, the redactor, the template read and checked.
Result<LlmStageOptions> stage_options(const Common& common, const LocalizeArgs& args) {
  LlmStageOptions stage = args.stage;
  stage.redactor = common.redactor;
  if (!args.template_path.empty()) {
    auto t = read_file(args.template_path);
    TRY(t);
    TRY(check_template(*t, args.template_path));
    stage.template_text = std::move(*t);
  }
  return stage;
}

// What a localization retrieves from: the knowledge base and its engine (open_or_build_engine); neither without a
// knowledge base, and no engine when it holds no case.
struct Retrieval {
  std::unique_ptr<KnowledgeBase> kb;
  std::unique_ptr<SearchEngine> engine;
  bool ranker_retrained = false;  // the ranker learnt again before this run (saved with the index after it)
};

Result<Retrieval> open_retrieval(const Common& common, std::vector<std::string>& notes) {
  Retrieval r;
  if (!kb_exists(common)) {
    notes.push_back("no knowledge base at " + common.kb_dir);
    return r;
  }
  auto kb = open_kb(common, false);
  TRY(kb);
  r.kb = std::move(*kb);
  auto engine = open_or_build_engine(*r.kb, common.embedder, notes);
  TRY(engine);
  r.engine = std::move(*engine);
  if (r.engine) {
    // Labelled cases arrived since the ranker last learnt: it learns again before this run ranks (saved after it).
    r.ranker_retrained = keep_ranker_learning(*r.kb, *r.engine, notes);
    VectorIndex::search_on_this_thread();  // one query at a time: no OpenMP team per search
  }
  return r;
}

// The LLM client's options for this run: the run's deadline, and a line on stderr while it waits for answers.
LlmOptions run_llm_options(LlmOptions o, double deadline) {
  if (deadline > 0)
    o.retry.deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(deadline));
  // Every 10 s without an answer, or every tenth of a shorter deadline.
  if (deadline > 0) o.waiting_interval_s = std::min(10.0, std::max(0.2, deadline / 10));
  o.waiting = [endpoint = terminal_line(o.base_url), deadline](double waited, size_t done, size_t total) {
    std::string left;
    if (deadline > 0)
      left =
          ", the run's deadline in " + std::to_string(static_cast<long long>(std::max(0.0, deadline - waited))) + " s";
    std::fprintf(stderr, "spark: waiting for the LLM at %s: %lld s, %zu of %zu answered%s\n", endpoint.c_str(),
                 static_cast<long long>(waited), done, total, left.c_str());
  };
  return o;
}

// The LLM stage's progress on stderr (runs of two failures or more): a counter on a terminal, a line per ten
// otherwise.
std::function<void(size_t, size_t)> llm_progress() {
  const bool interactive = ::isatty(STDERR_FILENO);
  return [interactive](size_t done, size_t total) {
    if (total < 2) return;
    if (interactive)
      std::fprintf(stderr, "\rspark: LLM %zu/%zu", done, total);
    else if (done == total || done % 10 == 0)
      std::fprintf(stderr, "spark: LLM %zu/%zu\n", done, total);
    if (interactive && done == total) std::fprintf(stderr, "\n");
  };
}

// Cases learned since the index was built were embedded for this run: keep them, and a ranker learnt again, so no
// manual `spark index` is needed (the embedder's statistics are refitted only by `spark index --rebuild`).
void keep_what_the_run_learnt(Retrieval& r, std::vector<std::string>& notes) {
  if (!r.engine || (r.engine->added_since_load() == 0 && !r.ranker_retrained)) return;
  if (auto s = r.engine->persist(*r.kb); !s)
    notes.push_back("the vector index was not updated: " + s.error().message);
  else if (r.engine->added_since_load() > 0)
    notes.push_back("kept them in the vector index");
}

// Prints the run's report (report_run) in args.format: its errors and notes on stderr, the report on stdout, and the
// SARIF report to --sarif-output; the exit code.
int print_run(const Common& common, const LocalizeArgs& args, const std::vector<Case>& queries,
              const std::vector<Result<Localization>>& results, const LocalizeOptions& options, bool batch,
              bool llm_asked) {
  const ReportContext ctx{options.policy.name, options.level, options.k, options.epsilon, SPARK_VERSION};
  RunReportOptions shown;
  shown.format = args.format;
  shown.sarif = !args.sarif_output.empty();
  shown.markdown = !args.markdown_output.empty();
  shown.batch = batch;
  shown.color = args.color == "always" || (args.color == "auto" && ::isatty(STDOUT_FILENO));
  shown.show_annotated = args.show_annotated;
  shown.keep_prompt = args.stage.keep_prompt;
  shown.wants_llm = args.stage.mode != Mode::builtin;
  shown.llm_asked = llm_asked;
  shown.require_llm = args.require_llm;
  shown.redactor = common.redactor.get();
  const RunReport report = report_run(queries, results, ctx, shown);
  for (const RunMessage& m : report.messages)
    if (m.error)
      report_error(Error{m.text});
    else
      note(m.text);
  if (!args.sarif_output.empty() && !report.sarif.empty())
    if (auto w = write_file_atomic(args.sarif_output, report.sarif); !w) return report_error(w.error());
  if (!args.markdown_output.empty())
    if (auto w = write_file_atomic(args.markdown_output, report.markdown); !w) return report_error(w.error());
  if (report.llm_failed && args.require_llm)
    return report_error(Error{"--require-llm: the LLM could not be used (see above)"});
  if (!write_stdout(report.out)) return report_error(Error{"cannot write to standard output"});
  return report.failed ? 1 : 0;
}

}  // namespace

// The steps of a localization: its settings, the knowledge base and engine it retrieves from, the LLM client, the
// run (localizer/llm_stage.h), what it learnt kept, and the report.
int localize_queries(const Common& common, const LocalizeArgs& args, const std::vector<Case>& queries, bool batch) {
  // The index's load fills ~30 MB at 100k cases at once: on huge pages where the kernel offers them
  // (src/base/huge_pages.h).
  prefer_huge_pages(kLocalizeHeap, huge_pages_allowed());
  LocalizeOptions options = args.localize;
  if (!args.explain.empty()) {
    const auto line = explained_line(args.explain);
    if (!line)
      return usage_error("--explain \"" + args.explain +
                         "\": give a line number (12) or a path and line (tests/t.py:12)");
    options.explain = *line;
  }
  auto stage = stage_options(common, args);
  if (!stage) return report_error(stage.error());
  const bool wants_llm = stage->mode != Mode::builtin;
  if (wants_llm && !args.llm && args.require_llm)
    return report_error(
        Error{"--require-llm: no LLM configured (set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL, or llm.base_url and "
              "llm.model in .spark.toml)"});
  std::vector<std::string> notes;
  auto retrieval = open_retrieval(common, notes);
  if (!retrieval) return report_error(retrieval.error());

  Localizer localizer(retrieval->kb.get(), retrieval->engine.get());
  std::optional<LlmClient> client;
  if (args.llm && wants_llm) client.emplace(run_llm_options(*args.llm, args.llm_deadline));
  StructureCache cache;
  if (retrieval->engine) {
    // Parsed test-file versions persist in the local folder: a later process localizing a failure of a version it
    // has seen reads its structure instead of parsing the file again.
    const fs::path structures = structures_folder(common);
    retrieval->engine->structures().persist_in(structures);
    cache.persist_in(structures);
  }
  LlmStage llm_stage(localizer, cache, client ? &*client : nullptr, std::move(*stage));
  auto results = llm_stage.run(queries, options, llm_progress());
  add_triage(retrieval->kb.get(), TriageContext{args.root, args.commit, args.test_code}, queries, results, notes);
  keep_what_the_run_learnt(*retrieval, notes);
  for (const auto& n : notes) note(n);
  return print_run(common, args, queries, results, options, batch, client.has_value());
}

namespace {

std::string duration_text(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
  return buf;
}

}  // namespace

namespace {

// The settings of the evaluation from the command line; 0, or the exit code of a usage error (said on stderr).
int eval_settings(const EvalArgs& args, EvalOptions& options, std::vector<std::pair<EvalMode, EvalMode>>& compare) {
  options.modes.clear();
  for (const auto& m : args.modes) {
    auto mode = EvalMode::parse(m);
    if (!mode) return usage_error("--mode: " + mode.error().message);
    options.modes.push_back(*mode);
  }
  options.ks = args.ks;
  std::sort(options.ks.begin(), options.ks.end());
  options.ks.erase(std::unique(options.ks.begin(), options.ks.end()), options.ks.end());
  options.levels.clear();
  for (const auto& l : args.levels) {
    Level level;
    if (!parse_level(l, level))
      return usage_error("--level: unknown level \"" + l + "\" (known: line, statement, block, function)");
    options.levels.push_back(level);
  }
  options.policies = args.policies;
  for (const auto& p : options.policies)
    if (auto ok = parse_policy(p); !ok) return report_error(ok.error());
  options.epsilons = args.epsilons;
  options.rs = args.rs;
  options.window_fraction = args.window_fraction;
  options.similarity_floor = args.similarity_floor;
  options.seed = args.llm.localize.seed;
  for (const auto& c : args.compare) {
    const auto colon = c.find(':');
    if (colon == std::string::npos) return usage_error("--compare " + c + ": give two modes as A:B");
    auto a = EvalMode::parse(c.substr(0, colon));
    auto b = a ? EvalMode::parse(c.substr(colon + 1)) : a;
    if (!b) return usage_error("--compare " + c + ": " + b.error().message);
    compare.push_back({*a, *b});
  }

  return 0;
}

// The LLM stage of the evaluation: a client with the answer cache when a mode needs one, the prompt settings.
Status eval_llm(const Common& common, const EvalArgs& args, EvalOptions& options, std::optional<LlmClient>& client,
                std::unique_ptr<AnswerCache>& cache) {
  bool needs_llm = false;
  for (const EvalMode& m : options.modes) needs_llm = needs_llm || m.needs_llm();
  if (needs_llm) {
    if (!args.llm.llm)
      return fail(
          "the LLM modes need an LLM: set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL "
          "(or llm.base_url and llm.model in .spark.toml, or --llm-url and --model)");
    client.emplace(*args.llm.llm);
    const std::string cache_path =
        args.cache.empty() ? (fs::path(local_folder(common)) / "llm-answers.sqlite").string() : args.cache;
    auto c = AnswerCache::open(cache_path);
    TRY(c);
    cache = std::move(*c);
    client->set_cache(cache.get());
    options.client = &*client;
    note("LLM answers are cached in " + cache_path + " (a re-run or a resumed run asks only for what is missing)");
  }
  options.stage.redactor = common.redactor;
  options.stage.tokens = args.llm.stage.tokens;
  options.stage.test_scope_only = args.llm.stage.test_scope_only;
  if (!args.llm.template_path.empty()) {
    auto t = read_file(args.llm.template_path);
    TRY(t);
    if (auto s = check_template(*t, args.llm.template_path); !s) return s;
    options.stage.template_text = std::move(*t);
  }

  return {};
}

// The knowledge base the evaluation retrieves from: the one given with --kb, or a temporary one of the corpora with
// its index (its folder in `temp`, which the caller removes).
Result<std::unique_ptr<KnowledgeBase>> eval_knowledge_base(const Common& common, const EvalArgs& args,
                                                           const std::vector<Case>& cases,
                                                           const std::vector<CaseOrigin>& origins, fs::path& temp) {
  std::unique_ptr<KnowledgeBase> kb;
  if (args.use_kb) {
    auto opened = open_kb(common, false);
    TRY(opened);
    return std::move(*opened);
  }
  temp = temp_folder() / ("spark-eval-" + std::to_string(::getpid()));
  std::error_code ignored;
  fs::remove_all(temp, ignored);
  auto opened = KnowledgeBase::open(temp, true);
  TRY(opened);
  kb = std::move(*opened);
  TRY(kb->import_cases(cases, origins, false));
  note("indexing " + std::to_string(cases.size()) + " case(s) into a temporary knowledge base");
  TRY(build_index(*kb, common.embedder, IndexBuildOptions{}));
  return kb;
}

// Progress on stderr: a bar on a terminal, a line per tenth otherwise (CI logs).
std::function<void(const std::string&, size_t, size_t)> eval_progress() {
  const bool tty = ::isatty(STDERR_FILENO);
  std::string current;
  auto started = std::chrono::steady_clock::now();
  size_t last_tenth = 0;
  return [=](const std::string& label, size_t done, size_t total) mutable {
    if (label != current) {
      if (tty && !current.empty()) std::fprintf(stderr, "\n");
      current = label;
      started = std::chrono::steady_clock::now();
      last_tenth = 0;
    }
    const double elapsed = seconds_since(started);
    const double eta = done ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    const size_t tenth = total ? done * 10 / total : 10;
    if (tty) {
      std::string bar(20, ' ');
      for (size_t i = 0; i < 20 * done / std::max<size_t>(1, total); ++i) bar[i] = '=';
      std::fprintf(stderr, "\rspark eval: %s [%s] %zu/%zu ETA %s   ", label.c_str(), bar.c_str(), done, total,
                   duration_text(eta).c_str());
      if (done == total) std::fprintf(stderr, "\n");
    } else if (tenth > last_tenth || done == total) {
      last_tenth = tenth;
      std::fprintf(stderr, "spark eval: %s %zu/%zu ETA %s\n", label.c_str(), done, total, duration_text(eta).c_str());
    }
  };
}

// The HTML report (--html). It shows the cases' code and is meant to be shared: made from redacted copies unless
// redaction is off.
Status write_eval_html(const Common& common, const EvalArgs& args, const EvalReport& report,
                       const Evaluation& evaluation, const std::vector<Case>& cases) {
  std::vector<Case> shown;
  if (common.redactor) {
    shown = cases;
    std::map<std::string, size_t> counts;
    size_t n = 0;
    for (auto& c : shown) n += redact_case(c, *common.redactor, counts);
    if (n) note("redacted " + std::to_string(n) + " secret(s) from the HTML report");
  }
  auto page = render_html(report, evaluation, common.redactor ? shown : cases);
  TRY(page);
  if (auto w = write_file_atomic(args.html, *page); !w) return w;
  note("wrote " + args.html);
  return {};
}

}  // namespace

int cmd_eval(const Common& common, const EvalArgs& args) {
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(args.corpora, cases, origins); !s) return report_error(s.error());
  // Ids must be unique across the corpora: they name the cases in the reports.
  std::set<std::string> ids;
  for (size_t i = 0; i < cases.size(); ++i)
    if (!ids.insert(cases[i].id).second)
      return report_error(Error{origins[i].where + ": case id \"" + cases[i].id + "\" appears twice"});

  EvalOptions options;
  std::vector<std::pair<EvalMode, EvalMode>> compare;
  if (int code = eval_settings(args, options, compare); code != 0) return code;
  std::optional<LlmClient> client;
  std::unique_ptr<AnswerCache> cache;
  if (auto s = eval_llm(common, args, options, client, cache); !s) return report_error(s.error());

  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup;
  auto kb = eval_knowledge_base(common, args, cases, origins, cleanup.dir);
  if (!kb) return report_error(kb.error());
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, common.embedder, notes);
  if (!engine) return report_error(engine.error());
  for (const auto& n : notes) note(n);

  options.progress = eval_progress();
  auto evaluation = run_evaluation(**kb, **engine, cases, options);
  if (!evaluation) return report_error(evaluation.error());
  if (cache)
    note("LLM answer cache: " + std::to_string(cache->hits()) + " answer(s) reused, " +
         std::to_string(cache->stores()) + " new");
  EvalReport report = make_report(*evaluation, cases, compare);
  report.command = args.command_line;
  const std::string out = args.format == "json"  ? render_json(report, *evaluation)
                          : args.format == "csv" ? render_csv(report)
                                                 : render_markdown(report);
  if (!args.html.empty())
    if (auto s = write_eval_html(common, args, report, *evaluation, cases); !s) return report_error(s.error());
  note("evaluated " + std::to_string(evaluation->cases.size()) + " labelled case(s) in " +
       duration_text(evaluation->seconds) + " (" +
       std::to_string(static_cast<int>(static_cast<double>(evaluation->cases.size() * evaluation->runs.size()) /
                                       std::max(1e-9, evaluation->seconds))) +
       " case-settings/s)");
  // Markdown and CSV on the terminal hold the corpus's project names: printed as every untrusted text is.
  const bool terminal = args.format != "json" && (args.output.empty() || args.output == "-");
  return write_output(args.output, terminal ? terminal_lines(out) : out);
}

}  // namespace spark::cli
