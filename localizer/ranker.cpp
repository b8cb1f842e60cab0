#include "localizer/ranker.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "formats/case.h"

namespace spark {

RankerModel RankerModel::prior() {
  // Hand-set starting weights (log-odds), used only until the knowledge base can teach better. Reasoning, not fitting:
  // a line the failing test cannot execute cannot cause its failure, so scope weighs most; a failure is most often at
  // or just before where the test stopped; lines after it never ran; a close match to a similar case's faulty line is
  // evidence; statement-kind statistics from a small knowledge base are noisy, so they weigh little.
  RankerModel m;
  m.weights.fill(0.0);
  m.weights[kBias] = -6.0;
  m.weights[kAnnotated] = 2.0;
  m.weights[kResembles] = 1.0;
  m.weights[kTracebackLine] = 3.0;
  m.weights[kTracebackFrame] = 1.5;
  m.weights[kNotReached] = -3.0;
  m.weights[kNearFailure] = 2.0;
  m.weights[kOwnBody] = 4.0;
  m.weights[kSupport] = 3.0;
  m.weights[kModuleLevel] = 1.5;
  m.weights[kKindPrior] = 0.5;
  m.weights[kErrorOverlap] = 1.0;
  m.weights[kSlice] = 1.5;       // setting a value the failing line uses: evidence like a traceback frame on the way
  m.weights[kValueMatch] = 1.5;  // holding a value the failure shows, or a name it quotes: direct evidence
  m.weights[kNameMatch] = 1.5;
  m.weights[kGate] = 1.0;           // the gate's log-odds move the failing statement up or down
  m.weights[kNamedLine] = 0.5;      // of a multi-line statement, the line the traceback prints
  m.weights[kResemblesFix] = -1.0;  // already in the form a similar case's fix gave its faulty line: evidence against
  m.weights[kChangedSincePass] = 2.0;   // what changed since the test last passed: the developer's first question
  m.weights[kUsesProductChange] = 1.0;  // uses what the product changed: a stale expectation, or the product's fault
  m.gate = GateModel::prior();
  m.origin = "prior";
  return m;
}

std::vector<double> RankerModel::probabilities(const std::vector<FeatureVector>& rows) const {
  std::vector<double> out(rows.size(), 0.0);
  for (size_t i = 0; i < rows.size(); ++i) out[i] = 1.0 / (1.0 + std::exp(-score(rows[i])));
  return out;
}

GateModel GateModel::prior() {
  // Hand-set log-odds that the failing statement is itself the fault, used until the knowledge base can teach better.
  // A type or name error raised in the test's own code is most often the statement's own mistake; an assertion that
  // fails says only that some value differs, so evidence elsewhere (a line holding the compared value, a line like a
  // similar case's faulty line) moves the blame away from it.
  GateModel g;
  g.weights.fill(0.0);
  g.weights[kGateBias] = 0.5;
  g.weights[kGateAssertion] = -1.0;
  g.weights[kGateType] = 1.0;
  g.weights[kGateName] = 1.5;
  g.weights[kGateRaisedInTest] = 0.5;
  g.weights[kGateStopValue] = 1.0;
  g.weights[kGateOtherValue] = -1.5;
  g.weights[kGateStopName] = 1.5;
  g.weights[kGateOtherName] = -1.0;
  g.weights[kGateStopAnnotated] = 1.5;
  g.weights[kGateOtherAnnotated] = -1.0;
  g.origin = "prior";
  return g;
}

double GateModel::log_odds(const GateVector& g) const {
  double z = 0;
  for (size_t i = 0; i < kGateCount; ++i) z += weights[i] * g[i];
  return std::clamp(z, -6.0, 6.0);
}

double GateModel::probability(const GateVector& g) const { return 1.0 / (1.0 + std::exp(-log_odds(g))); }

void apply_gate(const GateModel& gate, const GateVector& g, std::vector<FeatureVector>& rows) {
  const double z = gate.log_odds(g);
  for (auto& x : rows) x[kGate] = x[kTracebackLine] > 0 ? z : 0.0;
}

void apply_gate(const GateModel& gate, QueryView& view) {
  const double z = view.has_stop ? gate.log_odds(view.gate) : 0.0;
  for (auto& ql : view.lines) ql.x[kGate] = ql.x[kTracebackLine] > 0 ? z : 0.0;
}

void sample_negatives(size_t case_index, std::vector<size_t>& negatives, size_t n) {
  if (negatives.size() <= n) return;
  // Deterministic: order by a hash of (case, line index), keep the first n. Each key is hashed once.
  const std::string prefix = std::to_string(case_index) + ":";
  std::vector<std::pair<uint64_t, size_t>> keyed;
  keyed.reserve(negatives.size());
  for (size_t i : negatives) keyed.emplace_back(fnv1a64(prefix + std::to_string(i)), i);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < n; ++i) negatives[i] = keyed[i].second;
  negatives.resize(n);
}

