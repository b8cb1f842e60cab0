// Whose fault a failure likely is: the test's, the product's (the code under test), the machine's,
// or a flaky test's — or `unknown` when the evidence is too weak (below kVerdictConfidenceFloor).
//
// In order:
//   1. flaky: the test's history (formats/triage.h) saw it fail and pass at the same commit among its recent runs;
//   2. environment: the failure's own words say the machine failed it — a module that is not the repository's own
//      cannot be imported, a connection is refused or a host not found, a run timed out, a permission is denied, a
//      disk is full, memory ran out, pytest's temporary folder could not be made; a missing module of the repository
//      itself does not count (the repository's folders, and the traceback's paths, say which are its own);
//   3. test or product, by a score in log-odds for "test" (each term below is a reason in the report):
//        +1.5  the test's own code (its file, the conftest.py files and helpers it reaches) changed between its last
//              pass and this failure (ChangesSinceLastPass); when the case's change is known line by line
//              (Localization::change), the lines the test runs must have changed: a change of other tests' lines
//              in its file does not count
//        -2.0  only code outside the test code changed between them (the reason names the lines it runs that use
//              what the product change changed)
//        +1.0  the exception was raised in the test's own code (the deepest frame of the repository's code — not
//              the standard library's, an installed package's or a frozen module's — is in its files)
//        -1.0  it was raised beneath the test, in the code under test, and is no assertion of the test's
//        +1.0  a similar labelled case (similarity ≥ 0.8; +0.5 from 0.6) was a fault of test code
//        +0.5  a line of the test resembles a similar case's faulty line (annotated)
//        -1.5  a failure fixed outside the test code (a product example kept by the miner) reads like this one
//              more than the most similar labelled case does
//      probability = sigmoid(score); the likelier of test and product is the verdict when its probability is at
//      least kVerdictConfidenceFloor, else `unknown`.
// The weights are reasoning, not fitting; docs/RESULTS.md measures them on test-side and product-side faults.
// Thread safety: pure functions.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "formats/case.h"
#include "formats/triage.h"

namespace spark {

struct Localization;

inline constexpr double kVerdictConfidenceFloor = 0.6;

// A failure fixed outside the test code, kept by the miner as an example of a product fault.
struct ProductExample {
  std::string test_id, commit;
  std::set<std::string> words;  // the words of its failure text, read once (product_example)
};
ProductExample product_example(std::string test_id, std::string commit, std::string_view message);

// What changed between a failing test's last recorded pass and this failure (its commit, or the work tree when the
// failure is not committed), by whose code it is: the strongest evidence a CI run has of whose
// fault a regression is. Paths are the repository's.
struct ChangesSinceLastPass {
  std::string last_passed;             // the commit it last passed at
  std::string failing;                 // the commit it fails at, or "the work tree"
  std::vector<std::string> test_code;  // changed files that are test code (`mine.test_code`)
  std::vector<std::string> product;    // changed files that are not
};

struct VerdictContext {
  std::filesystem::path repository;              // the repository's root ("" when not known)
  std::vector<ProductExample> product_examples;  // from the knowledge base
};

// The environment's words in `error_message`, when a raised exception's own line says the machine failed the test: a
// short reason naming the line that says it; nullopt otherwise. `own_module` says whether a module is the repository's
// own.
std::optional<std::string> environment_reason(std::string_view error_message,
                                              const std::function<bool(std::string_view)>& own_module);

// `changes`, when known, weighs what changed since the test last passed: test code the failing test reaches (a file
// of query.files; with loc.change, a line it runs) changed → test; only code outside the test code changed → product.
// loc.change alone (a --since without recorded runs) weighs the same way.
Verdict judge(const Case& query, const Localization& loc, const std::optional<TestHistory>& history,
              const VerdictContext& context, const std::optional<ChangesSinceLastPass>& changes = std::nullopt);

}  // namespace spark
