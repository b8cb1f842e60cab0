// Line features the built-in ranker scores: what is known offline about each line of a failing test.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "code/levenshtein.h"
#include "code/python_structure.h"
#include "code/scope.h"
#include "formats/case.h"
#include "formats/error_message.h"
#include "formats/failure_form.h"

namespace spark {

class StructureCache;

// One retrieved case's faulty lines (the context retrieval module's X, Definition 3), with how far to trust it.
struct RetrievedFaultyLine {
  size_t case_index = 0;  // into the retrieved list
  std::string path;
  int line = 0;
  std::string text;
  PreparedLine prepared{""};
  std::string test_id;        // the retrieved case's test
  bool outside_test = false;  // the faulty line lies outside its case's own test function (another test, set-up…)
  // The line's replacement in its case's fix (Case::fixes), blank lines left out; empty when the case kept no fix or
  // the fix deleted the line. A query line closer to one of these than to `text` is already fixed: fix-aware
  // annotation counts it as evidence against (kResemblesFix), never as a match.
  std::vector<PreparedLine> fixed;
};

// What retrieve(S) takes of a labelled case: who it is, its faulty lines with their contents, whether each lies
// outside the case's own test function (found by its `def` line and indentation, without parsing), each line's
// replacement when its fix is a few lines, and the fixes as the case holds them. A few hundred bytes where the case
// is its whole test files: `spark index` keeps one per labelled case beside the vectors (index_files::kLabels), so a
// localization reads no file contents of the cases it retrieves.
struct CaseLabel {
  std::string id, test_id, project;
  std::optional<std::string> faulty_commit, fixed_commit;
  struct Line {
    LineRef at;
    std::string text;
    bool outside_test = false;
    std::vector<std::string> fixed;  // RetrievedFaultyLine::fixed's lines
  };
  std::vector<Line> lines;
  std::map<LineRef, std::vector<std::string>> fixes;  // Case::fixes
};
CaseLabel case_label(const Case& c);
// The same from a stored record (KnowledgeBase::records: a case without files and error message, checked when it was
// stored) and `lines_of`, the lines of one of its files by path (null for a file it does not have). nullopt for a
// record that does not read back as a labelled case.
using LinesOf = std::function<const std::vector<std::string_view>*(const std::string& path)>;
std::optional<CaseLabel> stored_case_label(std::string_view record, const LinesOf& lines_of);
// The label as one JSON object, and back; an error for anything that is not one.
std::string label_to_json(const CaseLabel& label);
Result<CaseLabel> label_from_json(std::string_view text);

// retrieve(S) for one case: appends its faulty lines to `out`, tagged with `case_index`.
void append_faulty_lines(const CaseLabel& label, size_t case_index, std::vector<RetrievedFaultyLine>& out);
void append_faulty_lines(const Case& c, size_t case_index, std::vector<RetrievedFaultyLine>& out);

// Beyond this normalized Levenshtein distance a query line does not resemble a retrieved faulty line at all: the
// graded resemblance 1 - d/radius falls from 1 (the same line) to 0 here. Half the characters differ at 0.5: past it,
// two lines of one test file share little more than their indentation and punctuation.
inline constexpr double kResemblanceRadius = 0.5;
// kNearFailure decays as exp(-Δ/kNearFailureDecay) over the Δ statements between a line and where execution stopped:
// a value is most often set within a few statements of the check that reads it.
inline constexpr double kNearFailureDecay = 3.0;

enum Feature : size_t {
  kBias,
  kAnnotated,       // within ε of a retrieved faulty line, weighted by that case's similarity
  kResembles,       // graded resemblance 1 - d/kResemblanceRadius to a retrieved faulty line, weighted by similarity
  kTracebackLine,   // the deepest traceback frame in the test files (where the test stopped)
  kTracebackFrame,  // another traceback frame in the test files (a helper or fixture on the way)
  kNotReached,      // in the failing test after the line where it stopped: never executed
  kNearFailure,     // statements before the stopping line, decaying with distance: exp(-Δ/kNearFailureDecay)
  kOwnBody,         // the failing test function's own lines
  kSupport,         // set-up, fixtures and helpers the test uses
  kModuleLevel,     // module-level and class-body lines
  kKindPrior,       // log-likelihood ratio of the statement kind being faulty (learnt from the knowledge base)
  kErrorOverlap,    // share of the line's literals and names that the error lines repeat
  kSlice,           // sets a value the failing statement uses (backward data-flow slice, data_flow.h): 1 / hops
  kValueMatch,      // holds a value the failure shows (a compared value, a diff line, a missing key): failure_form.h
  kNameMatch,       // uses a name the failure quotes (undefined name, missing attribute, unexpected keyword)
  kGate,            // on the failing statement: the gate's log-odds that the failing statement itself is the fault
  kNamedLine,       // the very line a traceback frame in the test files prints (not another line of its statement)
  kSameTest,        // graded resemblance to a faulty line of a retrieved case of the same test (trust: same test)
  kOutsideTest,     // graded resemblance to a retrieved faulty line that lay outside its case's own test function
  kResemblesFix,    // graded resemblance to a retrieved faulty line's *fixed* version, closer than to the faulty one
  // The change since the test last passed (Case::change; both 0 when none is known), on lines the test reaches:
  kChangedSincePass,   // the line differs from its version at the last pass (a commit since changed it); both scaled
                       // by the share of the test's lines the change left alone (weigh_change_by_specificity)
  kUsesProductChange,  // the line uses a name, or holds an old literal, that a product change since then changed
  kFeatureCount
};
std::string_view feature_name(size_t f);

using FeatureVector = std::array<double, kFeatureCount>;

// Per-line view of the query that features are computed over.
struct QueryLine {
  size_t file = 0;
  int line = 0;  // 1-based
  std::string_view text;
  FeatureVector x{};
  // Provenance for reasons.
  int best_match = -1;  // index into the retrieved faulty lines
  double best_distance = 1.0;
  int fix_match = -1;  // the retrieved faulty line whose fix this line resembles most (kResemblesFix)
  double fix_distance = 1.0;
  int change_line = -1;     // index into the view's change->lines (kChangedSincePass)
  int change_product = -1;  // index into the view's change->product (kUsesProductChange)
};

// What the gate weighs: the failure's form and how the evidence divides between the failing statement and the rest.
enum GateFeature : size_t {
  kGateBias,
  kGateAssertion,  // exception groups (failure_form.h); "other" and "none" are the baseline
  kGateType,
  kGateName,
  kGateLookup,
  kGateValue,
  kGateRaisedInTest,    // the deepest frame of the whole traceback is in the test files (not beneath, in the code under
                        // test)
  kGateStopValue,       // value match on the failing statement
  kGateOtherValue,      // best value match on another line the test reaches
  kGateStopName,        // name match on the failing statement
  kGateOtherName,       // best name match elsewhere
  kGateStopAnnotated,   // resemblance of the failing statement to a retrieved faulty line
  kGateOtherAnnotated,  // best resemblance elsewhere
  kGateStopIsAssert,    // the failing statement is an assertion (`assert`, `self.assert…`, `pytest.raises`)
  kGateGenericCheck,    // the assertion checks truth or compares with None/True/False/0/1/empty (failure_form.h)
  kGateCount
};
std::string_view gate_feature_name(size_t f);
using GateVector = std::array<double, kGateCount>;

struct QueryView {
  struct File {
    const SourceFile* source = nullptr;
    std::vector<std::string_view> lines;
    std::shared_ptr<const CodeStructure> structure;
    TestScope scope;
  };
  std::vector<File> files;
  std::string test_id;
  std::string failure;  // the error message as failure_text reads it (every pytest form in its short form)
  std::vector<TracebackFrame> frames;
  int stop_file = -1, stop_line = 0;  // the deepest traceback frame inside the test files
  std::vector<QueryLine> lines;       // every non-blank line of every file
  FailureForm form;                   // read from the error message by compute_features
  bool raised_in_test = false;        // the deepest frame of the traceback is in the test files
  bool has_stop = false;              // some line is the failing statement (x[kTracebackLine] > 0)
  GateVector gate{};                  // filled by compute_features when has_stop
  const ChangeSince* change = nullptr;  // the query's change since its last pass (points into the query), if known
};

// Prepares the view: structures, scope of the failing test, traceback frames, one QueryLine per non-blank line.
QueryView make_query_view(const Case& query, StructureCache& cache);

// Kind prior: log P(kind | faulty) / P(kind | line in the failing test's reach), from labelled cases.
struct KindPrior {
  std::unordered_map<std::string, double> llr;
  double get(const std::string& kind) const;
};

// How far the annotation went: the first `compared` of the view's `lines` were compared with every retrieved faulty
// line; the rest, when `stopped`, with some or none of them (their resemblance features are what was found).
struct AnnotationProgress {
  size_t compared = 0;
  size_t lines = 0;
  bool stopped = false;
};

// Fills every line's features. `faulty` are the retrieved faulty lines with their cases' similarities.
// `past_deadline`, when given, is asked before each line's comparisons and after every ~1 M code points compared
// within one line; once it answers true, no more lines are compared with the faulty lines (their other features are
// still filled), and the progress says where it stopped.
AnnotationProgress compute_features(QueryView& view, const std::vector<RetrievedFaultyLine>& faulty,
                                    const std::vector<double>& case_similarity, double epsilon,
                                    const KindPrior& prior, std::string_view error_message,
                                    const std::function<bool()>& past_deadline = {});

}  // namespace spark
