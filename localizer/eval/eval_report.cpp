#include "localizer/eval/eval_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "base/process.h"
#include "base/text.h"
#include "code/structure_cache.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// Whether a setting's mode (a name from a report) annotates the prompt; a name spark does not know does not.
std::string pct(double v) { return fixed(100 * v, 1); }
// A p-value: four decimals, or in exponent notation below 0.0001.
std::string pval(double p) {
  if (p >= 0.0001) return fixed(p, 4);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", p);
  return buf;
}

struct Quartiles {
  double min = 0, mean = 0, median = 0, max = 0;
};
Quartiles stats(std::vector<double> v) {
  Quartiles q;
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  q.min = v.front();
  q.max = v.back();
  q.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  for (double x : v) q.mean += x;
  q.mean /= static_cast<double>(v.size());
  return q;
}

// The datasets in first-seen order, then "all" when there is more than one.
std::vector<std::string> datasets(const Evaluation& e) {
  std::vector<std::string> out;
  for (const auto& c : e.cases)
    if (std::find(out.begin(), out.end(), c.dataset) == out.end()) out.push_back(c.dataset);
  if (out.size() > 1) out.push_back("all");
  return out;
}

bool in_dataset(const EvalCase& c, const std::string& d) { return d == "all" || c.dataset == d; }

// The run serving (setting, k): an LLM mode's run for that k, or the one-ranking run.
const SettingRun* run_for(const Evaluation& e, const EvalSetting& s, size_t k) {
  for (const auto& r : e.runs)
    if (r.setting.mode == s.mode && r.setting.policy == s.policy && r.setting.epsilon == s.epsilon &&
        r.setting.r == s.r && (r.k_requested == 0 || r.k_requested == k))
      return &r;
  return nullptr;
}

// Distinct settings in run order.
std::vector<EvalSetting> settings(const Evaluation& e) {
  std::vector<EvalSetting> out;
  for (const auto& r : e.runs) {
    bool seen = false;
    for (const auto& s : out) seen = seen || s.label() == r.setting.label();
    if (!seen) out.push_back(r.setting);
  }
  return out;
}

struct MetricsCache {
  MetricsCache(const Evaluation& ev, const std::vector<Case>& cs) : e(ev), keys(ev, cs) {}
  const Evaluation& e;
  ElementKeys keys;
  std::map<std::tuple<const SettingRun*, int, size_t>, std::vector<CaseMetrics>> memo;
  const std::vector<CaseMetrics>& get(const SettingRun* run, Level level, size_t k) {
    auto key = std::make_tuple(run, static_cast<int>(level), k);
    auto it = memo.find(key);
    if (it == memo.end()) it = memo.emplace(key, run_case_metrics(e, *run, level, k, keys)).first;
    return it->second;
  }
};

// The mean of the per-case metrics over a dataset's cases, and how many there are.
CaseMetrics dataset_mean(const Evaluation& e, const std::vector<CaseMetrics>& per, const std::string& d) {
  std::vector<CaseMetrics> sel;
  for (size_t i = 0; i < e.cases.size(); ++i)
    if (in_dataset(e.cases[i], d)) sel.push_back(per[i]);
  return mean_metrics(sel);
}

size_t dataset_size(const Evaluation& e, const std::string& d) {
  size_t n = 0;
  for (const auto& c : e.cases) n += in_dataset(c, d) ? 1 : 0;
  return n;
}