void thin_training_case(TrainingCase& tc, size_t case_index, size_t negatives_per_case) {
  std::vector<size_t> neg;
  for (size_t i = 0; i < tc.rows.size(); ++i)
    if (!tc.faulty[i]) neg.push_back(i);
  if (neg.size() <= negatives_per_case) return;
  sample_negatives(case_index, neg, negatives_per_case);
  std::vector<char> keep(tc.rows.size(), 0);
  for (size_t i : neg) keep[i] = 1;
  size_t w = 0;
  for (size_t i = 0; i < tc.rows.size(); ++i)
    if (tc.faulty[i] || keep[i]) {
      tc.rows[w] = tc.rows[i];
      tc.faulty[w++] = tc.faulty[i];
    }
  tc.rows.resize(w);
  tc.rows.shrink_to_fit();  // the memory is the point
  tc.faulty.resize(w);
  tc.faulty.shrink_to_fit();
}

TrainingCase training_case(const QueryView& view, const std::vector<LineRef>& faulty_lines) {
  std::set<std::pair<std::string, int>> truth;
  for (const auto& fl : faulty_lines) truth.insert({fl.path, fl.line});
  TrainingCase tc;
  bool stop_faulty = false;
  for (const auto& ql : view.lines) {
    tc.rows.push_back(ql.x);
    const bool f = truth.contains({view.files[ql.file].source->path, ql.line});
    tc.faulty.push_back(f ? 1 : 0);
    stop_faulty = stop_faulty || (f && ql.x[kTracebackLine] > 0);
  }
  tc.has_stop = view.has_stop;
  tc.gate = view.gate;
  tc.gate_label = stop_faulty;
  return tc;
}

double RankerModel::score(const FeatureVector& x) const {
  double s = 0;
  for (size_t i = 0; i < kFeatureCount; ++i) s += weights[i] * x[i];
  return s;
}

Status RankerModel::save(const std::filesystem::path& path) const {
  nlohmann::json j;
  j["format"] = 1;
  j["origin"] = origin;
  j["objective"] = "logistic";
  j["training_cases"] = training_cases;
  j["training_rows"] = training_rows;
  j["labelled_cases"] = labelled_cases;
  j["trained_at"] = trained_at;
  j["train_seconds"] = train_seconds;
  for (size_t i = 0; i < kFeatureCount; ++i) j["weights"][std::string(feature_name(i))] = weights[i];
  j["gate"]["origin"] = gate.origin;
  for (size_t i = 0; i < kGateCount; ++i) j["gate"]["weights"][std::string(gate_feature_name(i))] = gate.weights[i];
  j["kind_prior"] = nlohmann::json::object();
  for (const auto& [k, v] : kind_prior.llr) j["kind_prior"][k] = v;
  return write_file_atomic(path, json_text(j, 2) + "\n");
}

