// What a change of a Python test module's imports can break: the names whose binding it changed. An edit of a
// module's import line reaches only the tests that use a name it binds differently (added, removed, or bound to
// another thing), not every test of the file, so the scan (discover.h) narrows such a change to those tests.
// Contract: pure functions over file contents and their structures (code_structure.h); thread-safe.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "code/code_structure.h"

namespace spark {

struct ImportChange {
  std::set<int> import_lines;   // the changed lines (of the old version) that belong to module-level imports
  std::set<std::string> names;  // the names bound differently after the change ("json", "Schema")
  bool star = false;            // a `from x import *` changed: any name may have changed
  // A changed name is used by module-level code besides the imports (a constant, a class's base or attribute): it
  // can reach every test.
  bool used_at_module_level = false;
};

// The module-level import statements among the `changed` lines of `before` (structure `sb`) and the names whose
// binding differs between `before` and `after` (structure `sa`): `import a.b` binds a, `import a.b as c` binds c,
// `from m import x as y` binds y (to m.x). Statements inside functions or under `if`/`try` at module level count as
// module-level too (their lines lie outside every function).
ImportChange python_import_change(std::string_view before, const CodeStructure& sb, std::string_view after,
                                  const CodeStructure& sa, const std::vector<int>& changed);

// Whether lines [first, last] of `text` use one of `names` as a whole identifier.
bool uses_any_name(std::string_view text, int first, int last, const std::set<std::string>& names);

}  // namespace spark
