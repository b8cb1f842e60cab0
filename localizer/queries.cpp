#include "localizer/queries.h"

#include <algorithm>

#include "base/text.h"
#include "code/scope.h"
#include "code/structure_cache.h"
#include "formats/error_message.h"
#include "formats/junit.h"
#include "miner/git_history.h"
#include "miner/miner.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

size_t line_of_offset(std::string_view text, size_t offset) {
  size_t line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

std::string normalize_path(std::string p) {
  while (p.starts_with("./")) p.erase(0, 2);
  return p;
}

void hide_labels(Case& c) {
  c.faulty_lines.clear();  // a query: its labels are hidden from the localizer
  c.record.erase("faulty_lines");
  c.record.erase("meta");  // meta may hold the answer; the localizer never reads it
}

// pytest's terminal output as the error (its `___ test ___` sections): the one failure of the test file (or of
// `test_id`) becomes the message, and its node id the test id when none is given. Returns that id ("" when the text is
// not terminal output or its summary names no id); an error when no section is the test file's.
Result<std::string> pick_output_section(std::string& message, const std::string& error_name,
                                        const std::string& test_path, const std::string& test_id,
                                        std::vector<std::string>& notes) {
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
    return fail(error_name + ": pytest's output has no failure of " + (test_id.empty() ? test_path : test_id) +
                " (it has " + titles + ")");
  }
  const size_t others = sections.size() - 1;
  if (others > 0)
    notes.push_back(error_name + ": pytest's output holds " + std::to_string(sections.size()) +
                    " failures; localizing " + (it->test_id.empty() ? it->title : it->test_id) +
                    " (--test-id picks another; `spark localize --junit` localizes every failure of a JUnit report)");
  message = std::move(it->text);
  return it->test_id;
}

// The test id of a query given none: from the traceback, the deepest frame in the test file names the function; its
// class comes from the code (through the persisted structures: the localize that follows reads this parse).
std::string test_id_from_traceback(const Case& q, const fs::path& structures) {
  const std::string& path = q.files.front().path;
  std::string function;
  int stop_line = 0;
  for (const auto& fr : parse_traceback(failure_text(q.error_message)))
    if (same_file(fr.path, path) && !fr.function.empty()) {
      function = fr.function;
      stop_line = fr.line;
    }
  const Language language = language_for(path, q.language);
  if (language != Language::python && language != Language::other && stop_line > 0) {
    StructureCache cache(1);
    return test_id_at(*cache.get(q.files.front().content, path, q.language), q.files.front().content, path,
                      stop_line);
  }
  if (function.empty()) return path;
  StructureCache cache(1);
  if (!structures.empty()) cache.persist_in(structures);
  const auto& s = *cache.get(q.files.front().content, q.files.front().path);
  std::string cls;
  for (const auto& f : s.functions)
    if (f.name == function) {
      cls = f.class_name;
      break;
    }
  return path + (cls.empty() ? "" : "::" + cls) + "::" + function;
}

}  // namespace

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

Result<Case> query_from_test_files(const TestFileFailure& failure, std::vector<std::string>& notes) {
  Case q;
  for (const auto& t : failure.test_files) {
    auto content = read_test_file(t);
    TRY(content);
    q.files.push_back({normalize_path(t), std::move(*content)});
  }
  std::string message = failure.error_text;
  if (auto bad = find_invalid_utf8(message)) {
    // Runner output may carry stray bytes; they are replaced (U+FFFD), not fatal: the message is evidence, not code.
    notes.push_back(failure.error_name + ": invalid UTF-8 at byte " + std::to_string(*bad) +
                    "; replaced with U+FFFD");
    message = sanitize_utf8(message);
  }
  q.error_message = std::move(message);
  auto picked = pick_output_section(q.error_message, failure.error_name, q.files.front().path, failure.test_id, notes);
  TRY(picked);
  if (!picked->empty()) q.test_id = *picked;
  cap_error_message(q.error_message);  // the localization's notes say so (the line that notes the cut)
  q.id = "query";
  q.language = q.files.empty() ? "python" : language_field_for(q.files.front().path);
  q.project = "";
  if (failure.time.empty()) {
    q.failure_epoch = now_epoch();
    q.failure_time = format_iso8601(q.failure_epoch);
  } else {
    auto epoch = parse_iso8601(failure.time);
    if (!epoch) return fail("--time: " + epoch.error().message);
    q.failure_time = failure.time;
    q.failure_epoch = *epoch;
  }
  if (!failure.test_id.empty()) q.test_id = failure.test_id;
  if (q.test_id.empty()) q.test_id = test_id_from_traceback(q, failure.structures);
  return q;
}