Result<RankerModel> RankerModel::load(const std::filesystem::path& path) {
  auto text = read_file(path);
  TRY(text);
  try {
    const auto j = nlohmann::json::parse(*text);
    if (j.at("format").get<int>() != 1) return fail(path.string() + ": unknown ranker format");
    RankerModel m;
    m.origin = j.at("origin").get<std::string>();
    m.training_cases = j.at("training_cases").get<size_t>();
    m.training_rows = j.at("training_rows").get<size_t>();
    // A model saved before these were kept: it learnt from (at least) its training cases, at a time unknown.
    m.labelled_cases = j.value("labelled_cases", m.training_cases);
    m.trained_at = j.value("trained_at", int64_t{0});
    m.train_seconds = j.value("train_seconds", 0.0);
    // A model saved before a feature existed weighs it 0 (`spark index` learns it anew).
    // A feature the file does not name gets 0, but the change features their prior weights: a model saved before
    // they existed weighs a query's change as a model that never saw one does (train_ranker).
    for (size_t i = 0; i < kFeatureCount; ++i)
      m.weights[i] = j.at("weights").value(
          std::string(feature_name(i)),
          i == kChangedSincePass || i == kUsesProductChange ? RankerModel::prior().weights[i] : 0.0);
    for (const auto& [k, v] : j.at("kind_prior").items()) m.kind_prior.llr[k] = v.get<double>();
    // A model saved before the gate existed uses the gate's prior.
    m.gate = GateModel::prior();
    if (j.contains("gate")) {
      m.gate.origin = j["gate"].at("origin").get<std::string>();
      for (size_t i = 0; i < kGateCount; ++i)
        m.gate.weights[i] = j["gate"].at("weights").value(std::string(gate_feature_name(i)), 0.0);
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    return fail(path.string() + ": damaged ranker model (" + e.what() + ")");
  }
}

namespace {

// Solves A x = b (n×n, symmetric positive definite after the ridge) by Gaussian elimination with partial pivoting.
bool solve(std::vector<double> a, std::vector<double> b, size_t n, std::vector<double>& x) {
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[piv * n + c])) piv = r;
    if (std::fabs(a[piv * n + c]) < 1e-12) return false;
    if (piv != c) {
      for (size_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[piv * n + k]);
      std::swap(b[c], b[piv]);
    }
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / a[c * n + c];
      for (size_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= a[i * n + k] * x[k];
    x[i] = s / a[i * n + i];
  }
  return true;
}

}  // namespace

namespace {

// Weighted logistic regression by Newton's method with a ridge on every weight but `free` (the bias; none when
// free >= n). Rows are n-vectors.
std::vector<double> fit_logistic(const std::vector<const double*>& rows, const std::vector<double>& y,
                                 const std::vector<double>& w, size_t n, double lambda, size_t free) {
  std::vector<double> beta(n, 0.0);
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<double> grad(n, 0.0), hess(n * n, 0.0);
    for (size_t r = 0; r < rows.size(); ++r) {
      const double* x = rows[r];
      double z = 0;
      for (size_t i = 0; i < n; ++i) z += beta[i] * x[i];
      const double p = 1.0 / (1.0 + std::exp(-z));
      const double g = w[r] * (y[r] - p);
      const double h = w[r] * p * (1.0 - p);
      for (size_t i = 0; i < n; ++i) {
        if (x[i] == 0.0) continue;
        grad[i] += g * x[i];
        for (size_t j = 0; j < n; ++j) hess[i * n + j] += h * x[i] * x[j];
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (i == free) {
        hess[i * n + i] += 1e-9;
        continue;
      }
      grad[i] -= lambda * beta[i];
      hess[i * n + i] += lambda;
    }
    std::vector<double> step;
    if (!solve(hess, grad, n, step)) break;
    double change = 0;
    for (size_t i = 0; i < n; ++i) {
      beta[i] += step[i];
      change = std::max(change, std::fabs(step[i]));
    }
    if (change < 1e-6) break;
  }
  return beta;
}

// The gate fitted on `cases` (those with a failing statement), or its prior when fewer than `min_cases`.
GateModel fit_gate(const std::vector<const TrainingCase*>& cases, size_t min_cases, double l2) {
  std::vector<const double*> rows;
  std::vector<double> y, w;
  size_t pos = 0;
  for (const auto* tc : cases) pos += tc->gate_label ? 1 : 0;
  const size_t neg = cases.size() - pos;
  if (cases.size() < min_cases || pos == 0 || neg == 0) return GateModel::prior();
  for (const auto* tc : cases) {
    rows.push_back(tc->gate.data());
    y.push_back(tc->gate_label ? 1.0 : 0.0);
    w.push_back(1.0);
  }
  const auto beta = fit_logistic(rows, y, w, kGateCount, l2, kGateBias);
  GateModel g;
  for (size_t i = 0; i < kGateCount; ++i) g.weights[i] = beta[i];
  g.origin = "trained on " + std::to_string(cases.size()) + " failing statements";
  return g;
}

// The gate fitted on every case with a failing statement; and each such case's rows given the gate values of a
// gate fitted without it (`folds` folds), so the ranker learns how far to trust the gate on cases it has not seen.
GateModel fit_cross_fitted_gate(std::vector<TrainingCase>& cases, const TrainingOptions& options) {
  std::vector<const TrainingCase*> with_stop;
  for (const auto& tc : cases)
    if (tc.has_stop) with_stop.push_back(&tc);
  GateModel gate = fit_gate(with_stop, options.min_training_cases, options.l2);
  std::vector<GateModel> folds;
  const size_t k = std::max<size_t>(2, options.gate_folds);
  for (size_t f = 0; f < k; ++f) {
    std::vector<const TrainingCase*> rest;
    for (size_t i = 0; i < with_stop.size(); ++i)
      if (i % k != f) rest.push_back(with_stop[i]);
    folds.push_back(fit_gate(rest, options.min_training_cases, options.l2));
  }
  size_t i = 0;
  for (auto& tc : cases)
    if (tc.has_stop) apply_gate(folds[i++ % k], tc.gate, tc.rows);
  return gate;
}

// A (faulty, non-faulty) pair of rows of one case.
struct Pair {
  size_t c, p, q;
};

// Every case's pairs: each faulty row against each of its sampled non-faulty rows. `used` counts the cases with both.
std::vector<Pair> training_pairs(const std::vector<TrainingCase>& cases, size_t negatives_per_case, size_t& used) {
  std::vector<Pair> pairs;
  used = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& tc = cases[c];
    std::vector<size_t> pos, neg;
    for (size_t i = 0; i < tc.rows.size(); ++i) (tc.faulty[i] ? pos : neg).push_back(i);
    if (pos.empty() || neg.empty()) continue;
    sample_negatives(c, neg, negatives_per_case);
    ++used;
    for (size_t p : pos)
      for (size_t q : neg) pairs.push_back({c, p, q});
  }
  return pairs;
}

