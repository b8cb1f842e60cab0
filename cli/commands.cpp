#include "commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "error_message.h"
#include "knowledge_base.h"
#include "report.h"
#include "test_scope.h"
#include "text.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

int report_error(const Error& e) {
  std::fprintf(stderr, "spark: error: %s\n", e.message.c_str());
  return 1;
}

void note(const std::string& message) { std::fprintf(stderr, "spark: %s\n", message.c_str()); }

Result<std::unique_ptr<KnowledgeBase>> open_kb(const Common& common, bool create) {
  return KnowledgeBase::open(common.kb_dir, create);
}

size_t line_of_offset(std::string_view text, size_t offset) {
  size_t line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

std::string normalize_path(std::string p) {
  while (p.starts_with("./")) p.erase(0, 2);
  return p;
}

}  // namespace

Result<std::string> read_test_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text;
  if (text->find('\0') != std::string::npos)
    return fail(path + ":" + std::to_string(line_of_offset(*text, text->find('\0'))) +
                ": contains a NUL byte: a binary file, not Python test code");
  if (auto bad = find_invalid_utf8(*text))
    return fail(path + ":" + std::to_string(line_of_offset(*text, *bad)) + ": invalid UTF-8 at byte " +
                std::to_string(*bad) + " (spark reads test code as UTF-8; convert the file, e.g. with iconv)");
  return text;
}

int cmd_import(const Common& common, const ImportArgs& args) {
  // Validate every file first: a bad file imports nothing, and neither does the command.
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  for (const auto& file : args.files) {
    auto read = read_cases_jsonl(file);
    if (!read) return report_error(read.error());
    for (size_t i = 0; i < read->cases.size(); ++i) {
      origins.push_back({file + ":" + std::to_string(read->lines[i])});
      cases.push_back(std::move(read->cases[i]));
    }
  }
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  auto summary = (*kb)->import_cases(cases, origins, args.replace);
  if (!summary) return report_error(summary.error());
  std::printf("imported %zu case(s) from %zu file(s) into %s: %zu new, %zu replaced, %zu unchanged\n", cases.size(),
              args.files.size(), (*kb)->db_path().c_str(), summary->added, summary->replaced, summary->unchanged);
  // Keep an existing index fresh: embed the new cases with its statistics.
  if (summary->replaced == 0 && summary->added > 0 && fs::exists((*kb)->index_dir() / "manifest.json")) {
    std::vector<std::string> notes;
    auto engine = SearchEngine::open(**kb, common.embedder, notes);
    if (!engine) {
      note("the vector index was not updated: " + engine.error().message);
    } else if (auto s = (*engine)->persist(**kb); !s) {
      return report_error(s.error());
    } else {
      std::printf("added %zu case(s) to the vector index (run `spark index --rebuild` now and then to refit its "
                  "statistics and the ranker)\n", (*engine)->added_since_load());
    }
  } else if (summary->replaced > 0 && fs::exists((*kb)->index_dir() / "manifest.json")) {
    note("cases were replaced: run `spark index --rebuild`");
  }
  return 0;
}