// P/R/Hit/MAP/MRR@k per dataset, level, k and setting (the paper's Tables 3, 6, 8, 12).
Table effectiveness_table(const Evaluation& e, MetricsCache& mc, const std::vector<EvalSetting>& sets,
                          const std::vector<std::string>& ds) {
  Table eff{"effectiveness",
            "Effectiveness (%), leave-one-out (the paper's Tables 3, 6, 8, 12)",
            {"dataset", "level", "k", "mode", "policy", "epsilon", "r", "cases", "P@k", "R@k", "Hit@k", "MAP@k",
             "MAP@k (standard)", "MRR@k"},
            {}};
  for (const auto& d : ds)
    for (Level level : e.options.levels)
      for (size_t k : e.options.ks)
        for (const auto& s : sets) {
          const SettingRun* run = run_for(e, s, k);
          if (!run) continue;
          const auto& per = mc.get(run, level, k);
          const CaseMetrics m = dataset_mean(e, per, d);
          eff.rows.push_back({d, std::string(level_name(level)), std::to_string(k), std::string(s.mode.name()),
                              s.policy, fixed(s.epsilon, 2), std::to_string(s.r), std::to_string(dataset_size(e, d)),
                              pct(m.precision), pct(m.recall), pct(m.hit), pct(m.ap_paper), pct(m.ap_standard),
                              pct(m.rr)});
        }
  return eff;
}

// The same numbers in the paper's layout: one row per dataset × level × k, each metric a group of columns with one
// column per setting (Table 3 has Baseline | SPARK under each metric).
Table paper_layout_table(const Evaluation& e, MetricsCache& mc, const std::vector<EvalSetting>& sets,
                         const std::vector<std::string>& ds) {
  Table wide{
      "effectiveness_paper", "Effectiveness (%) in the paper's layout: each metric, one column per setting", {}, {}};
  wide.headers = {"dataset", "level", "k"};
  std::vector<std::string> names;
  for (const auto& s : sets) {
    bool only_mode_differs = true;
    for (const auto& t : sets)
      only_mode_differs = only_mode_differs && t.policy == s.policy && t.epsilon == s.epsilon && t.r == s.r;
    names.push_back(only_mode_differs ? std::string(s.mode.name()) : s.label());
  }
  for (const char* metric : {"P@k", "R@k", "Hit@k", "MAP@k", "MRR@k"})
    for (const auto& n : names) wide.headers.push_back(std::string(metric) + " " + n);
  for (const auto& d : ds)
    for (Level level : e.options.levels)
      for (size_t k : e.options.ks) {
        std::vector<CaseMetrics> means;
        for (const auto& s : sets) {
          const SettingRun* run = run_for(e, s, k);
          CaseMetrics m;
          if (run) {
            m = dataset_mean(e, mc.get(run, level, k), d);
          }
          means.push_back(m);
        }
        std::vector<std::string> row = {d, std::string(level_name(level)), std::to_string(k)};
        for (double CaseMetrics::*field : {&CaseMetrics::precision, &CaseMetrics::recall, &CaseMetrics::hit,
                                           &CaseMetrics::ap_paper, &CaseMetrics::rr})
          for (const auto& m : means) row.push_back(pct(m.*field));
        wide.rows.push_back(std::move(row));
      }
  return wide;
}

// Tokens and time per case (the paper's Tables 4, 7, 10, 13).
Table efficiency_table(const Evaluation& e, const std::vector<std::string>& ds) {
  Table cost{"efficiency",
             "Tokens and time per case (the paper's Tables 4, 7, 10, 13)",
             {"dataset", "mode", "policy", "epsilon", "r", "k", "cases", "tokens in (mean)", "tokens out (mean)",
              "tokens", "time/case (s)", "time sum (s)", "LLM used (%)", "structured (%)", "filled ids", "cached"},
             {}};
  for (const auto& d : ds)
    for (const auto& run : e.runs) {
      double in = 0, out = 0, secs = 0, used = 0, structured = 0, filled = 0, cached = 0, n = 0;
      bool estimated = false;
      for (size_t i = 0; i < e.cases.size(); ++i) {
        if (!in_dataset(e.cases[i], d)) continue;
        const auto& o = run.results[i];
        in += static_cast<double>(o.tokens_in);
        out += static_cast<double>(o.tokens_out);
        secs += o.seconds;
        used += o.llm_used ? 1 : 0;
        structured += o.answer_form == "structured" ? 1 : 0;
        filled += static_cast<double>(o.filled);
        cached += o.cached ? 1 : 0;
        estimated = estimated || o.tokens_estimated;
        n += 1;
      }
      if (n == 0) continue;
      const bool llm = run.k_requested > 0;
      if (!llm) secs = run.wall_seconds * n / static_cast<double>(e.cases.size());
      cost.rows.push_back({d, std::string(run.setting.mode.name()), run.setting.policy, fixed(run.setting.epsilon, 2),
                           std::to_string(run.setting.r), llm ? std::to_string(run.k_requested) : "all", fixed(n, 0),
                           llm ? fixed(in / n, 1) : "-", llm ? fixed(out / n, 1) : "-",
                           llm ? (estimated ? "estimated" : "reported") : "-", fixed(secs / n, 3), fixed(secs, 1),
                           llm ? pct(used / n) : "-", llm ? pct(structured / n) : "-", llm ? fixed(filled, 0) : "-",
                           llm ? fixed(cached, 0) : "-"});
    }
  return cost;
}

