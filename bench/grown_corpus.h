// Knowledge bases grown from a corpus by perturbing copies of its cases (bench/scale_bench.cpp, bench/ranker_retrain.cpp).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "base/text.h"
#include "formats/case.h"

namespace spark::bench {

// Copy j of `base`: numbers in the error message changed at random (30 % of them), the failure time moved by j
// minutes, and with probability `new_version_share` one non-blank line of the test file gets a trailing comment (a new
// version of the file, which spark must parse). Its faulty lines are the base's.
inline Case perturb(const Case& base, size_t j, std::mt19937& rng, double new_version_share) {
  Case c = base;
  c.id = base.id + "-p" + std::to_string(j);
  c.record["id"] = c.id;
  std::string m;
  for (char ch : base.error_message) m.push_back(ch >= '0' && ch <= '9' && rng() % 10 < 3 ? static_cast<char>('0' + rng() % 10) : ch);
  c.error_message = m;
  c.failure_epoch = base.failure_epoch + static_cast<int64_t>(j) * 60;
  c.failure_time = format_iso8601(c.failure_epoch);
  c.record["failure_time"] = c.failure_time;
  if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < new_version_share) {
    auto& f = c.files.front();
    const auto lines = split_lines(f.content);
    std::vector<size_t> candidates;
    for (size_t i = 0; i < lines.size(); ++i)
      if (!is_blank(lines[i]) && lines[i].find('#') == std::string_view::npos) candidates.push_back(i);
    if (!candidates.empty()) {
      const size_t target = candidates[rng() % candidates.size()];
      std::string out;
      for (size_t i = 0; i < lines.size(); ++i) {
        out.append(lines[i]);
        if (i == target) out += "  # v" + std::to_string(j);
        out.push_back('\n');
      }
      f.content = out;
    }
  }
  return c;
}

}  // namespace spark::bench
