// A run's report: the formats of report.h for several failures at once, and the notes said beside them.
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "localizer/report.h"

namespace spark {

using nlohmann::json;

namespace {

// A note several failures share (no labelled case yet, no similar case) is said once, with their count.
std::map<std::string, size_t> count_shared_notes(const std::vector<Result<Localization>>& results) {
  std::map<std::string, size_t> shared;
  for (const auto& r : results)
    if (r)
      for (const auto& n : std::set<std::string>(r->notes.begin(), r->notes.end())) ++shared[n];
  return shared;
}

// The notes of failure `i` (`who` names it in a run of several), and those the first failure says for the run.
void say_notes(const Localization& r, size_t i, const std::string& who, std::map<std::string, size_t>& shared,
               const RunReportOptions& options, std::vector<RunMessage>& said) {
  const auto note = [&](const std::string& text) { said.push_back({false, text}); };
  for (const auto& n : r.notes) {
    auto count = shared.find(n);
    if (count != shared.end() && count->second == 0) continue;  // said already
    const std::string whose =
        count != shared.end() && count->second > 1 ? std::to_string(count->second) + " failures: " : who;
    if (count != shared.end()) count->second = 0;
    // With --require-llm a failed LLM is an error, not a fallback: the note says what failed, not what ranked.
    constexpr std::string_view fallback = ": ranked by spark's built-in ranker";
    if (options.require_llm && options.llm_asked && n.ends_with(fallback))
      note(whose + n.substr(0, n.size() - fallback.size()));
    else
      note(whose + n);
  }
  if (!r.ranked.empty() && r.ranker.find("prior") != std::string::npos && i == 0)
    note("ranker: built-in, prior weights (the knowledge base has too few labelled cases to learn from)");
  if (!options.llm_asked && i == 0)
    note(options.wants_llm ? "no LLM configured: ranked by spark's built-in ranker"
                           : "mode builtin: ranked by spark's built-in ranker");
  if (r.llm && !r.llm->redactions.empty() && i == 0) {
    size_t n = 0;
    for (const auto& [rule, count] : r.llm->redactions) n += count;
    note(who + "redacted " + std::to_string(n) + " secret(s) from the prompt");
  }
}

// What leaves the machine by design in this run: "annotations, the Markdown summary and the SARIF report".
std::string published_what(const RunReportOptions& options) {
  std::vector<std::string> parts;
  if (options.format == "github") parts.emplace_back("annotations");
  if (options.format == "markdown" || options.markdown) parts.emplace_back("Markdown summary");
  if (options.format == "sarif" || options.sarif) parts.emplace_back("SARIF report");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and the " : ", the ") + parts[i];
  return out;
}

// The localization as published (SARIF, annotations, the Markdown summary): a redacted copy unless redaction is off.
// What was redacted is added to the run's count (one note for the run: a secret in a shared fixture is in every
// failure's copy).
Localization published(const Localization& r, const Case& query, const RunReportOptions& options, size_t& redacted,
                       size_t& failures) {
  Localization copy = r;
  std::map<std::string, size_t> counts;
  if (const size_t n = redact_localization(copy, query, *options.redactor, counts)) {
    redacted += n;
    ++failures;
  }
  return copy;
}

// The text report of failure `i`, headed by its id in a run of several.
std::string text_of(const Localization& r, const std::vector<Case>& queries, size_t i, const ReportContext& ctx,
                    const RunReportOptions& options) {
  std::string out;
  if (queries.size() > 1)
    out += (i ? "\n" : "") + std::string("== ") + terminal_line(queries[i].id) +
           (queries[i].id == queries[i].test_id ? "" : " (" + terminal_line(queries[i].test_id) + ")") + "\n";
  out += report_text(r, ctx, options.color);
  if (options.show_annotated)
    out += "\nannotated test code (as a model would see it):\n" +
           terminal_lines(Localizer::render_annotated(queries[i], r.annotations));
  if (options.keep_prompt && r.llm) out += "\nprompt:\n" + terminal_lines(r.llm->prompt) + "\n";
  return out;
}

}  // namespace

RunReport report_run(const std::vector<Case>& queries, const std::vector<Result<Localization>>& results,
                     const ReportContext& ctx, const RunReportOptions& options) {
  RunReport report;
  json sarif;
  json json_all = json::array();
  std::vector<Localization> annotated;  // github: the run's localizations, as published
  std::map<std::string, size_t> shared = count_shared_notes(results);
  const bool wants_sarif = options.format == "sarif" || options.sarif;
  const bool wants_markdown = options.format == "markdown" || options.markdown;
  size_t redacted = 0, redacted_failures = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string who = queries.size() > 1 ? queries[i].id + ": " : "";
    if (!results[i]) {
      report.messages.push_back({true, who + results[i].error().message});
      report.failed = true;
      continue;
    }
    const Localization& r = *results[i];
    say_notes(r, i, who, shared, options, report.messages);
    if (r.llm && options.llm_asked && !r.llm->used) report.llm_failed = true;
    if (options.format == "json") json_all.push_back(json::parse(report_json(r, ctx)));
    std::optional<Localization> copy;
    if (options.redactor && (wants_sarif || options.format == "github" || wants_markdown))
      copy = published(r, queries[i], options, redacted, redacted_failures);
    const Localization& shown = copy ? *copy : r;
    if (wants_sarif) {
      auto doc = json::parse(report_sarif(shown, ctx));
      if (sarif.is_null())
        sarif = std::move(doc);
      else
        for (auto& res : doc["runs"][0]["results"]) sarif["runs"][0]["results"].push_back(std::move(res));
    }
    if (options.format == "github" || wants_markdown)
      annotated.push_back(shown);  // annotated (or summed up) as one run, below
    if (options.format == "text") report.out += text_of(r, queries, i, ctx, options);
  }
  if (redacted)
    report.messages.push_back(
        {false, "redacted " + std::to_string(redacted) + " secret(s) from the " + published_what(options) +
                    (queries.size() > 1 ? " of " + std::to_string(redacted_failures) + " failure(s)" : "")});
  if (!sarif.is_null()) report.sarif = json_text(sarif, 2) + "\n";
  // Many failures (--junit, --case without --id, spark record) always give an array, even of one.
  if (options.format == "json")
    report.out = (options.batch      ? json_text(json_all, 2)
                  : json_all.empty() ? std::string("null")
                                     : json_text(json_all[0], 2)) +
                 "\n";
  if (options.format == "github") report.out = report_github(annotated, ctx);
  if (wants_markdown) {
    std::vector<const Localization*> run;
    run.reserve(annotated.size());
    for (const auto& l : annotated) run.push_back(&l);
    std::vector<std::string> errors;
    for (size_t i = 0; i < results.size(); ++i)
      if (!results[i]) {
        std::string e = queries[i].test_id + ": " + results[i].error().message;
        if (options.redactor) {
          std::map<std::string, size_t> counts;
          options.redactor->redact(e, counts);
        }
        errors.push_back(std::move(e));
      }
    report.markdown = report_markdown(run, errors, ctx);
    if (options.format == "markdown") report.out = report.markdown;
  }
  if (options.format == "sarif") report.out = report.sarif;
  return report;
}

}  // namespace spark
