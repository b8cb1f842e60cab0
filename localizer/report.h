// Output of `spark localize`: human text, JSON (stable schema "spark.localize/1", docs/FORMATS.md), SARIF 2.1.0 and
// GitHub Actions workflow commands.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "formats/redact.h"
#include "localizer/localizer.h"

namespace spark {

// The text report shows a retrieved case's faulty lines only from this cosine up. Measured on the development corpus
// (docs/LOCALIZER.md): of the 61 queries whose closest case lay below 0.5 and still annotated lines, none annotated
// a faulty line, in each of its four projects; from 0.6 up, 70 of 159 did.
inline constexpr double kShowSimilarFloor = 0.5;

struct ReportContext {
  std::string policy;
  Level level = Level::line;
  size_t k = 0;
  double epsilon = 0;
  std::string version;
};

// Redacts the text a report can show: the ranked lines' code (taken from the query's files redacted whole, so a
// secret spanning lines, such as a private key's body, is caught on each of its lines) and reasons, the retrieved
// cases' faulty lines, the explanation, the notes and the LLM's error and answer. The formats that leave the machine
// by design (SARIF, GitHub annotations) are made from a redacted copy. Returns how many secrets were replaced.
size_t redact_localization(Localization& loc, const Case& query, const Redactor& redactor,
                           std::map<std::string, size_t>& counts);

std::string report_text(const Localization& loc, const ReportContext& ctx, bool color);
// One line each for the text and Markdown reports: "failing since abc1234, 3 failing runs, 2.0 days; last passed at
// def5678", and "test (0.73): raised in the test's own code (+1.0); ...".
std::string history_line(const TestHistory& h);
std::string verdict_line(const Verdict& v);
// "since the last pass at 8e0d4b2c1a: 2 lines it runs changed (12, 14); 0 product names or values changed".
std::string change_line(const ChangeEvidence& c);
// The Markdown summary's bound in bytes, whatever the run: GitHub takes at most 1 MiB per step's summary
// ($GITHUB_STEP_SUMMARY), and hooks/ci-step.sh adds its counts and the open failures around it.
inline constexpr size_t kMarkdownSummaryLimit = size_t{640} << 10;
// A summary a person reads in CI (`--format markdown`, $GITHUB_STEP_SUMMARY, a merge-request comment): one table row
// per failure — the test, its verdict, whether it was seen before (the most similar case, its fix commit) or an edit
// is suggested, and its top lines — then each suggested edit as a diff block. Cells are escaped for Markdown tables.
// Within kMarkdownSummaryLimit: each cell's text is cut to a bound, and the rows or edits past the limit are counted
// ("… and N more failures"), not shown.
std::string report_markdown(const std::vector<const Localization*>& run, const std::vector<std::string>& errors,
                            const ReportContext& ctx);
std::string report_json(const Localization& loc, const ReportContext& ctx);
std::string report_sarif(const Localization& loc, const ReportContext& ctx);
// GitHub Actions annotations for a run's failures (one localization each, in the run's order): at most 10 in all,
// GitHub's limit per type and step. The same lines (file, line, end line) ranked for several failures are one
// annotation, with their count ("(×39)") and the tests named. Annotations go best rank first (then the most failures
// first); beyond 10, the first 9 are shown and one more lists the rest.
std::string report_github(const std::vector<Localization>& run, const ReportContext& ctx);

// A run's report (`spark localize`, `spark record`) in one of the formats above, for its failures and their results
// in the same order (localizer/report_run.cpp).
struct RunReportOptions {
  std::string format = "text";  // text | json | sarif | github | markdown
  bool sarif = false;           // a SARIF report besides (--sarif-output), whatever the format
  bool markdown = false;        // a Markdown summary besides (--markdown), whatever the format
  bool batch = false;           // json: an array even of one failure (else the one localization, or null)
  bool color = false;           // text: ANSI colours
  bool show_annotated = false;  // text: the annotated test code after each report
  bool keep_prompt = false;     // text: the LLM's prompt after each report
  bool wants_llm = false;       // the mode asks an LLM (not `builtin`)
  bool llm_asked = false;       // an LLM was configured and asked
  bool require_llm = false;     // a failed LLM is an error, not a fallback
  // When set, SARIF and annotations (which leave the machine by design) are made from redacted copies.
  const Redactor* redactor = nullptr;
};

// What spark says on stderr for a run, in order: an error or a note.
struct RunMessage {
  bool error = false;
  std::string text;
};

struct RunReport {
  std::vector<RunMessage> messages;  // per failure: its error, or its notes (those several share, said once)
  std::string out;                   // standard output
  std::string sarif;                 // the SARIF report when asked (format sarif or options.sarif); "" when none
  std::string markdown;              // the Markdown summary when asked (format markdown or options.markdown)
  bool failed = false;               // a failure could not be localized (its error is in messages)
  bool llm_failed = false;           // an LLM was asked and could not be used for a failure
};

RunReport report_run(const std::vector<Case>& queries, const std::vector<Result<Localization>>& results,
                     const ReportContext& ctx, const RunReportOptions& options);

}  // namespace spark