// Table 5: annotated lines per ε, from the first run of each ε that annotates.
Table annotations_table(const Evaluation& e, const std::vector<std::string>& ds) {
  Table ann{"annotations",
            "Annotated lines per case: count (share of the case's lines) (the paper's Table 5)",
            {"dataset", "epsilon", "policy", "r", "min", "mean", "median", "max"},
            {}};
  for (const auto& d : ds)
    for (double eps : e.options.epsilons) {
      const SettingRun* run = nullptr;
      for (const auto& r : e.runs)
        if (r.setting.epsilon == eps && r.setting.mode.annotates()) {
          run = &r;
          break;
        }
      if (!run) continue;
      std::vector<double> counts, shares;
      for (size_t i = 0; i < e.cases.size(); ++i)
        if (in_dataset(e.cases[i], d)) {
          counts.push_back(static_cast<double>(run->results[i].annotated));
          shares.push_back(e.cases[i].lines
                               ? static_cast<double>(run->results[i].annotated) / static_cast<double>(e.cases[i].lines)
                               : 0);
        }
      const Quartiles c = stats(counts), sh = stats(shares);
      const auto cell = [](double v, double share, int digits) { return fixed(v, digits) + " (" + pct(share) + "%)"; };
      ann.rows.push_back({d, fixed(eps, 2), run->setting.policy, std::to_string(run->setting.r), cell(c.min, sh.min, 0),
                          cell(c.mean, sh.mean, 1), cell(c.median, sh.median, 1), cell(c.max, sh.max, 0)});
    }
  return ann;
}

// Table 9: the knowledge base's size per query after the policy.
Table knowledge_base_table(const Evaluation& e, const std::vector<std::string>& ds) {
  Table kbt{"knowledge_base",
            "Knowledge-base size per query after the policy (the paper's Table 9)",
            {"dataset", "policy", "min", "mean", "median", "max"},
            {}};
  for (const auto& d : ds)
    for (const auto& policy : e.options.policies) {
      const SettingRun* run = nullptr;
      for (const auto& r : e.runs)
        if (r.setting.policy == policy && r.setting.mode != Mode::baseline) {
          run = &r;
          break;
        }
      if (!run) continue;
      std::vector<double> sizes;
      for (size_t i = 0; i < e.cases.size(); ++i)
        if (in_dataset(e.cases[i], d)) sizes.push_back(static_cast<double>(run->results[i].kb_size));
      const Quartiles q = stats(sizes);
      kbt.rows.push_back({d, policy, fixed(q.min, 0), fixed(q.mean, 1), fixed(q.median, 1), fixed(q.max, 0)});
    }
  return kbt;
}

