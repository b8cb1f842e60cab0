#include "localizer/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace spark {

CaseMetrics case_metrics(const std::vector<std::string>& predicted, const std::vector<std::string>& faulty, size_t k) {
  CaseMetrics m;
  const std::set<std::string> truth(faulty.begin(), faulty.end());
  if (k == 0 || truth.empty()) return m;
  std::set<std::string> seen;
  size_t rank = 0, found = 0;
  double sum = 0;
  for (const auto& p : predicted) {
    if (rank >= k) break;
    if (!seen.insert(p).second) continue;  // a repeat names no new element and takes no rank
    ++rank;
    if (truth.contains(p)) {
      ++found;
      sum += static_cast<double>(found) / static_cast<double>(rank);
      if (m.rr == 0) m.rr = 1.0 / static_cast<double>(rank);
    }
  }
  m.precision = static_cast<double>(found) / static_cast<double>(k);
  m.recall = static_cast<double>(found) / static_cast<double>(truth.size());
  m.hit = found > 0 ? 1 : 0;
  m.ap_paper = found > 0 ? sum / static_cast<double>(found) : 0;
  m.ap_standard = sum / static_cast<double>(std::min(truth.size(), k));
  return m;
}

CaseMetrics mean_metrics(const std::vector<CaseMetrics>& cases) {
  CaseMetrics m;
  if (cases.empty()) return m;
  for (const auto& c : cases) {
    m.precision += c.precision;
    m.recall += c.recall;
    m.hit += c.hit;
    m.ap_paper += c.ap_paper;
    m.ap_standard += c.ap_standard;
    m.rr += c.rr;
  }
  const double n = static_cast<double>(cases.size());
  m.precision /= n;
  m.recall /= n;
  m.hit /= n;
  m.ap_paper /= n;
  m.ap_standard /= n;
  m.rr /= n;
  return m;
}

namespace {

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

double mcnemar_p(size_t b, size_t c) {
  const size_t n = b + c;
  if (n == 0) return 1.0;
  const size_t lo = std::min(b, c);
  if (n > 50000) {
    const double chi =
        std::pow(std::abs(static_cast<double>(b) - static_cast<double>(c)) - 1.0, 2) / static_cast<double>(n);
    return std::erfc(std::sqrt(std::max(0.0, chi) / 2.0));
  }
  // P(X ≤ lo) for X ~ Binomial(n, 1/2), summed in log space.
  double p = 0;
  for (size_t i = 0; i <= lo; ++i)
    p += std::exp(std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
                  std::lgamma(static_cast<double>(n - i) + 1) - static_cast<double>(n) * std::log(2.0));
  return std::min(1.0, 2 * p);
}

double wilcoxon_p(const std::vector<double>& differences) {
  std::vector<double> d;
  for (double x : differences)
    if (std::abs(x) > 1e-12) d.push_back(x);
  const size_t n = d.size();
  if (n == 0) return 1.0;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::abs(d[a]) < std::abs(d[b]); });
  // Doubled average ranks stay integers: ties at positions i..j get i + j + 2 (1-based ranks summed).
  std::vector<long> rank2(n);
  double tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && std::abs(std::abs(d[order[j + 1]]) - std::abs(d[order[i]])) < 1e-12) ++j;
    for (size_t t = i; t <= j; ++t) rank2[order[t]] = static_cast<long>(i + j + 2);
    const double size = static_cast<double>(j - i + 1);
    tie_term += size * size * size - size;
    i = j + 1;
  }
  long w2 = 0, total2 = 0;  // doubled W+ and doubled total rank sum
  for (size_t i = 0; i < n; ++i) {
    total2 += rank2[i];
    if (d[i] > 0) w2 += rank2[i];
  }
  if (n <= 60) {
    // Exact: the number of sign assignments per doubled rank sum.
    std::vector<double> ways(static_cast<size_t>(total2) + 1, 0.0);
    ways[0] = 1;
    long reach = 0;
    for (size_t i = 0; i < n; ++i) {
      for (long s = reach; s >= 0; --s)
        if (ways[static_cast<size_t>(s)] > 0) ways[static_cast<size_t>(s + rank2[i])] += ways[static_cast<size_t>(s)];
      reach += rank2[i];
    }
    const long lo = std::min(w2, total2 - w2);
    double tail = 0, all = 0;
    for (long s = 0; s <= total2; ++s) {
      all += ways[static_cast<size_t>(s)];
      if (s <= lo) tail += ways[static_cast<size_t>(s)];
    }
    return std::min(1.0, 2 * tail / all);
  }
  const double nn = static_cast<double>(n);
  const double mean = nn * (nn + 1) / 4;
  const double var = nn * (nn + 1) * (2 * nn + 1) / 24 - tie_term / 48;
  const double w = static_cast<double>(w2) / 2;
  const double z = (std::abs(w - mean) - 0.5) / std::sqrt(var);
  return std::min(1.0, 2 * normal_sf(std::max(0.0, z)));
}

}  // namespace spark