int cmd_export(const Common& common, const ExportArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  std::string out;
  auto s = (*kb)->for_each([&](int64_t, const Case& c) -> Status {
    out += case_to_json(c).dump();
    out += '\n';
    if (args.output.empty() && out.size() > (1u << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
    return {};
  });
  if (!s) return report_error(s.error());
  if (args.output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : report_error(Error{"cannot write to standard output"});
  }
  if (auto w = write_file_atomic(args.output, out); !w) return report_error(w.error());
  return 0;
}

int cmd_index(const Common& common, const IndexArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  const fs::path manifest = (*kb)->index_dir() / "manifest.json";
  if (!args.rebuild && fs::exists(manifest)) {
    auto m = VectorIndex::read_manifest((*kb)->index_dir());
    auto g = (*kb)->generation();
    if (m && g && m->generation == *g && (common.embedder.kind.empty() || m->embedder.starts_with(common.embedder.kind == "openai" ? "openai/" : "builtin"))) {
      std::printf("the vector index in %s is up to date (%zu cases, %s); use --rebuild to rebuild it\n",
                  (*kb)->index_dir().c_str(), m->count, m->kind.c_str());
      return 0;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto report = build_index(**kb, common.embedder, IndexBuildOptions{});
  if (!report) return report_error(report.error());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("indexed %zu case(s) (%zu labelled) in %.2f s: %s index, embedder %s\n", report->cases, report->labelled,
              secs, report->kind.c_str(), report->embedder.c_str());
  std::printf("ranker: %s\n", report->ranker.c_str());
  std::printf("time: embedding %.2f s, index %.2f s, ranker %.2f s\n", report->embed_seconds, report->index_seconds, report->train_seconds);
  return 0;
}

namespace {

Result<Case> query_from_args(const LocalizeArgs& args) {
  if (!args.case_file.empty()) {
    auto cases = read_cases_jsonl(args.case_file);
    if (!cases) return std::unexpected(cases.error());
    for (auto& c : cases->cases)
      if (c.id == args.case_id) {
        c.faulty_lines.clear();  // a query: its labels are hidden from the localizer
        c.record.erase("faulty_lines");
        c.record.erase("meta");  // meta may hold the answer; the localizer never reads it
        return std::move(c);
      }
    return fail(args.case_file + ": no case with id \"" + args.case_id + "\"");
  }
  Case q;
  for (const auto& t : args.tests) {
    auto content = read_test_file(t);
    if (!content) return std::unexpected(content.error());
    q.files.push_back({normalize_path(t), std::move(*content)});
  }
  std::string message;
  if (args.error == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    message = ss.str();
  } else {
    auto m = read_file(args.error);
    if (!m) return std::unexpected(m.error());
    message = std::move(*m);
  }
  if (auto bad = find_invalid_utf8(message)) {
    // Runner output may carry stray bytes; they are replaced (U+FFFD), not fatal: the message is evidence, not code.
    note(args.error + ": invalid UTF-8 at byte " + std::to_string(*bad) + "; replaced with U+FFFD");
    message = sanitize_utf8(message);
  }
  q.error_message = std::move(message);
  q.id = "query";
  q.language = "python";
  q.project = "";
  if (args.time.empty()) {
    q.failure_epoch = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
    q.failure_time = format_iso8601(q.failure_epoch);
  } else {
    auto epoch = parse_iso8601(args.time);
    if (!epoch) return fail("--time: " + epoch.error().message);
    q.failure_time = args.time;
    q.failure_epoch = *epoch;
  }
  q.test_id = args.test_id;
  if (q.test_id.empty()) {
    // From the traceback: the deepest frame in the test file names the function; its class comes from the code.
    const std::string& path = q.files.front().path;
    std::string function;
    for (const auto& fr : parse_traceback(q.error_message))
      if (same_file(fr.path, path) && !fr.function.empty()) function = fr.function;
    q.test_id = path;
    if (!function.empty()) {
      const auto s = analyze_python(q.files.front().content);
      std::string cls;
      for (const auto& f : s.functions)
        if (f.name == function) {
          cls = f.class_name;
          break;
        }
      q.test_id += (cls.empty() ? "" : "::" + cls) + "::" + function;
    }
  }
  return q;
}

}  // namespace

int cmd_localize(const Common& common, const LocalizeArgs& args) {
  // Missing arguments are usage errors (exit 2), like those the parser itself finds.
  std::string usage;
  if (!args.case_file.empty() && args.case_id.empty()) usage = "--case needs --id";
  else if (args.case_file.empty() && args.tests.empty())
    usage = "give the failing test's file with --test (or a case with --case and --id)";
  else if (args.case_file.empty() && args.error.empty())
    usage = "give the failure output with --error FILE (or --error - for standard input)";
  if (!usage.empty()) {
    std::fprintf(stderr, "spark: error: %s\n", usage.c_str());
    return 2;
  }
  auto query = query_from_args(args);
  if (!query) return report_error(query.error());
  LocalizeOptions options;
  auto policy = parse_policy(args.policy);
  if (!policy) return report_error(policy.error());
  options.policy = *policy;
  options.policy.window_fraction = args.window_fraction;
  options.policy.window = args.window;
  options.r = args.r;
  options.epsilon = args.epsilon;
  options.k = args.k;
  options.similarity_floor = args.similarity_floor;
  parse_level(args.level, options.level);

  std::vector<std::string> notes;
  std::unique_ptr<KnowledgeBase> kb;
  std::unique_ptr<SearchEngine> engine;
  if (fs::exists(fs::path(common.kb_dir) / "kb.sqlite")) {
    auto opened = open_kb(common, false);
    if (!opened) return report_error(opened.error());
    kb = std::move(*opened);
    auto count = kb->count();
    if (!count) return report_error(count.error());
    if (*count > 0) {
      auto e = SearchEngine::open(*kb, common.embedder, notes);
      if (!e) return report_error(e.error());
      engine = std::move(*e);
    }
  } else {
    notes.push_back("no knowledge base at " + common.kb_dir);
  }
  Localizer localizer(kb.get(), engine.get());
  auto result = localizer.localize(*query, options);
  if (!result) return report_error(result.error());
  for (const auto& n : notes) note(n);
  for (const auto& n : result->notes) note(n);
  if (!result->ranked.empty() && result->ranker.find("prior") != std::string::npos)
    note("ranker: built-in, prior weights (the knowledge base has too few labelled cases to learn from)");
  note("no LLM configured: ranked by spark's built-in ranker");

  ReportContext ctx{options.policy.name, options.level, options.k, options.epsilon, SPARK_VERSION};
  std::string out;
  if (args.format == "json") out = report_json(*result, ctx);
  else if (args.format == "sarif") out = report_sarif(*result, ctx);
  else if (args.format == "github") out = report_github(*result, ctx);
  else {
    const bool color = args.color == "always" || (args.color == "auto" && ::isatty(STDOUT_FILENO));
    out = report_text(*result, ctx, color);
    if (args.show_annotated) out += "\nannotated test code (as a model would see it):\n" +
                                    Localizer::render_annotated(*query, result->annotations);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace spark::cli
