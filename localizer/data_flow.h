// Data flow inside a failing test, for the ranker: which statements set the values the failing statement uses.
//
// A failure often shows at an assertion while the faulty line set a value wrong earlier ("the error does not point
// at it"). The backward slice from the failing statement follows names backwards through the test function:
// a statement that defines a name the failing statement uses is in the slice at hop 1; a statement that defines a
// name a hop-1 statement uses is at hop 2; and so on. Definitions are read from each statement's text:
//   - assignment targets (`x = …`, `a, b = …`, `x[i] = …` defines x, `self.y = …`), augmented assignments;
//   - `for t in …` and `with … as t` targets;
//   - a call on an object as a statement of its own (`x.append(…)`, `self.inventory.add(…)`): it may change it.
// `self.` attributes the slice needs are also followed into the test's set-up lines (setup_method, fixtures, the
// helpers it calls: ScopeRole::support), and a needed name that is a support function's name (a fixture the test
// takes as a parameter, a helper it calls) brings in that function's `return`/`yield` statements and, backwards
// from them, what they use. A heuristic over tokens, not a full parse: good enough to rank, explainable.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "code/python_structure.h"
#include "code/scope.h"

namespace spark {

// The names a statement defines and uses. Names are dotted ("self.inventory", "shape.width"); a use of
// "self.inventory.total" also counts as a use of "self.inventory".
struct DefUse {
  std::vector<std::string> defs, uses;
};
DefUse def_use(std::string_view statement);
// The same for a statement of `language`: Java's and JavaScript's declarations (`int total = …`, `const { a } = …`),
// enhanced for loops and `//` comments read as such; Python's (and other languages') as above.
DefUse def_use(std::string_view statement, Language language);

// The backward slice of the statement at `stop_line`: statement first line → hops (1 = defines a name the failing
// statement uses). `lines` are the file's lines; `roles` (may be empty) marks the failing test's support lines.
std::map<int, int> backward_slice(const CodeStructure& s, const std::vector<std::string_view>& lines, int stop_line,
                                  const std::vector<ScopeRole>& roles);

}  // namespace spark