// RankNet with a linear scorer: logistic regression on the pairs' differences, each case's pairs carrying a total
// weight of one. The bias cancels in a difference (platt_scale fits it).
std::vector<double> fit_pairwise(const std::vector<TrainingCase>& cases, const std::vector<Pair>& pairs,
                                 double lambda) {
  std::vector<FeatureVector> diffs;
  diffs.reserve(pairs.size());
  for (const auto& pr : pairs) {
    FeatureVector d;
    for (size_t i = 0; i < kFeatureCount; ++i) d[i] = cases[pr.c].rows[pr.p][i] - cases[pr.c].rows[pr.q][i];
    diffs.push_back(d);
  }
  std::vector<const double*> rows;
  rows.reserve(diffs.size());
  for (const auto& d : diffs) rows.push_back(d.data());
  const std::vector<double> y(rows.size(), 1.0);
  std::map<size_t, double> total;
  for (const auto& pr : pairs) total[pr.c] += 1.0;
  std::vector<double> w(pairs.size(), 0.0);
  for (size_t i = 0; i < pairs.size(); ++i) w[i] = total[pairs[i].c] > 0 ? 1.0 / total[pairs[i].c] : 0.0;
  return fit_logistic(rows, y, w, kFeatureCount, lambda, kFeatureCount);
}

