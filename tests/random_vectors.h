// Random L2-normalised vectors for the vector index's tests and benchmarks (deterministic per seed).
#pragma once

#include <cmath>
#include <random>
#include <vector>

namespace spark::testing {

inline std::vector<float> random_unit_vectors(size_t n, size_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> v(n * dim);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (size_t d = 0; d < dim; ++d) s += std::pow(v[i * dim + d] = g(rng), 2);
    for (size_t d = 0; d < dim; ++d) v[i * dim + d] /= static_cast<float>(std::sqrt(s));
  }
  return v;
}

}  // namespace spark::testing