// Significance: paired over the same cases, same policy, ε and r (McNemar on Hit@k, Wilcoxon on AP@k).
Table significance_table(const Evaluation& e, MetricsCache& mc, const std::vector<EvalSetting>& sets,
                         const std::vector<std::pair<EvalMode, EvalMode>>& compare) {
  std::vector<std::pair<EvalMode, EvalMode>> pairs = compare;
  if (pairs.empty())
    for (size_t i = 1; i < e.options.modes.size(); ++i) pairs.push_back({e.options.modes[0], e.options.modes[i]});
  Table sig{"significance",
            "Paired comparisons over all cases: McNemar on Hit@k, Wilcoxon signed-rank on AP@k (the paper's AP)",
            {"level", "k", "A", "B", "policy", "epsilon", "r", "cases", "Hit@k A", "Hit@k B", "only A hits",
             "only B hits", "McNemar p", "MAP@k A", "MAP@k B", "AP A better", "AP B better", "AP equal", "Wilcoxon p"},
            {}};
  for (const auto& [a, b] : pairs)
    for (const auto& s : sets) {
      if (s.mode != a) continue;
      EvalSetting sb = s;
      sb.mode = b;
      for (Level level : e.options.levels)
        for (size_t k : e.options.ks) {
          const SettingRun* ra = run_for(e, s, k);
          const SettingRun* rb = run_for(e, sb, k);
          if (!ra || !rb) continue;
          const auto& ma = mc.get(ra, level, k);
          const auto& mb = mc.get(rb, level, k);
          size_t only_a = 0, only_b = 0, better_a = 0, better_b = 0, equal = 0;
          std::vector<double> diff;
          std::vector<CaseMetrics> va, vb;
          for (size_t i = 0; i < ma.size(); ++i) {
            only_a += ma[i].hit > 0 && mb[i].hit == 0;
            only_b += mb[i].hit > 0 && ma[i].hit == 0;
            const double d = ma[i].ap_paper - mb[i].ap_paper;
            diff.push_back(d);
            (std::abs(d) < 1e-12 ? equal : d > 0 ? better_a : better_b)++;
          }
          const CaseMetrics mean_a = mean_metrics(ma), mean_b = mean_metrics(mb);
          sig.rows.push_back({std::string(level_name(level)), std::to_string(k), std::string(a.name()),
                              std::string(b.name()), s.policy, fixed(s.epsilon, 2), std::to_string(s.r),
                              std::to_string(ma.size()), pct(mean_a.hit), pct(mean_b.hit), std::to_string(only_a),
                              std::to_string(only_b), pval(mcnemar_p(only_a, only_b)), pct(mean_a.ap_paper),
                              pct(mean_b.ap_paper), std::to_string(better_a), std::to_string(better_b),
                              std::to_string(equal), pval(wilcoxon_p(diff))});
        }
    }
  return sig;
}

}  // namespace

EvalReport make_report(const Evaluation& e, const std::vector<Case>& cases,
                       const std::vector<std::pair<EvalMode, EvalMode>>& compare) {
  MetricsCache mc(e, cases);
  const auto sets = settings(e);
  const auto ds = datasets(e);
  EvalReport report;
  report.tables.push_back(effectiveness_table(e, mc, sets, ds));
  report.tables.push_back(paper_layout_table(e, mc, sets, ds));
  report.tables.push_back(efficiency_table(e, ds));
  report.tables.push_back(annotations_table(e, ds));
  report.tables.push_back(knowledge_base_table(e, ds));
  report.tables.push_back(significance_table(e, mc, sets, compare));
  return report;
}

std::string render_markdown(const EvalReport& r) {
  std::string out;
  if (!r.command.empty()) out += "Produced by `" + r.command + "`.\n\n";
  for (const auto& t : r.tables) {
    out += "## " + t.title + "\n\n";
    if (t.rows.empty()) {
      out += "(nothing to show for this run)\n\n";
      continue;
    }
    out += "|";
    for (const auto& h : t.headers) out += " " + h + " |";
    out += "\n|";
    const size_t text_columns = t.id == "effectiveness_paper" ? 3 : t.id == "significance" ? 0 : 8;
    for (size_t i = 0; i < t.headers.size(); ++i) out += i < text_columns ? "---|" : "---:|";
    out += "\n";
    for (const auto& row : t.rows) {
      out += "|";
      for (const auto& c : row) out += " " + c + " |";
      out += "\n";
    }
    out += "\n";
  }
  return out;
}

