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

#include "base/text.h"
#include "code/structure_cache.h"
#include "code/test_scope.h"
#include "eval/eval_report.h"
#include "eval/evaluation.h"
#include "formats/error_message.h"
#include "formats/junit.h"
#include "index_build.h"
#include "llm/answer_cache.h"
#include "llm_stage.h"
#include "mining_store.h"
#include "prompt.h"
#include "report.h"
#include "store/knowledge_base.h"

namespace spark::cli {

namespace fs = std::filesystem;

// Messages quote what spark read (test ids, reports, a server's answer): printed through terminal_lines, so no
// control character or workflow command in them reaches a terminal or a CI log (base/text.h).
int report_error(const Error& e) {
  std::fprintf(stderr, "spark: error: %s\n", terminal_lines(e.message).c_str());
  return 1;
}

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
  if (const fs::path own = local_folder(common); create && !path_exists(own))
    if (auto s = make_spark_folder(own); !s) return std::unexpected(s.error());
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

// The embedder an index in `dir` was made with when an older built-in one ("builtin-tfidf-v1"), else "" (none, another
// kind, or the current one).
std::string outdated_embedder(const fs::path& dir) {
  if (!path_exists(dir / "manifest.json")) return "";
  auto m = VectorIndex::read_manifest(dir);
  if (!m || !HashedTfidfEmbedder::is_outdated(m->embedder)) return "";
  return m->embedder.substr(0, m->embedder.find('/'));
}

// The heap a localize prepares for huge pages: the index's load fills ~30 MB at 100k cases at once.
constexpr size_t kLocalizeHeap = size_t{64} << 20;

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

namespace {

// "learns at 20 labelled cases" (a prior ranker), "learns again at 25 labelled cases".
std::string learns_next(const RankerModel& m) {
  return std::string(m.origin == "prior" ? "learns at " : "learns again at ") +
         std::to_string(next_training_at(m.labelled_cases, IndexBuildOptions{})) + " labelled cases";
}

// The note a retraining leaves: from how many labelled cases it learnt (or that it kept the prior), what it replaced,
// how long it took, and when it learns next.
std::string retrain_note(const RetrainReport& r) {
  const RankerModel& m = r.now;
  if (m.origin == "prior")
    return "ranker: kept its prior weights at " + std::to_string(m.labelled_cases) + " labelled cases (fewer than " +
           std::to_string(TrainingOptions{}.min_training_cases) + " have a faulty line and others to learn from); it " +
           learns_next(m);
  return "ranker retrained on " + std::to_string(m.training_cases) + " labelled cases (was " + r.was + ") in " +
         seconds_text(m.train_seconds) + "; it " + learns_next(m);
}

// Whether open_or_rebuild built the index again (its note is then in `notes`): an engine opened on an index it had to
// catch up added cases since its load, and says so in a note of its own; a rebuilt one added none.
bool rebuilt(const SearchEngine& engine, const std::vector<std::string>& notes) {
  return engine.added_since_load() == 0 && !notes.empty();
}

Status learn_if_due(const Common& common, KnowledgeBase& kb) {
  // A cheap look first: the ranker's schedule against the store's count of cases (labelled or not).
  auto ranker = load_saved_ranker(kb.index_dir());
  if (ranker && !*ranker) return {};  // no index yet: the first localize or `spark index` builds it, ranker included
  auto count = kb.count();
  if (!count) return std::unexpected(count.error());
  if (ranker && *count < next_training_at((*ranker)->labelled_cases, IndexBuildOptions{})) return {};
  std::vector<std::string> opening, learnt;
  auto engine = open_or_rebuild(kb, common.embedder, opening, /*verify_vectors=*/false);
  if (!engine) return std::unexpected(engine.error());
  if (rebuilt(**engine, opening))
    for (const auto& n : opening) note(n);
  // The cases embedded on the way (added since the index was saved) are kept with the new ranker.
  if (keep_ranker_learning(kb, **engine, learnt))
    if (auto s = (*engine)->persist(kb); !s) return s;
  for (const auto& n : learnt) note(n);
  return {};
}

}  // namespace

bool keep_ranker_learning(KnowledgeBase& kb, SearchEngine& engine, std::vector<std::string>& notes) {
  auto retrained = retrain_ranker_if_due(kb, engine);
  if (!retrained) {
    notes.push_back("the ranker did not learn again (it stays as it was): " + retrained.error().message);
    return false;
  }
  if (!*retrained) return false;
  notes.push_back(retrain_note(**retrained));
  return true;
}

void keep_ranker_learning(const Common& common) {
  auto kb = open_kb(common, false);
  const Status learnt = kb ? learn_if_due(common, **kb) : Status(std::unexpected(kb.error()));
  if (!learnt) note("the ranker did not learn again (it stays as it was): " + learnt.error().message);
}

std::string ranker_status(KnowledgeBase& kb) {
  auto ranker = load_saved_ranker(kb.index_dir());
  if (!ranker) return "unreadable: " + ranker.error().message;
  if (!*ranker) return "";
  const RankerModel& m = **ranker;
  auto entries = kb.entries();
  const size_t now = entries ? static_cast<size_t>(std::count_if(entries->begin(), entries->end(),
                                                                 [](const CaseEntry& e) { return e.labelled; }))
                             : 0;
  const std::string when = m.trained_at > 0 ? format_iso8601(m.trained_at) + " in " + seconds_text(m.train_seconds)
                                            : "at a time not recorded (an earlier spark)";
  const std::string learnt = m.origin == "prior" ? "prior weights (last tried at " : m.origin + " (learnt at ";
  return learnt + std::to_string(m.labelled_cases) + " labelled cases, " + when + "); " + learns_next(m) + " (now " +
         std::to_string(now) + ")";
}

std::string language_field_for(const std::string& path) { return std::string(language_name(language_for(path, ""))); }

Result<std::string> read_test_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text;
  end_lone_carriage_returns(*text);
  if (auto why = test_file_too_large(*text); !why.empty()) return fail(path + ": " + why);
  if (text->find('\0') != std::string::npos)
    return fail(path + ":" + std::to_string(line_of_offset(*text, text->find('\0'))) +
                ": contains a NUL byte: a binary file, not test code");
  if (auto bad = find_invalid_utf8(*text))
    return fail(path + ":" + std::to_string(line_of_offset(*text, *bad)) + ": invalid UTF-8 at byte " +
                std::to_string(*bad) + " (spark reads test code as UTF-8; convert the file, e.g. with iconv)");
  return text;
}

