// Prompts for the LLM stage: the paper's templates (Fig. 2, 7, 8, and naive RAG) filled for one failing test.
//
// The test code is shown with the file's own line numbers and blank lines hidden (the paper's preprocessing); the
// element ids the model answers with are those line numbers. A case with several files numbers them one after the
// other (the second file's line 1 is the first file's last line + 1), with a "# file:" header per file.
// When the prompt would not fit the model's context, the test code is cut to the lines nearest the failure by the
// rule in docs/LLM.md, and the prompt says so.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/case.h"
#include "formats/defaults.h"
#include "formats/redact.h"
#include "localizer/line_features.h"
#include "localizer/localizer.h"

namespace spark {

enum class Mode { builtin, baseline, default_mode, random, annotation_free, directive, naive_rag, hybrid };

// hybrid mode's second marker, on the built-in ranker's top lines: "# <<< ranker's suspect #N >>>" (a comment of the
// file's language: "// <<< …" in Java, JavaScript, TypeScript).
inline constexpr std::string_view kRankerMarkerPrefix = "# <<< ranker's suspect #";  // Python's
inline constexpr std::string_view kRankerMarkerText = "<<< ranker's suspect #";
std::string ranker_marker(size_t rank, Language language = Language::python);

Result<Mode> parse_mode(std::string_view name);  // builtin | baseline | default | random | annotation-free | …
std::string_view mode_name(Mode mode);
std::vector<std::string> mode_names();  // every mode's name, builtin first
// What each mode retrieves and whether it marks lines (the paper's Table 11).
Retrieval mode_retrieval(Mode mode);
bool mode_annotates(Mode mode);
std::string_view mode_template(Mode mode);  // the built-in template's name

// The built-in template texts (localizer/templates/*.txt, compiled in).
std::optional<std::string_view> builtin_template(std::string_view name);
std::vector<std::string> builtin_template_names();
// Checks a user's template: it must show the test code and the error message.
Status check_template(std::string_view text, const std::string& origin);

// A prompt's token bounds: the model's window (prompt + answer must fit) and the part of it kept for the answer
// (the request's max_tokens). The client's, when there is one; these defaults for prompts only shown or measured.
// `scale`: the model's tokens per token of estimate_tokens (src/code/tokens.h): the text's estimate times it is what
// must fit. 1 for tokenizers like the estimate's (cl100k, Qwen); more for ones that make more tokens of code.
inline constexpr double kMaxTokenScale = 8.0;  // a larger scale is taken as this one
struct TokenBudget {
  size_t context = defaults::kContextTokens;
  size_t answer = defaults::kAnswerTokens;
  double scale = 1.0;
};

struct PromptOptions {
  Mode mode = Mode::default_mode;
  size_t k = defaults::kTopK;
  std::string template_text;  // "" = the mode's built-in template
  TokenBudget tokens;
  const Redactor* redactor = nullptr;  // null: nothing redacted
  // What code the prompt shows: the whole test file(s), as the paper does, or only the failing test's reach (its own
  // lines, set-up, fixtures and helpers it uses, module-level code): other tests' lines are left out.
  bool test_scope_only = false;
  // hybrid: the built-in ranker's top lines, best first; each gets the second marker with its rank.
  std::vector<LineRef> ranker_top;
};

struct Prompt {
  std::string text;
  int max_element_id = 0;
  std::vector<LineRef> elements;            // element id → line of the query; index 0 unused
  std::vector<bool> shown;                  // element id → shown in the prompt
  size_t total_lines = 0, shown_lines = 0;  // non-blank lines of the query
  size_t error_chars_cut = 0;
  bool truncated = false;
  size_t estimated_tokens = 0;  // estimate_tokens(text) × the budget's scale, rounded up
  std::map<std::string, size_t> redactions;
  nlohmann::ordered_json schema;  // the answer's JSON schema (structured output), keys in the order a grammar writes
  std::vector<std::string> notes;
};

// Builds the prompt. `retrieved`: the similar cases as the localizer retrieved them (their faulty lines' text is
// the annotation-free context); `similar_case`: the most similar case in full (naive RAG), or null.
Result<Prompt> build_prompt(const Case& query, const QueryView& view, const std::vector<Annotation>& annotations,
                            const std::vector<RetrievedCase>& retrieved, const Case* similar_case,
                            StructureCache& cache, const PromptOptions& options);

// The answer format the prompt asks for ({output_template}).
std::string output_template();

// Fills {name} placeholders in one pass (values are never scanned again); unknown {…} stay as written.
std::string fill_template(std::string_view text, const std::map<std::string, std::string>& values);

}  // namespace spark
