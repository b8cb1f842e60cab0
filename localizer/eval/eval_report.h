// Reports of `spark eval`: the paper's tables (effectiveness, Table 3/6/8/12; efficiency, Table 4/7/10/13;
// annotated lines, Table 5; knowledge-base size per policy, Table 9), paired significance tests, as Markdown, CSV,
// JSON, or one self-contained HTML page with plots (gnuplot, SVG) and a per-case drill-down.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "localizer/eval/evaluation.h"

namespace spark {

struct Table {
  std::string id;  // effectiveness | efficiency | annotations | knowledge_base | significance
  std::string title;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
};

struct EvalReport {
  std::vector<Table> tables;
  std::string command;  // how it was produced (shown in reports)
};

// `compare`: pairs of modes to test; empty = every mode against the first one.
EvalReport make_report(const Evaluation& e, const std::vector<Case>& cases,
                       const std::vector<std::pair<EvalMode, EvalMode>>& compare);

std::string render_markdown(const EvalReport& r);
std::string render_csv(const EvalReport& r);
std::string render_json(const EvalReport& r, const Evaluation& e);
// The HTML page. Plots need gnuplot; without it the page says so and shows the tables.
Result<std::string> render_html(const EvalReport& r, const Evaluation& e, const std::vector<Case>& cases);

}  // namespace spark