Case failure_query(const std::string& test_id, const std::string& message, std::optional<int64_t> time,
                   std::vector<SourceFile> files) {
  Case q;
  q.id = test_id;
  q.test_id = test_id;
  q.language = files.empty() ? "python" : language_field_for(files.front().path);
  q.error_message = sanitize_utf8(message);
  q.failure_epoch = time.value_or(now_epoch());
  q.failure_time = format_iso8601(q.failure_epoch);
  q.files = std::move(files);
  return q;
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
    auto engine = open_or_rebuild(**kb, common.embedder, notes);
    if (!engine) {
      note("the vector index was not updated: " + engine.error().message);
    } else {
      std::vector<std::string> learnt;
      keep_ranker_learning(**kb, **engine, learnt);
      // The cases are committed: an index that could not be saved (a full disk) is caught up by the next command
      // that opens it, so the import has succeeded, and says so.
      if (auto s = (*engine)->persist(**kb); !s) {
        note("the " + std::to_string(summary->added) +
             " new case(s) are in the knowledge base; the vector index was not updated (" + s.error().message +
             "): the next `spark localize`, `spark record` or `spark index` catches it up");
        return 0;
      }
      if (rebuilt(**engine, notes))
        for (const auto& n : notes) note(n);
      else
        std::printf(
            "added %zu case(s) to the vector index (run `spark index --rebuild` now and then to refit its "
            "statistics)\n",
            (*engine)->added_since_load());
      for (const auto& n : learnt) note(n);
    }
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

int cmd_index(const Common& common, const IndexArgs& args) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  const fs::path manifest = (*kb)->index_dir() / "manifest.json";
  if (const std::string outdated = outdated_embedder((*kb)->index_dir()); !args.rebuild && !outdated.empty())
    note("the vector index was made by an older embedder (" + outdated + "): rebuilding it");
  else if (!args.rebuild && path_exists(manifest)) {
    auto m = VectorIndex::read_manifest((*kb)->index_dir());
    auto g = (*kb)->generation();
    if (m && g && m->generation == *g &&
        (common.embedder.kind.empty() ||
         m->embedder.starts_with(common.embedder.kind == "openai" ? "openai/" : "builtin"))) {
      // Queries map the vectors unverified (their size and header only): here every file's checksum is checked.
      auto verified = VectorIndex::load((*kb)->index_dir(), VectorIndexOptions{});
      if (verified) {
        keep_ranker_learning(common);
        std::printf(
            "the vector index in %s is up to date (%zu cases, %s; every file matches its checksum); use "
            "--rebuild to rebuild it\n",
            (*kb)->index_dir().c_str(), m->count, m->kind.c_str());
        return 0;
      }
      note("rebuilding the vector index: " + verified.error().message);
      m = std::unexpected(verified.error());
    }
    // Stale by cases added since (an import interrupted before its index update, records from other tools): embed
    // those with the index's statistics and add them. A full build when cases were removed or replaced, when the
    // embedder changed, or when the added cases exceed a quarter of the indexed ones (statistics and ranker stale).
    auto count = (*kb)->count();
    if (m && g && count && *count >= m->count && *count - m->count <= std::max<size_t>(1, m->count / 4)) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::string> notes;
      auto engine = SearchEngine::open(**kb, common.embedder, notes);
      if (engine) {
        std::vector<std::string> learnt;
        keep_ranker_learning(**kb, **engine, learnt);
        if (auto s = (*engine)->persist(**kb); !s) return report_error(s.error());
        const double secs = seconds_since(t0);
        std::printf(
            "added %zu case(s) to the vector index in %.2f s (%zu cases; the statistics are kept: "
            "`spark index --rebuild` refits them)\n",
            (*engine)->added_since_load(), secs, (*engine)->index().size());
        for (const auto& n : learnt) note(n);
        return 0;
      }
      note("rebuilding the vector index: " + engine.error().message);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto report = build_index(**kb, common.embedder, IndexBuildOptions{});
  if (!report) return report_error(report.error());
  const double secs = seconds_since(t0);
  std::printf("indexed %zu case(s) (%zu labelled) in %.2f s: %s index, embedder %s\n", report->cases, report->labelled,
              secs, report->kind.c_str(), report->embedder.c_str());
  std::printf("ranker: %s\n", report->ranker.c_str());
  std::printf(
      "time: embedding %.2f s, index %.2f s, ranker %.2f s (%u thread(s); %zu test-code version(s), %zu distinct "
      "vector(s))\n",
      report->embed_seconds, report->index_seconds, report->train_seconds, report->threads, report->versions,
      report->vectors);
  if (report->recall_checked)
    std::printf(
        "hnsw check: the nearest case as similar as an exact search finds for %zu of %zu sampled case(s) (%.2f s)\n",
        report->recall_matched, report->recall_checked, report->recall_seconds);
  return 0;
}

namespace {

void hide_labels(Case& c) {
  c.faulty_lines.clear();  // a query: its labels are hidden from the localizer
  c.record.erase("faulty_lines");
  c.record.erase("meta");  // meta may hold the answer; the localizer never reads it
}

Result<std::vector<Case>> queries_from_case_file(const LocalizeArgs& args) {
  auto cases = read_cases_jsonl(args.case_file);
  if (!cases) return std::unexpected(cases.error());
  std::vector<Case> out;
  for (auto& c : cases->cases)
    if (args.case_id.empty() || c.id == args.case_id) {
      hide_labels(c);
      out.push_back(std::move(c));
    }
  if (out.empty())
    return fail(args.case_file + (args.case_id.empty() ? ": no cases" : ": no case with id \"" + args.case_id + "\""));
  return out;
}

// Every failed or erroring test of a JUnit report, with its test file (and the repository's other test files its
// traceback names) read from the repository root; nothing outside the root is read.
Result<std::vector<Case>> queries_from_junit(const LocalizeArgs& args) {
  const TestFiles under_root = files_under(args.root);
  auto report = read_junit(args.junit, under_root);
  if (!report) return std::unexpected(report.error());
  for (const auto& w : report->warnings) note(w);
  std::vector<Case> out;
  for (const auto& o : report->outcomes) {
    if (o.outcome != Outcome::failed && o.outcome != Outcome::error) continue;
    const std::string where = args.junit + ":" + std::to_string(o.report_line) + ": " + o.test_id;
    if (o.file.empty()) {
      note(where + ": its test file is not in " + args.root + "; not localized");
      continue;
    }
    std::vector<SourceFile> files;
    bool ok = true;
    std::vector<std::string> paths = failure_paths(o.test_id, o.message, &under_root);
    // With the Python test code the test depends on (the default `mine.test_code`): its conftest.py files and the
    // helper modules it imports, whose fixtures and functions it reaches are ranked as its set-up.
    const auto read_under_root = [&](const std::string& p) -> std::optional<std::string> {
      auto full = inside_root(args.root, p);
      if (!full) return std::nullopt;
      auto content = read_test_file(full->string());
      return content ? std::optional<std::string>(std::move(*content)) : std::nullopt;
    };
    for (auto& p : dependency_paths(paths.front(), read_under_root, TestCodeRule(), &under_root))
      if (language_of_path(p) == Language::python && std::find(paths.begin(), paths.end(), p) == paths.end())
        paths.push_back(std::move(p));
    for (const auto& p : paths) {
      auto full = inside_root(args.root, p);
      if (!full) continue;
      auto content = read_test_file(full->string());
      if (!content) {
        if (p == o.file) {
          note(where + ": " + content.error().message + "; not localized");
          ok = false;
          break;
        }
        continue;
      }
      files.push_back({p, std::move(*content)});
    }
    if (ok) out.push_back(failure_query(o.test_id, o.message, o.time, std::move(files)));
  }
  return out;
}

// The folder where parsed test-file versions persist between processes (StructureCache::persist_in); "" without a
// knowledge base.
fs::path structures_folder(const Common& common) {
  return kb_exists(common) ? fs::path(local_folder(common)) / "structures" : fs::path();
}

// pytest's terminal output as the error (its `___ test ___` sections): the one failure of the test file (or of
// --test-id) becomes the message, and its node id the test id when --test-id gives none. Returns that id ("" when
// the text is not terminal output or its summary names no id); an error when no section is the test file's.
Result<std::string> pick_output_section(std::string& message, const std::string& error_file,
                                        const std::string& test_path, const std::string& test_id) {
  auto sections = split_test_output(message);
  if (sections.empty()) return std::string();
  const auto of_test = [&](const OutputSection& s) {
    if (!test_id.empty()) return s.test_id == test_id;
    if (!s.test_id.empty()) return same_file(parse_test_id(s.test_id).path, test_path);
    for (const auto& fr : parse_traceback(failure_text(s.text)))
      if (same_file(fr.path, test_path)) return true;
    return false;
  };
  const auto it = std::find_if(sections.begin(), sections.end(), of_test);
  if (it == sections.end()) {
    std::string titles;
    for (const auto& s : sections) titles += (titles.empty() ? "" : ", ") + (s.test_id.empty() ? s.title : s.test_id);
    return fail(error_file + ": pytest's output has no failure of " + (test_id.empty() ? test_path : test_id) +
                " (it has " + titles + ")");
  }
  const size_t others = sections.size() - 1;
  if (others > 0)
    note(error_file + ": pytest's output holds " + std::to_string(sections.size()) + " failures; localizing " +
         (it->test_id.empty() ? it->title : it->test_id) +
         " (--test-id picks another; `spark localize --junit` localizes every failure of a JUnit report)");
  message = std::move(it->text);
  return it->test_id;
}

Result<Case> query_from_args(const Common& common, const LocalizeArgs& args) {
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
  if (auto picked = pick_output_section(q.error_message, args.error, q.files.front().path, args.test_id); !picked)
    return std::unexpected(picked.error());
  else if (!picked->empty())
    q.test_id = *picked;
  cap_error_message(q.error_message);  // the localization's notes say so (the line that notes the cut)
  q.id = "query";
  q.language = q.files.empty() ? "python" : language_field_for(q.files.front().path);
  q.project = "";
  if (args.time.empty()) {
    q.failure_epoch = now_epoch();
    q.failure_time = format_iso8601(q.failure_epoch);
  } else {
    auto epoch = parse_iso8601(args.time);
    if (!epoch) return fail("--time: " + epoch.error().message);
    q.failure_time = args.time;
    q.failure_epoch = *epoch;
  }
  if (!args.test_id.empty()) q.test_id = args.test_id;
  if (q.test_id.empty()) {
    // From the traceback: the deepest frame in the test file names the function; its class comes from the code.
    const std::string& path = q.files.front().path;
    std::string function;
    int stop_line = 0;
    for (const auto& fr : parse_traceback(failure_text(q.error_message)))
      if (same_file(fr.path, path) && !fr.function.empty()) {
        function = fr.function;
        stop_line = fr.line;
      }
    q.test_id = path;
    const Language language = language_for(path, q.language);
    if (language != Language::python && language != Language::other && stop_line > 0) {
      StructureCache cache(1);
      q.test_id =
          test_id_at(*cache.get(q.files.front().content, path, q.language), q.files.front().content, path, stop_line);
    } else if (!function.empty()) {
      // Through the persisted structures: the localize that follows reads this parse instead of making its own.
      StructureCache cache(1);
      if (const fs::path dir = structures_folder(common); !dir.empty()) cache.persist_in(dir);
      const auto& s = *cache.get(q.files.front().content, q.files.front().path);
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

int cmd_config(const Config& config) {
  const std::string out = terminal_lines(config.describe());  // values from a .spark.toml the repository holds
  return write_output("", out);
}

Status localize_from_config(const Config& config, LocalizeArgs& args) {
  LocalizeOptions& lo = args.localize;
  lo.k = static_cast<size_t>(config.integer("localize.k"));
  lo.epsilon = config.number("localize.epsilon");
  lo.r = static_cast<size_t>(config.integer("localize.r"));
  lo.similarity_floor = config.number("localize.similarity_floor");
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
  args.stage.context_tokens = static_cast<size_t>(std::max(256LL, config.integer("llm.context_tokens")));
  args.stage.answer_tokens = static_cast<size_t>(std::max(1LL, config.integer("llm.max_tokens")));
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
  prefer_huge_pages(kLocalizeHeap);
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
  if (!usage.empty()) {
    std::fprintf(stderr, "spark: error: %s\n", usage.c_str());
    return 2;
  }
  std::vector<Case> queries;
  if (!args.junit.empty()) {
    auto q = queries_from_junit(args);
    if (!q) return report_error(q.error());
    if (q->empty()) {
      note(args.junit + ": no failed or erroring test to localize");
      if (args.format == "json") std::printf("[]\n");
      return 0;
    }
    queries = std::move(*q);
  } else if (!args.case_file.empty()) {
    auto q = queries_from_case_file(args);
    if (!q) return report_error(q.error());
    queries = std::move(*q);
  } else {
    auto q = query_from_args(common, args);
    if (!q) return report_error(q.error());
    queries.push_back(std::move(*q));
  }
  const bool batch = !args.junit.empty() || (!args.case_file.empty() && args.case_id.empty());
  return localize_queries(common, args, std::move(queries), batch);
}

int localize_queries(const Common& common, const LocalizeArgs& args, std::vector<Case> queries, bool batch) {
  // The index's load fills ~30 MB at 100k cases at once: on huge pages where the kernel offers them
  // (src/base/huge_pages.h).
  prefer_huge_pages(kLocalizeHeap);
  LocalizeOptions options = args.localize;
  if (!args.explain.empty()) {
    const size_t colon = args.explain.rfind(':');
    const std::string number = colon == std::string::npos ? args.explain : args.explain.substr(colon + 1);
    char* end = nullptr;
    const long line = std::strtol(number.c_str(), &end, 10);
    if (number.empty() || *end != '\0' || line < 1 || line > std::numeric_limits<int>::max()) {
      std::fprintf(stderr,
                   "spark: error: --explain \"%s\": give a line number (12) or a path and line (tests/t.py:12)\n",
                   args.explain.c_str());
      return 2;
    }
    options.explain = LineRef{colon == std::string::npos ? "" : args.explain.substr(0, colon), static_cast<int>(line)};
  }

  LlmStageOptions stage = args.stage;
  stage.redactor = common.redactor;
  if (!args.template_path.empty()) {
    auto t = read_file(args.template_path);
    if (!t) return report_error(t.error());
    if (auto s = check_template(*t, args.template_path); !s) return report_error(s.error());
    stage.template_text = std::move(*t);
  }
  const bool wants_llm = stage.mode != Mode::builtin;
  if (wants_llm && !args.llm && args.require_llm) {
    std::fprintf(stderr,
                 "spark: error: --require-llm: no LLM configured (set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL, "
                 "or llm.base_url and llm.model in .spark.toml)\n");
    return 1;
  }

  std::vector<std::string> notes;
  std::unique_ptr<KnowledgeBase> kb;
  std::unique_ptr<SearchEngine> engine;
  bool ranker_retrained = false;
  if (kb_exists(common)) {
    auto opened = open_kb(common, false);
    if (!opened) return report_error(opened.error());
    kb = std::move(*opened);
    auto any = kb->has_cases();
    if (!any) return report_error(any.error());
    if (*any) {
      // No index yet (the first case was just learned, say by `spark record`), or one an older built-in embedder
      // made: build it, as `spark index` would.
      const std::string outdated = outdated_embedder(kb->index_dir());
      if (!path_exists(kb->index_dir() / "manifest.json") || !outdated.empty()) {
        auto built = build_index(*kb, common.embedder, IndexBuildOptions{});
        if (!built) return report_error(built.error());
        auto count = kb->count();
        if (!count) return report_error(count.error());
        notes.push_back((outdated.empty() ? "the knowledge base had no vector index: built it over "
                                          : "the vector index was made by an older embedder (" + outdated +
                                                "): rebuilt it over ") +
                        std::to_string(*count) + " case(s), as `spark index` does");
      }
      // A query maps the vectors and reads the pages its search touches (`spark index` verifies every byte).
      // An index holding cases the store no longer has (the store went back) is built again first.
      auto e = open_or_rebuild(*kb, common.embedder, notes, /*verify_vectors=*/false);
      // A `spark index` in another process may have replaced the index between reading its manifest and its files
      // (old files go once the new manifest is in place): a second look reads the new one.
      if (!e) e = open_or_rebuild(*kb, common.embedder, notes, /*verify_vectors=*/false);
      if (!e)
        return report_error(Error{e.error().message + " (the vector index in " + kb->index_dir().string() +
                                  " is damaged or incomplete: `spark index --rebuild` makes it again from the store)"});
      engine = std::move(*e);
      // Labelled cases arrived since the ranker last learnt: it learns again before this run ranks (saved below).
      ranker_retrained = keep_ranker_learning(*kb, *engine, notes);
      VectorIndex::search_on_this_thread();  // one query at a time: no OpenMP team per search
    }
  } else {
    notes.push_back("no knowledge base at " + common.kb_dir);
  }
  Localizer localizer(kb.get(), engine.get());
  std::optional<LlmClient> client;
  if (args.llm && wants_llm) {
    LlmOptions o = *args.llm;
    if (args.llm_deadline > 0)
      o.retry.deadline =
          std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::duration<double>(args.llm_deadline));
    const double deadline = args.llm_deadline;
    // Every 10 s without an answer, or every tenth of a shorter deadline.
    if (deadline > 0) o.waiting_interval_s = std::min(10.0, std::max(0.2, deadline / 10));
    o.waiting = [endpoint = terminal_line(o.base_url), deadline](double waited, size_t done, size_t total) {
      std::string left;
      if (deadline > 0)
        left = ", the run's deadline in " + std::to_string(static_cast<long long>(std::max(0.0, deadline - waited))) +
               " s";
      std::fprintf(stderr, "spark: waiting for the LLM at %s: %lld s, %zu of %zu answered%s\n", endpoint.c_str(),
                   static_cast<long long>(waited), done, total, left.c_str());
    };
    client.emplace(std::move(o));
  }
  StructureCache cache;
  if (engine) {
    // Parsed test-file versions persist in the local folder: a later process localizing a failure of a version it
    // has seen reads its structure instead of parsing the file again.
    const fs::path structures = structures_folder(common);
    engine->structures().persist_in(structures);
    cache.persist_in(structures);
  }
  LlmStage llm_stage(localizer, cache, client ? &*client : nullptr, stage);
  const bool interactive = ::isatty(STDERR_FILENO);
  const auto progress = [&](size_t done, size_t total) {
    if (total < 2) return;
    if (interactive)
      std::fprintf(stderr, "\rspark: LLM %zu/%zu", done, total);
    else if (done == total || done % 10 == 0)
      std::fprintf(stderr, "spark: LLM %zu/%zu\n", done, total);
    if (interactive && done == total) std::fprintf(stderr, "\n");
  };
  auto results = llm_stage.run(queries, options, progress);
  // Cases learned since the index was built were embedded for this run: keep them, and a ranker learnt again, so
  // no manual `spark index` is needed (the embedder's statistics are refitted only by `spark index --rebuild`).
  if (engine && (engine->added_since_load() > 0 || ranker_retrained)) {
    if (auto s = engine->persist(*kb); !s)
      notes.push_back("the vector index was not updated: " + s.error().message);
    else if (engine->added_since_load() > 0)
      notes.push_back("kept them in the vector index");
  }

  for (const auto& n : notes) note(n);
  ReportContext ctx{options.policy.name, options.level, options.k, options.epsilon, SPARK_VERSION};
  std::string out;
  int status = 0;
  bool llm_failed = false;
  nlohmann::json sarif;
  nlohmann::json json_all = nlohmann::json::array();
  std::vector<Localization> annotated;  // --format github: the run's localizations, as published
  const bool color = args.color == "always" || (args.color == "auto" && ::isatty(STDOUT_FILENO));
  // A note several failures share (no labelled case yet, no similar case) is said once, with their count.
  std::map<std::string, size_t> shared_notes;
  for (const auto& r : results)
    if (r)
      for (const auto& n : std::set<std::string>(r->notes.begin(), r->notes.end())) ++shared_notes[n];
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string who = queries.size() > 1 ? queries[i].id + ": " : "";
    if (!results[i]) {
      status = report_error(Error{who + results[i].error().message});
      continue;
    }
    const Localization& r = *results[i];
    for (const auto& n : r.notes) {
      auto count = shared_notes.find(n);
      if (count != shared_notes.end() && count->second == 0) continue;  // said already
      const std::string whose = count != shared_notes.end() && count->second > 1
                                    ? std::to_string(count->second) + " failures: "
                                    : who;
      if (count != shared_notes.end()) count->second = 0;
      // With --require-llm a failed LLM is an error, not a fallback: the note says what failed, not what ranked.
      constexpr std::string_view fallback = ": ranked by spark's built-in ranker";
      if (args.require_llm && client && n.ends_with(fallback))
        note(whose + n.substr(0, n.size() - fallback.size()));
      else
        note(whose + n);
    }
    if (!r.ranked.empty() && r.ranker.find("prior") != std::string::npos && i == 0)
      note("ranker: built-in, prior weights (the knowledge base has too few labelled cases to learn from)");
    if (!client && i == 0)
      note(wants_llm ? "no LLM configured: ranked by spark's built-in ranker"
                     : "mode builtin: ranked by spark's built-in ranker");
    if (r.llm && client && !r.llm->used) llm_failed = true;
    if (r.llm && !r.llm->redactions.empty() && i == 0) {
      size_t n = 0;
      for (const auto& [rule, count] : r.llm->redactions) n += count;
      note(who + "redacted " + std::to_string(n) + " secret(s) from the prompt");
    }
    if (args.format == "json") {
      json_all.push_back(nlohmann::json::parse(report_json(r, ctx)));
    }
    // SARIF and annotations leave the machine by design (code scanning, the pull request's page): made from a
    // redacted copy unless redaction is off.
    std::optional<Localization> published;
    const auto shared = [&]() -> const Localization& {
      if (!common.redactor) return r;
      if (!published) {
        published = r;
        std::map<std::string, size_t> counts;
        if (const size_t n = redact_localization(*published, queries[i], *common.redactor, counts))
          note(who + "redacted " + std::to_string(n) + " secret(s) from the " +
               (args.format == "github"
                    ? (args.sarif_output.empty() ? "annotations" : "annotations and the SARIF report")
                    : "SARIF report"));
      }
      return *published;
    };
    if (args.format == "sarif" || !args.sarif_output.empty()) {
      auto doc = nlohmann::json::parse(report_sarif(shared(), ctx));
      if (sarif.is_null())
        sarif = std::move(doc);
      else
        for (auto& res : doc["runs"][0]["results"]) sarif["runs"][0]["results"].push_back(std::move(res));
    }
    if (args.format == "github") {
      annotated.push_back(shared());  // annotated as one run, below
    } else if (args.format == "text") {
      if (queries.size() > 1)
        out += (i ? "\n" : "") + std::string("== ") + terminal_line(queries[i].id) +
               (queries[i].id == queries[i].test_id ? "" : " (" + terminal_line(queries[i].test_id) + ")") + "\n";
      out += report_text(r, ctx, color);
      if (args.show_annotated)
        out += "\nannotated test code (as a model would see it):\n" +
               terminal_lines(Localizer::render_annotated(queries[i], r.annotations));
      if (args.stage.keep_prompt && r.llm) out += "\nprompt:\n" + terminal_lines(r.llm->prompt) + "\n";
    }
  }
  // Many failures (--junit, --case without --id, spark record) always give an array, even of one.
  if (args.format == "json")
    out = (batch ? json_text(json_all, 2) : json_all.empty() ? std::string("null") : json_text(json_all[0], 2)) + "\n";
  if (args.format == "github") out = report_github(annotated, ctx);
  if (args.format == "sarif" && !sarif.is_null()) out = json_text(sarif, 2) + "\n";
  if (!args.sarif_output.empty() && !sarif.is_null())
    if (auto w = write_file_atomic(args.sarif_output, json_text(sarif, 2) + "\n"); !w) return report_error(w.error());
  if (llm_failed && args.require_llm) {
    std::fprintf(stderr, "spark: error: --require-llm: the LLM could not be used (see above)\n");
    return 1;
  }
  if (!write_stdout(out)) return report_error(Error{"cannot write to standard output"});
  return status;
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
    if (!mode) {
      std::fprintf(stderr, "spark: error: --mode: %s\n", mode.error().message.c_str());
      return 2;
    }
    options.modes.push_back(*mode);
  }
  options.ks = args.ks;
  std::sort(options.ks.begin(), options.ks.end());
  options.ks.erase(std::unique(options.ks.begin(), options.ks.end()), options.ks.end());
  options.levels.clear();
  for (const auto& l : args.levels) {
    Level level;
    if (!parse_level(l, level)) {
      std::fprintf(stderr, "spark: error: --level: unknown level \"%s\" (known: line, statement, block, function)\n",
                   l.c_str());
      return 2;
    }
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
    if (colon == std::string::npos) {
      std::fprintf(stderr, "spark: error: --compare %s: give two modes as A:B\n", c.c_str());
      return 2;
    }
    auto a = EvalMode::parse(c.substr(0, colon));
    auto b = a ? EvalMode::parse(c.substr(colon + 1)) : a;
    if (!b) {
      std::fprintf(stderr, "spark: error: --compare %s: %s\n", c.c_str(), b.error().message.c_str());
      return 2;
    }
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
    if (!c) return std::unexpected(c.error());
    cache = std::move(*c);
    client->set_cache(cache.get());
    options.client = &*client;
    note("LLM answers are cached in " + cache_path + " (a re-run or a resumed run asks only for what is missing)");
  }
  options.stage.redactor = common.redactor;
  options.stage.context_tokens = args.llm.stage.context_tokens;
  options.stage.answer_tokens = args.llm.stage.answer_tokens;
  options.stage.test_scope_only = args.llm.stage.test_scope_only;
  if (!args.llm.template_path.empty()) {
    auto t = read_file(args.llm.template_path);
    if (!t) return std::unexpected(t.error());
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
    if (!opened) return std::unexpected(opened.error());
    return std::move(*opened);
  }
  temp = temp_folder() / ("spark-eval-" + std::to_string(::getpid()));
  std::error_code ignored;
  fs::remove_all(temp, ignored);
  auto opened = KnowledgeBase::open(temp, true);
  if (!opened) return std::unexpected(opened.error());
  kb = std::move(*opened);
  if (auto s = kb->import_cases(cases, origins, false); !s) return std::unexpected(s.error());
  note("indexing " + std::to_string(cases.size()) + " case(s) into a temporary knowledge base");
  if (auto r = build_index(*kb, common.embedder, IndexBuildOptions{}); !r) return std::unexpected(r.error());
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
  if (!page) return std::unexpected(page.error());
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
