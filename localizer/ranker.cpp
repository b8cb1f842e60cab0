#include "ranker.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "case.h"
#include "text.h"

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
  m.weights[kSlice] = 1.5;  // setting a value the failing line uses: evidence like a traceback frame on the way
  m.origin = "prior";
  return m;
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
  j["training_cases"] = training_cases;
  j["training_rows"] = training_rows;
  for (size_t i = 0; i < kFeatureCount; ++i) j["weights"][std::string(feature_name(i))] = weights[i];
  j["kind_prior"] = nlohmann::json::object();
  for (const auto& [k, v] : kind_prior.llr) j["kind_prior"][k] = v;
  return write_file_atomic(path, j.dump(2) + "\n");
}

Result<RankerModel> RankerModel::load(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  try {
    const auto j = nlohmann::json::parse(*text);
    if (j.at("format").get<int>() != 1) return fail(path.string() + ": unknown ranker format");
    RankerModel m;
    m.origin = j.at("origin").get<std::string>();
    m.training_cases = j.at("training_cases").get<size_t>();
    m.training_rows = j.at("training_rows").get<size_t>();
    // A model saved before a feature existed weighs it 0 (`spark index` learns it anew).
    for (size_t i = 0; i < kFeatureCount; ++i)
      m.weights[i] = j.at("weights").value(std::string(feature_name(i)), 0.0);
    for (const auto& [k, v] : j.at("kind_prior").items()) m.kind_prior.llr[k] = v.get<double>();
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

RankerModel train_ranker(const std::vector<TrainingCase>& cases, const KindPrior& prior, const TrainingOptions& options) {
  std::vector<const FeatureVector*> rows;
  std::vector<double> y, w;
  size_t used = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& tc = cases[c];
    size_t pos = 0;
    std::vector<size_t> neg;
    for (size_t i = 0; i < tc.rows.size(); ++i) {
      if (tc.faulty[i]) ++pos;
      else neg.push_back(i);
    }
    if (pos == 0 || neg.empty()) continue;
    // Deterministic subsample of negatives: order by a hash of (case, line).
    if (neg.size() > options.negatives_per_case) {
      std::stable_sort(neg.begin(), neg.end(), [c](size_t a, size_t b) {
        return fnv1a64(std::to_string(c) + ":" + std::to_string(a)) < fnv1a64(std::to_string(c) + ":" + std::to_string(b));
      });
      neg.resize(options.negatives_per_case);
    }
    ++used;
    for (size_t i = 0; i < tc.rows.size(); ++i)
      if (tc.faulty[i]) {
        rows.push_back(&tc.rows[i]);
        y.push_back(1.0);
        w.push_back(0.5 / static_cast<double>(pos));
      }
    for (size_t i : neg) {
      rows.push_back(&tc.rows[i]);
      y.push_back(0.0);
      w.push_back(0.5 / static_cast<double>(neg.size()));
    }
  }
  if (used < options.min_training_cases) {
    RankerModel m = RankerModel::prior();
    m.kind_prior = prior;
    return m;
  }
  const size_t n = kFeatureCount;
  std::vector<double> beta(n, 0.0);
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<double> grad(n, 0.0), hess(n * n, 0.0);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto& x = *rows[r];
      double z = 0;
      for (size_t i = 0; i < n; ++i) z += beta[i] * x[i];
      const double p = 1.0 / (1.0 + std::exp(-z));
      const double g = w[r] * (y[r] - p);
      const double h = w[r] * p * (1.0 - p);
      for (size_t i = 0; i < n; ++i) {
        grad[i] += g * x[i];
        for (size_t j = 0; j < n; ++j) hess[i * n + j] += h * x[i] * x[j];
      }
    }
    // Ridge on every weight but the bias (scaled to the total weight, which is one per case).
    const double lambda = options.l2 / static_cast<double>(used);
    for (size_t i = 1; i < n; ++i) {
      grad[i] -= lambda * beta[i];
      hess[i * n + i] += lambda;
    }
    hess[0] += 1e-9;
    std::vector<double> step;
    if (!solve(hess, grad, n, step)) break;
    double change = 0;
    for (size_t i = 0; i < n; ++i) {
      beta[i] += step[i];
      change = std::max(change, std::fabs(step[i]));
    }
    if (change < 1e-6) break;
  }
  RankerModel m;
  for (size_t i = 0; i < n; ++i) m.weights[i] = beta[i];
  m.kind_prior = prior;
  m.training_cases = used;
  m.training_rows = rows.size();
  m.origin = "trained on " + std::to_string(used) + " labelled cases";
  return m;
}

void KindCounts::add(const QueryView& view, const std::vector<LineRef>& faulty_lines) {
  for (const auto& ql : view.lines) {
    const auto& file = view.files[ql.file];
    const auto li = static_cast<size_t>(ql.line - 1);
    const bool in_reach = !file.scope.found || file.scope.role[li] == ScopeRole::own ||
                          file.scope.role[li] == ScopeRole::support;
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
