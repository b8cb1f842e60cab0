// The failure's form, read from its error message: which exception ended the test, what values an assertion
// compared, which names the message quotes. The ranker uses it to tell "the failing line is itself wrong" from
// "a value was set wrong earlier" (docs/RANKER.md).
// Contract: a pure function of the message: thread-safe; a message it cannot read gives an empty form (bounded by
// the sizes below), never an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark {

enum class ExceptionGroup {
  none,       // no exception line found
  assertion,  // AssertionError: a bare `assert` or a unittest assertXxx comparison
  type,       // TypeError
  name,       // NameError, UnboundLocalError, AttributeError, ImportError, ModuleNotFoundError
  lookup,     // KeyError, IndexError, LookupError, StopIteration
  value,      // ValueError and its kin (UnicodeError, JSONDecodeError)
  other,
};
std::string_view exception_group_name(ExceptionGroup g);

struct FailureForm {
  std::string exception;  // the exception's unqualified class name, "AssertionError" for a bare assert; "" if none
  ExceptionGroup group = ExceptionGroup::none;
  std::string message;  // its message (the text after "Name: ", or the failed `assert …` expression)
  // Values the message shows: both sides of a failed comparison (`assert 21 == 20`, `[1, 2] != [1, 3]`), pytest's
  // `where` values, the `-`/`+` lines of its diffs, unittest's "First differing element" lines, a missing key, and
  // the quoted strings (≥ 3 characters) of the exception's message.
  // At most kMaxValues, each at most kMaxValueLength characters (longer ones are cut).
  std::vector<std::string> values;
  // Identifiers the message quotes: the undefined name, the missing attribute, the unexpected keyword argument, the
  // function a TypeError names, the name an import could not find, a missing key that looks like an identifier, and
  // names inside an exception's repr anywhere in the last block (`<Result AttributeError('echo_line')>`).
  std::vector<std::string> names;
  std::vector<std::string> suggestions;  // "Did you mean: 'x'?"
  // The assertion checks a generic expectation: truthiness (`assert x`, `assert not x`, "False is not true") or a
  // comparison with None, True, False, 0, 1, -1 or an empty literal. Such a check is rarely itself the mistake.
  bool generic_check = false;

  static constexpr size_t kMaxValues = 32;
  static constexpr size_t kMaxValueLength = 4096;
};

// Reads the form of the last exception in `message` (pytest's "E   " lines, else Python's native traceback tail).
// Never fails: what it cannot read stays empty. Linear in the message's size.
FailureForm parse_failure_form(std::string_view message);

// Canonical text for comparing a value with source code: double quotes become single quotes, whitespace runs one
// space, trimmed. Python's repr prints strings in single quotes; sources often use double.
std::string canonical_code(std::string_view text);

// String literals (with their quotes, canonical) and numbers of at least two characters in a line of code or a value.
std::vector<std::string> literal_tokens(std::string_view text);

}  // namespace spark