std::string render_csv(const EvalReport& r) {
  const auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::string out;
  for (const auto& t : r.tables) {
    out += "table,";
    for (size_t i = 0; i < t.headers.size(); ++i) out += (i ? "," : "") + quote(t.headers[i]);
    out += "\n";
    for (const auto& row : t.rows) {
      out += t.id;
      for (const auto& c : row) out += "," + quote(c);
      out += "\n";
    }
    out += "\n";
  }
  return out;
}

namespace {

// A table cell as JSON: numbers as numbers, "-" (nothing to show) and "all" (every k) as null, "N (P%)" as N with
// the percentage under "<header> (%)"; labels stay strings.
void put_cell(nlohmann::json& row, const std::string& header, const std::string& text) {
  static const std::regex number(R"(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
  static const std::regex with_percent(R"((-?[0-9]+(?:\.[0-9]+)?) \((-?[0-9]+(?:\.[0-9]+)?)%\))");
  std::smatch m;
  if (text == "-" || text.empty() || (header == "k" && text == "all")) {
    row[header] = nullptr;
  } else if (std::regex_match(text, number)) {
    row[header] = std::stod(text);
    if (text.find_first_of(".eE") == std::string::npos) row[header] = std::stoll(text);
  } else if (std::regex_match(text, m, with_percent)) {
    row[header] = std::stod(m[1].str());
    row[header + " (%)"] = std::stod(m[2].str());
  } else {
    row[header] = text;
  }
}

}  // namespace

std::string render_json(const EvalReport& r, const Evaluation& e) {
  nlohmann::json j;
  j["schema"] = "spark.eval/2";
  j["command"] = r.command;
  j["seconds"] = e.seconds;
  j["rankers"] = e.ranker_origins;  // the leave-one-fold-out built-in rankers
  j["tables"] = nlohmann::json::array();
  for (const auto& t : r.tables) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : t.rows) {
      nlohmann::json o = nlohmann::json::object();
      for (size_t i = 0; i < t.headers.size() && i < row.size(); ++i) put_cell(o, t.headers[i], row[i]);
      rows.push_back(std::move(o));
    }
    j["tables"].push_back({{"id", t.id}, {"title", t.title}, {"rows", rows}});
  }
  j["cases"] = nlohmann::json::array();
  for (size_t i = 0; i < e.cases.size(); ++i) {
    nlohmann::json c = {{"id", e.cases[i].id}, {"dataset", e.cases[i].dataset}, {"test_id", e.cases[i].test_id}};
    c["faulty"] = nlohmann::json::array();
    for (const auto& f : e.cases[i].faulty) c["faulty"].push_back({{"path", f.path}, {"line", f.line}});
    c["runs"] = nlohmann::json::array();
    for (const auto& run : e.runs) {
      const auto& o = run.results[i];
      nlohmann::json pr = nlohmann::json::array();
      for (const auto& p : o.predicted) pr.push_back({{"path", p.path}, {"line", p.line}});
      nlohmann::json x = {{"setting", run.setting.label()},
                          {"predicted", pr},
                          {"annotated", o.annotated},
                          {"knowledge_base", o.kb_size},
                          {"similarity", o.similarity ? nlohmann::json(*o.similarity) : nlohmann::json()}};
      if (run.k_requested > 0) x["k"] = run.k_requested;  // the k asked of the LLM; built-in runs rank every line
      if (run.k_requested > 0)
        x["llm"] = {{"used", o.llm_used},
                    {"tokens_in", o.tokens_in},
                    {"tokens_out", o.tokens_out},
                    {"estimated", o.tokens_estimated},
                    {"seconds", o.seconds},
                    {"filled", o.filled},
                    {"cached", o.cached},
                    {"error", o.error},
                    {"answer_form", o.answer_form.empty() ? "none" : o.answer_form}};
      c["runs"].push_back(std::move(x));
    }
    j["cases"].push_back(std::move(c));
  }
  return json_text(j, 1) + "\n";
}

