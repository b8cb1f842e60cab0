// Suggested edits: where a retrieved case's fix was a token-level change of its faulty line — a
// renamed attribute, method or name, a changed keyword, literal or constant — and a line of the query that the
// localizer points at holds the same old token(s), the same change proposed on the query's line. Never applied.
//
// A past fix is token-level when its faulty line's fix is one line and, after the tokens the two lines share at both
// ends, one to three tokens were replaced by one to three, at least one of them a name, a number or a string (not
// punctuation alone). A
// change of names applies wherever the same names stand in the same place (after a "." when they did); a change of
// literals only on a line that resembles the faulty line (normalized Levenshtein ≤ kResemblanceRadius), and never
// when the literal occurs more than once on the query's line (which one is meant is not known).
//
// The candidate lines are the ranked elements' (weight: the element's score), then the annotated lines the ranker left
// out of its top k (weight 0.5); confidence = the case's similarity × the weight: comparable between suggestions, not
// a calibrated probability. Suggestions come in the ranked lines' order, then the rest by confidence. When several
// cases propose different edits of one line, all are listed, the most confident first; `preferred` marks it.
// Thread safety: pure functions.
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/names.h"
#include "code/code_structure.h"
#include "formats/case.h"

namespace spark {

struct Localization;

// What running the failing test with a suggestion applied said (verify.h); absent when it was not asked for.
enum class VerifyStatus { verified, not_verified, not_run };
inline constexpr Named<VerifyStatus> kVerifyStatusNames[] = {{VerifyStatus::verified, "verified"},
                                                             {VerifyStatus::not_verified, "not verified"},
                                                             {VerifyStatus::not_run, "not run"}};
static_assert(std::size(kVerifyStatusNames) == static_cast<size_t>(VerifyStatus::not_run) + 1);
inline std::string_view verify_status_name(VerifyStatus s) { return name_of(kVerifyStatusNames, s); }

struct Verification {
  VerifyStatus status = VerifyStatus::not_run;
  std::string message;  // not verified: the new failure's message; not run: why; verified: ""
  double seconds = 0;   // the edited run's (0 when none ran)
};

struct Suggestion {
  LineRef line;            // the query's line
  std::string old_line;    // its text
  std::string new_line;    // its text with the change made
  std::string old_tokens;  // the change itself, as the past fix made it: "total_price" → "total"
  std::string new_tokens;
  std::string from_case;  // the retrieved case whose fix it repeats
  LineRef from_line;      // that case's faulty line
  double confidence = 0;
  bool preferred = true;  // false: a more confident (or a verified) suggestion edits the same line differently
  std::optional<Verification> verification;
};

// One line's tokens: names, numbers, strings (with their quotes and prefix), and single punctuation characters,
// each with its byte span in the line. Whitespace and a trailing comment ("#" in Python, "//" elsewhere) are not
// tokens.
struct CodeToken {
  enum Kind { name, number, string, punct } kind;
  size_t begin = 0, end = 0;  // bytes of the line
};
std::vector<CodeToken> code_tokens(std::string_view line, Language language);

// The suggestions for `query` from what `loc` retrieved, annotated and ranked.
std::vector<Suggestion> suggest_edits(const Case& query, const Localization& loc);

}  // namespace spark