Result<std::vector<Case>> queries_from_case_file(const std::string& file, const std::string& id) {
  auto cases = read_cases_jsonl(file);
  TRY(cases);
  std::vector<Case> out;
  for (auto& c : cases->cases)
    if (id.empty() || c.id == id) {
      hide_labels(c);
      out.push_back(std::move(c));
    }
  if (out.empty()) return fail(file + (id.empty() ? ": no cases" : ": no case with id \"" + id + "\""));
  return out;
}

std::string default_junit_root(const std::string& report) {
  auto repo = GitRepository::open(".");
  if (!repo) return ".";
  std::error_code ec;
  const fs::path top = (*repo)->workdir();
  if (fs::equivalent(top, fs::current_path(ec), ec)) return ".";
  const auto found = [&](const fs::path& root) {
    auto read = read_junit(report, files_under(root));
    if (!read) return size_t{0};
    return static_cast<size_t>(std::count_if(read->outcomes.begin(), read->outcomes.end(), [](const TestOutcome& o) {
      return (o.outcome == Outcome::failed || o.outcome == Outcome::error) && !o.file.empty();
    }));
  };
  return found(top) > found(".") ? top.string() : ".";
}

Result<std::vector<Case>> queries_from_junit(const std::string& junit, const std::string& root,
                                             const std::string& test_id, std::vector<std::string>& notes) {
  const TestFiles under_root = files_under(root);
  auto report = read_junit(junit, under_root);
  TRY(report);
  for (const auto& w : report->warnings) notes.push_back(w);
  std::vector<Case> out;
  if (!test_id.empty()) {
    // --test-id: that test's failure only, and an error naming what the report holds when it has none.
    std::string failing;
    size_t failures = 0;
    const TestOutcome* named = nullptr;
    for (const auto& o : report->outcomes) {
      if (o.test_id == test_id) named = &o;
      if (o.outcome != Outcome::failed && o.outcome != Outcome::error) continue;
      if (++failures <= 5) failing += (failing.empty() ? "" : ", ") + o.test_id;
    }
    if (!named)
      return fail(junit + ": no test \"" + test_id + "\" in the report (its failures: " +
                  (failing.empty() ? "none" : failing + (failures > 5 ? ", …" : "")) + ")");
    if (named->outcome != Outcome::failed && named->outcome != Outcome::error)
      return fail(junit + ":" + std::to_string(named->report_line) + ": " + test_id + " " +
                  std::string(outcome_name(named->outcome)) + " there: nothing to localize");
  }
  const auto read_under_root = [&](const std::string& p) -> std::optional<std::string> {
    auto full = inside_root(root, p);
    if (!full) return std::nullopt;
    auto content = read_test_file(full->string());
    return content ? std::optional<std::string>(std::move(*content)) : std::nullopt;
  };
  for (const auto& o : report->outcomes) {
    if (o.outcome != Outcome::failed && o.outcome != Outcome::error) continue;
    if (!test_id.empty() && o.test_id != test_id) continue;
    const std::string where = junit + ":" + std::to_string(o.report_line) + ": " + o.test_id;
    if (o.file.empty()) {
      notes.push_back(where + ": its test file is not in " + root + "; not localized");
      continue;
    }
    std::vector<SourceFile> files;
    bool ok = true;
    std::vector<std::string> paths = failure_paths(o.test_id, o.message, &under_root);
    // With the Python test code the test depends on (the default `mine.test_code`): its conftest.py files and the
    // helper modules it imports, whose fixtures and functions it reaches are ranked as its set-up.
    for (auto& p : dependency_paths(paths.front(), read_under_root, TestCodeRule(), &under_root))
      if (language_of_path(p) == Language::python && std::find(paths.begin(), paths.end(), p) == paths.end())
        paths.push_back(std::move(p));
    for (const auto& p : paths) {
      auto full = inside_root(root, p);
      if (!full) continue;
      auto content = read_test_file(full->string());
      if (!content) {
        if (p == o.file) {
          notes.push_back(where + ": " + content.error().message + "; not localized");
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

namespace {

// A failure's files as recorded: the test's own files (failure_paths under the default rule), then the Python test
// code it depends on under `test_code`. From the sync's snapshot when it read them under the default rule (the same
// reads), else from git objects.
std::vector<SourceFile> recorded_files(const GitRepository& repo, const std::string& commit, const RecordedOutcome& o,
                                       const TestCodeRule& test_code, const FailureSnapshot* snapshot) {
  const auto python_dependencies = [](std::vector<SourceFile>& files, std::vector<SourceFile>& more) {
    for (auto& f : more)
      if (language_of_path(f.path) == Language::python &&
          std::none_of(files.begin(), files.end(), [&](const SourceFile& g) { return g.path == f.path; }))
        files.push_back(std::move(f));
  };
  if (snapshot && test_code.globs() == TestCodeRule().globs()) {
    std::vector<SourceFile> files(snapshot->files.begin(), snapshot->files.begin() + snapshot->own);
    if (files.empty()) return files;
    std::vector<SourceFile> more(snapshot->files.begin() + snapshot->own, snapshot->files.end());
    python_dependencies(files, more);
    return files;
  }
  auto files = failure_files(repo, commit, o.test_id, o.message);
  if (files.empty()) return files;
  auto more = failure_files(repo, commit, o.test_id, o.message, nullptr, &test_code);
  python_dependencies(files, more);
  return files;
}

}  // namespace

std::vector<Case> recorded_queries(const GitRepository& repo, const std::string& commit,
                                   const std::vector<RecordedOutcome>& outcomes, const TestCodeRule& test_code,
                                   const std::vector<FailureSnapshot>& snapshots, std::vector<std::string>& notes) {
  std::vector<const FailureSnapshot*> snapshot_of(outcomes.size(), nullptr);
  for (const auto& s : snapshots)
    if (s.outcome < outcomes.size() && s.own <= s.files.size()) snapshot_of[s.outcome] = &s;
  std::vector<Case> queries;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const RecordedOutcome& o = outcomes[i];
    if (o.outcome != Outcome::failed && o.outcome != Outcome::error) continue;
    // With the Python test code the test depends on (conftest.py files, imported helper modules): the fixtures and
    // functions it reaches are ranked as its set-up.
    auto files = recorded_files(repo, commit, o, test_code, snapshot_of[i]);
    if (files.empty() ||
        !same_file(parse_test_id(o.test_id, language_of_test_id(o.test_id)).path, files.front().path)) {
      notes.push_back(o.origin + ": " + o.test_id + ": its test file is not in commit " + commit.substr(0, 10) +
                      "; not localized");
      continue;
    }
    // The limits `localize --test` and `import` hold test files to (a test file past them costs what they bound).
    if (const auto big = std::find_if(files.begin(), files.end(),
                                      [](const SourceFile& f) { return !test_file_too_large(f.content).empty(); });
        big != files.end()) {
      notes.push_back(o.origin + ": " + o.test_id + ": " + big->path + ": " + test_file_too_large(big->content) +
                      "; recorded, not localized");
      continue;
    }
    if (const auto language = language_of_path(files.front().path);
        (language == Language::python || language == Language::java) && o.test_id.ends_with(']')) {
      const auto rows = match_param_rows(analyze_code(files.front().content, *language, files.front().path),
                                         files.front().content, o.test_id);
      if (!rows.note.empty()) notes.push_back(o.origin + ": " + rows.note);
    }
    queries.push_back(failure_query(o.test_id, o.message, o.time, std::move(files)));
  }
  return queries;
}

}  // namespace spark