namespace {

std::string html_table(const Table& t) {
  std::string out = "<h2 id=\"" + t.id + "\">" + html_escape(t.title) + "</h2>\n";
  if (t.rows.empty()) return out + "<p>(nothing to show for this run)</p>\n";
  out += "<table class=\"sortable\"><thead><tr>";
  for (const auto& h : t.headers) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (const auto& c : row) out += "<td>" + html_escape(c) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

// Runs gnuplot on `script` in `dir`; returns the SVG it wrote to out.svg.
Result<std::string> gnuplot_svg(const fs::path& dir, const std::string& script) {
  const fs::path sp = dir / "plot.gp", out = dir / "out.svg";
  std::error_code ec;
  fs::remove(out, ec);
  {
    std::ofstream f(sp);
    f << "set terminal svg size 720,420 noenhanced font 'sans,12' background '#ffffff'\nset output '" << out.string()
      << "'\n"
      << script;
  }
  // The same runner as the miner's test commands: a timeout, the output kept, nothing left running.
  auto run = run_command("gnuplot " + shell_quote(sp.string()), dir, 120);
  TRY(run);
  if (!run->passed())
    return fail("gnuplot failed (" + run->describe() +
                "): " + (run->output.empty() ? std::string("(no message)") : clip(run->output, 300)));
  auto svg = read_file(out);
  TRY(svg);
  const size_t start = svg->find("<svg");
  return start == std::string::npos ? *svg : svg->substr(start);
}

// A line plot of Hit@k (or MAP@k) against k, one line per setting, at the first level over all cases (gnuplot, SVG);
// its data file goes into `dir`. A warning paragraph when gnuplot cannot draw it.
std::string plot_by_k(const Evaluation& e, MetricsCache& mc, const std::vector<EvalSetting>& sets, const fs::path& dir,
                      const std::string& what, bool hit) {
  std::string data, script = "set key outside right\nset xlabel 'k'\nset ylabel '" + what +
                             " (%)'\nset yrange [0:100]\nset grid\nset xtics (";
  for (size_t i = 0; i < e.options.ks.size(); ++i) script += (i ? ", " : "") + std::to_string(e.options.ks[i]);
  script += ")\nplot ";
  size_t block = 0;
  for (const auto& s : sets) {
    std::string rows;
    for (size_t k : e.options.ks) {
      const SettingRun* run = run_for(e, s, k);
      if (!run) continue;
      const CaseMetrics m = mean_metrics(mc.get(run, e.options.levels.front(), k));
      rows += std::to_string(k) + " " + fixed(100 * (hit ? m.hit : m.ap_paper), 2) + "\n";
    }
    if (rows.empty()) continue;
    data += rows + "\n\n";
    std::string title = s.label();
    std::replace(title.begin(), title.end(), '_', '-');
    script += std::string(block ? ", " : "") + "'" + (dir / "data.txt").string() + "' index " + std::to_string(block) +
              " with linespoints lw 2 title '" + title + "'";
    ++block;
  }
  script += "\n";
  std::ofstream(dir / "data.txt") << data;
  auto svg = gnuplot_svg(dir, script);
  return svg ? *svg : "<p class=\"warn\">" + html_escape(svg.error().message) + "</p>";
}

// The histogram of annotated lines per case of the first run that annotates ("" when none does).
std::string annotation_histogram(const Evaluation& e, const fs::path& dir) {
  for (const auto& run : e.runs) {
    if (!run.setting.mode.annotates()) continue;
    std::map<size_t, size_t> hist;
    for (const auto& o : run.results) hist[std::min<size_t>(o.annotated, 20)]++;
    std::string data;
    for (const auto& [n, count] : hist) data += std::to_string(n) + " " + std::to_string(count) + "\n";
    std::ofstream(dir / "hist.txt") << data;
    auto svg = gnuplot_svg(
        dir,
        "set style fill solid 0.6\nset boxwidth 0.8\nset xlabel 'annotated lines per case (20 = 20 or more)'\n"
        "set ylabel 'cases'\nset grid ytics\nplot '" +
            (dir / "hist.txt").string() + "' using 1:2 with boxes notitle lc rgb '#d08c00'\n");
    return "<h2>Annotated lines per case (" + html_escape(run.setting.label()) + ")</h2>\n<figure>" +
           (svg ? *svg : "<p class=\"warn\">" + html_escape(svg.error().message) + "</p>") + "</figure>\n";
  }
  return "";
}

// One case's drill-down: its first hit per run, and the lines near faulty, annotated and predicted ones (top
// `k_show` of each run) with rank badges.
std::string html_case(const Evaluation& e, size_t i, const Case& c, size_t k_show) {
  std::string out;
  const EvalCase& ec_ = e.cases[i];
  std::string first_hits;
  for (size_t ri = 0; ri < e.runs.size(); ++ri) {
    const auto& o = e.runs[ri].results[i];
    size_t rank = 0;
    std::set<std::pair<std::string, int>> truth;
    for (const auto& f : ec_.faulty) truth.insert({f.path, f.line});
    for (size_t p = 0; p < o.predicted.size() && p < k_show; ++p)
      if (truth.contains({o.predicted[p].path, o.predicted[p].line})) {
        rank = p + 1;
        break;
      }
    first_hits += std::string(ri ? ", " : "") + std::string(e.runs[ri].setting.mode.name()) +
                  (e.runs[ri].k_requested ? "@" + std::to_string(e.runs[ri].k_requested) : "") + ": " +
                  (rank ? "#" + std::to_string(rank) : "–");
  }
  out += "<details><summary><b>" + html_escape(ec_.id) + "</b> " + html_escape(ec_.test_id) + " — first hit " +
         html_escape(first_hits) + "</summary>\n";
  for (const auto& f : c.files) {
    const auto lines = split_lines(f.content);
    std::map<int, std::string> badges;
    std::set<int> faulty, annotated, near;
    for (const auto& fl : ec_.faulty)
      if (fl.path == f.path) faulty.insert(fl.line);
    for (size_t ri = 0; ri < e.runs.size(); ++ri) {
      const auto& o = e.runs[ri].results[i];
      for (const auto& a : o.annotated_lines)
        if (a.path == f.path) annotated.insert(a.line);
      for (size_t p = 0; p < o.predicted.size() && p < k_show; ++p)
        if (o.predicted[p].path == f.path)
          badges[o.predicted[p].line] += "<span class=\"b r" + std::to_string(ri % 8) + "\" title=\"" +
                                         html_escape(e.runs[ri].setting.label()) + "\">" + std::to_string(p + 1) +
                                         "</span>";
    }
    for (int l : faulty) near.insert(l);
    for (int l : annotated) near.insert(l);
    for (const auto& [l, b] : badges) near.insert(l);
    out += "<div class=\"file\">" + html_escape(f.path) + "</div><pre>";
    int last = 0;
    for (size_t n = 1; n <= lines.size(); ++n) {
      const int line = static_cast<int>(n);
      bool show = false;
      for (int x : near) show = show || std::abs(x - line) <= 3;
      if (!show) continue;
      if (last && line > last + 1) out += "<span class=\"gap\">   …</span>\n";
      last = line;
      const std::string cls = faulty.contains(line)      ? " class=\"faulty\""
                              : annotated.contains(line) ? " class=\"ann\""
                                                         : "";
      char num_buf[16];
      std::snprintf(num_buf, sizeof num_buf, "%5d ", line);
      out += "<span" + cls + ">" + num_buf + html_escape(lines[n - 1]) + "</span>" +
             (badges.contains(line) ? " " + badges[line] : "") + "\n";
    }
    out += "</pre>\n";
  }
  out += "</details>\n";
  return out;
}

}  // namespace

Result<std::string> render_html(const EvalReport& r, const Evaluation& e, const std::vector<Case>& cases) {
  std::string body;
  body += "<h1>spark eval</h1>\n<p>" + std::to_string(e.cases.size()) + " labelled cases, leave-one-out, " +
          fixed(e.seconds, 1) + " s. " +
          (r.command.empty() ? "" : "Command: <code>" + html_escape(r.command) + "</code>") +
          "</p>\n<nav><a href=\"#effectiveness\">effectiveness</a> · <a href=\"#plots\">plots</a> · <a "
          "href=\"#efficiency\">efficiency</a> · <a href=\"#annotations\">annotations</a> · <a "
          "href=\"#knowledge_base\">knowledge base</a> · <a href=\"#significance\">significance</a> · <a "
          "href=\"#cases\">cases</a></nav>\n";
  for (const auto& t : r.tables)
    if (t.id == "effectiveness_paper" || t.id == "effectiveness") body += html_table(t);

  // Plots: Hit@k and MAP@k against k per setting, first level, all cases.
  body += "<h2 id=\"plots\">Hit@k and MAP@k by k (all cases, level " +
          std::string(level_name(e.options.levels.front())) + ")</h2>\n";
  const fs::path dir = temp_folder() / ("spark-eval-plot-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  MetricsCache mc(e, cases);
  const auto sets = settings(e);
  body += "<div class=\"plots\"><figure>" + plot_by_k(e, mc, sets, dir, "Hit@k", true) +
          "<figcaption>Hit@k</figcaption></figure><figure>" + plot_by_k(e, mc, sets, dir, "MAP@k", false) +
          "<figcaption>MAP@k (the paper's AP)</figcaption></figure></div>\n";
  for (const auto& t : r.tables)
    if (t.id != "effectiveness" && t.id != "effectiveness_paper") body += html_table(t);

  body += annotation_histogram(e, dir);
  fs::remove_all(dir, ec);

  // Per-case drill-down: the lines around faulty, annotated and predicted ones.
  std::map<std::string, const Case*> by_id;
  for (const auto& c : cases) by_id[c.id] = &c;
  body +=
      "<h2 id=\"cases\">Cases</h2>\n<p>Red: faulty. Yellow: annotated. Badges: rank in each setting's top 10 (run "
      "order as in the tables). Lines far from all of these are left out.</p>\n";
  const size_t k_show = 10;
  for (size_t i = 0; i < e.cases.size(); ++i) body += html_case(e, i, *by_id.at(e.cases[i].id), k_show);

  const std::string style =
      "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:0.5em 0 1.5em}"
      "th,td{border:1px solid #ccc;padding:2px "
      "6px;text-align:right;font-size:13px}th{background:#f0f0f0;cursor:pointer}"
      "td:nth-child(-n+4){text-align:left}pre{background:#fafafa;border:1px solid #ddd;padding:4px;overflow-x:auto}"
      ".faulty{background:#f8c8c8}.ann{background:#fff1b0}.gap{color:#999}.file{font-weight:bold;margin-top:6px}"
      ".b{display:inline-block;min-width:1.4em;margin-left:2px;border-radius:3px;color:#fff;text-align:center;font-"
      "size:11px}"
      ".r0{background:#1f77b4}.r1{background:#ff7f0e}.r2{background:#2ca02c}.r3{background:#d62728}.r4{background:#"
      "9467bd}"
      ".r5{background:#8c564b}.r6{background:#e377c2}.r7{background:#7f7f7f}.plots{display:flex;flex-wrap:wrap}"
      "figure{margin:0 1em 1em 0}.warn{color:#a00}";
  // Click a header to sort its table (numbers as numbers).
  const std::string script =
      "document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){"
      "var tb=th.closest('table').tBodies[0];var rows=Array.from(tb.rows);var "
      "asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';"
      "rows.sort(function(a,b){var x=a.cells[i].textContent,y=b.cells[i].textContent;var "
      "nx=parseFloat(x),ny=parseFloat(y);"
      "var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return "
      "asc?c:-c;});rows.forEach(function(r){tb.appendChild(r);});});});";
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>spark eval</title><style>" + style +
         "</style></head><body>\n" + body + "<script>" + script + "</script>\n</body></html>\n";
}

}  // namespace spark
