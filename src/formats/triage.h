// What spark says of a failure before "which line": its test's history from the recorded outcomes, and
// whose fault it likely is. Plain data: the miner fills the history (MiningStore::history), the localizer the verdict
// (localizer/verdict.h); the reports print both (docs/FORMATS.md, `history` and `verdict`).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "base/names.h"

namespace spark {

// A test's recorded runs, in the order of their commits' times (the outcome's time for a commit the repository does
// not have), so outcomes recorded out of order count in history's order.
struct TestHistory {
  // The failing streak that ends with the newest recorded run (empty when that run passed or none failed).
  std::optional<std::string> first_failing_commit;  // its first failing run's commit
  size_t failing_runs = 0;                          // failing runs in it
  std::optional<std::string> last_passed_commit;    // the pass before it (or the newest pass, with no streak)
  std::optional<double> age_days;                   // from its first failing run to now
  // Commits where the test failed and passed: such a failure is flaky and never learnt as a case.
  size_t flaky_runs = 0;
  bool flaky = false;  // one of them is among the last 20 runs or in the failing streak
  size_t runs = 0;     // every recorded run of the test (passed, failed, error; skipped ones not counted)
};

// Whose fault a failure likely is: the test's (a case to localize), the product's (the code under test), the
// machine's (environment), a flaky test's, or not known well enough to say (`unknown`, below
// kVerdictConfidenceFloor).
enum class VerdictKind { test, product, environment, flaky, unknown };
inline constexpr Named<VerdictKind> kVerdictKindNames[] = {{VerdictKind::test, "test"},
                                                           {VerdictKind::product, "product"},
                                                           {VerdictKind::environment, "environment"},
                                                           {VerdictKind::flaky, "flaky"},
                                                           {VerdictKind::unknown, "unknown"}};
static_assert(std::size(kVerdictKindNames) == static_cast<size_t>(VerdictKind::unknown) + 1);
inline std::string_view verdict_kind_name(VerdictKind kind) { return name_of(kVerdictKindNames, kind); }

struct Verdict {
  VerdictKind kind = VerdictKind::unknown;
  double probability = 0;  // of `kind` (for unknown: of the likelier of test and product)
  std::vector<std::string> reasons;
};

}  // namespace spark