// Platt scaling, so scores stay probabilities: the bias and a scale fitted on the lines the pairs were made of (each
// case's positives and sampled negatives, half the case's weight each), not on every line.
void platt_scale(const std::vector<TrainingCase>& cases, const std::vector<Pair>& pairs, std::vector<double>& beta) {
  std::vector<std::array<double, 2>> platt;
  std::vector<double> py, pw;
  std::map<size_t, std::pair<std::set<size_t>, std::set<size_t>>> lines;
  for (const auto& pr : pairs) {
    lines[pr.c].first.insert(pr.p);
    lines[pr.c].second.insert(pr.q);
  }
  for (const auto& [c, pn] : lines) {
    const auto& [pos, neg] = pn;
    for (const auto* group : {&pos, &neg})
      for (size_t i : *group) {
        double sc = 0;
        for (size_t f = 1; f < kFeatureCount; ++f) sc += beta[f] * cases[c].rows[i][f];
        platt.push_back({1.0, sc});
        py.push_back(group == &pos ? 1.0 : 0.0);
        pw.push_back(0.5 / static_cast<double>(group->size()));
      }
  }
  std::vector<const double*> prow;
  prow.reserve(platt.size());
  for (const auto& p : platt) prow.push_back(p.data());
  const auto ab = fit_logistic(prow, py, pw, 2, 0.0, 0);
  beta[kBias] = ab[0];
  for (size_t f = 1; f < kFeatureCount; ++f) beta[f] *= ab[1];
}

}  // namespace

RankerModel train_ranker(std::vector<TrainingCase> cases, const KindPrior& prior, const TrainingOptions& options) {
  // The gate first: the ranker learns from its cross-fitted values.
  const GateModel gate = fit_cross_fitted_gate(cases, options);
  size_t used = 0;
  const std::vector<Pair> pairs = training_pairs(cases, options.negatives_per_case, used);
  if (used < options.min_training_cases) {
    RankerModel m = RankerModel::prior();
    m.kind_prior = prior;
    m.gate = gate;
    return m;
  }
  std::vector<double> beta = fit_pairwise(cases, pairs, options.l2 / static_cast<double>(used));
  platt_scale(cases, pairs, beta);
  RankerModel m;
  for (size_t i = 0; i < kFeatureCount; ++i) m.weights[i] = beta[i];
  // A knowledge base none of whose cases knows its last pass learns nothing of the change features: they keep their
  // prior weights, for the queries that know theirs (`localize --since`, `record`).
  for (const Feature f : {kChangedSincePass, kUsesProductChange})
    if (std::none_of(cases.begin(), cases.end(), [&](const TrainingCase& tc) {
          return std::any_of(tc.rows.begin(), tc.rows.end(), [&](const FeatureVector& x) { return x[f] != 0; });
        }))
      m.weights[f] = RankerModel::prior().weights[f];
  m.kind_prior = prior;
  m.gate = gate;
  m.training_cases = used;
  m.training_rows = pairs.size();
  m.origin = "trained on " + std::to_string(used) + " labelled cases";
  return m;
}

void KindCounts::add(const QueryView& view, const std::vector<LineRef>& faulty_lines) {
  for (const auto& ql : view.lines) {
    const auto& file = view.files[ql.file];
    const auto li = static_cast<size_t>(ql.line - 1);
    const bool in_reach =
        !file.scope.found || file.scope.role[li] == ScopeRole::own || file.scope.role[li] == ScopeRole::support;
    const bool is_faulty = std::any_of(faulty_lines.begin(), faulty_lines.end(), [&](const LineRef& fl) {
      return fl.line == ql.line && fl.path == file.source->path;
    });
    add_line(file.structure->kind[li], in_reach, is_faulty);
  }
}

void KindCounts::add_line(const std::string& kind, bool in_reach, bool is_faulty) {
  if (in_reach) reach[kind] += 1.0;
  if (is_faulty) faulty[kind] += 1.0;
}

KindPrior KindCounts::prior() const {
  KindPrior p;
  double f_total = 0, r_total = 0;
  for (const auto& [k, v] : faulty) f_total += v;
  for (const auto& [k, v] : reach) r_total += v;
  std::unordered_map<std::string, bool> kinds;
  for (const auto& [k, v] : faulty) kinds[k] = true;
  for (const auto& [k, v] : reach) kinds[k] = true;
  const double K = static_cast<double>(kinds.size());
  for (const auto& [k, unused] : kinds) {
    const double f = faulty.contains(k) ? faulty.at(k) : 0.0;
    const double r = reach.contains(k) ? reach.at(k) : 0.0;
    p.llr[k] = std::log((f + 1.0) / (f_total + K)) - std::log((r + 1.0) / (r_total + K));
  }
  return p;
}

}  // namespace spark
