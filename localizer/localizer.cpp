#include "localizer/localizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "base/clock.h"
#include "base/text.h"
#include "code/scope.h"
#include "formats/error_message.h"
#include "localizer/line_features.h"

namespace spark {

// ---------------------------------------------------------------------------------------------------------------
// Algorithm 1

namespace {

std::string short_sha(const std::optional<std::string>& sha) { return sha ? sha->substr(0, 10) : std::string(); }

// Why a line ranks where it does, strongest contribution first.
std::vector<std::string> explain(const QueryLine& ql, const RankerModel& model,
                                 const std::vector<RetrievedCase>& retrieved,
                                 const std::vector<RetrievedFaultyLine>& faulty, const std::string& kind,
                                 double epsilon, const std::optional<GateReport>& gate, const ChangeSince* change) {
  std::vector<std::pair<double, std::string>> r;
  const auto contrib = [&](Feature f) { return model.weights[f] * ql.x[f]; };
  if (ql.best_match >= 0 && ql.best_distance <= kResemblanceRadius) {
    const auto& fl = faulty[static_cast<size_t>(ql.best_match)];
    const auto& rc = retrieved[fl.case_index];
    std::string s = (ql.best_distance <= epsilon ? "annotated: resembles faulty line " : "similar to faulty line ") +
                    std::to_string(fl.line) + " of case " + rc.id;
    if (rc.fixed_commit) s += " (fixed in " + short_sha(rc.fixed_commit) + ")";
    s += ", distance " + fixed(ql.best_distance, 2) + ", case similarity " + fixed(rc.similarity, 2);
    r.emplace_back(contrib(kAnnotated) + contrib(kResembles), s);
  }
  if (ql.fix_match >= 0 && ql.x[kResemblesFix] > 0) {
    const auto& fl = faulty[static_cast<size_t>(ql.fix_match)];
    const auto& rc = retrieved[fl.case_index];
    r.emplace_back(contrib(kResemblesFix), "resembles the fixed form of faulty line " + std::to_string(fl.line) +
                                               " of case " + rc.id + " more than the faulty one (distance " +
                                               fixed(ql.fix_distance, 2) + "): not annotated");
  }
  if (ql.x[kTracebackLine] > 0)
    r.emplace_back(contrib(kTracebackLine), "the test stopped here (deepest traceback frame in the test code)");
  if (ql.x[kTracebackFrame] > 0) r.emplace_back(contrib(kTracebackFrame), "named by the traceback");
  // exp(-Δ/3) > 0.05 up to Δ = 8 statements: farther, "shortly before" would not be true.
  constexpr double kShortlyBefore = 0.05;
  // A decorator (a parametrize row) is the test's, above its body: it feeds the test rather than running in it.
  const bool decorator = kind == "decorator";
  if (ql.x[kNearFailure] > kShortlyBefore) {
    const std::string statements =
        std::to_string(static_cast<int>(std::lround(-kNearFailureDecay * std::log(ql.x[kNearFailure])))) +
        " statement(s)";
    r.emplace_back(contrib(kNearFailure), decorator
                                              ? "decorates the failing test, " + statements + " above the failing line"
                                              : "ran shortly before the failing line (" + statements + " before it)");
  }
  if (ql.x[kNotReached] > 0)
    r.emplace_back(contrib(kNotReached), "after the failing line in the same function (did not run)");
  if (ql.x[kOwnBody] > 0)
    r.emplace_back(contrib(kOwnBody),
                   decorator ? "in the failing test's decorators" : "in the failing test's own body");
  if (ql.x[kSupport] > 0) r.emplace_back(contrib(kSupport), "in set-up, a fixture or a helper the failing test uses");
  if (ql.x[kKindPrior] != 0 && !kind.empty())
    r.emplace_back(contrib(kKindPrior), "'" + kind + "' lines are " + (ql.x[kKindPrior] > 0 ? "more" : "less") +
                                            " often faulty than others in this knowledge base");
  if (ql.x[kErrorOverlap] > 0)
    r.emplace_back(contrib(kErrorOverlap),
                   "shares " + fixed(100 * ql.x[kErrorOverlap], 0) + "% of its names and values with the error");
  if (ql.x[kSlice] > 0)
    r.emplace_back(contrib(kSlice), "sets a value the failing line uses (data flow, " +
                                        std::to_string(static_cast<int>(std::lround(1.0 / ql.x[kSlice]))) +
                                        " step(s) back)");
  if (ql.x[kValueMatch] > 0)
    r.emplace_back(contrib(kValueMatch), ql.x[kValueMatch] >= 1.0
                                             ? "holds a value the failure shows"
                                             : "holds " + fixed(100 * ql.x[kValueMatch], 0) +
                                                   "% of its literals among the values the failure shows");
  if (ql.x[kNameMatch] > 0) r.emplace_back(contrib(kNameMatch), "uses a name the error quotes");
  if (change && ql.change_line >= 0 && ql.x[kChangedSincePass] > 0) {
    const std::string& by = change->lines[static_cast<size_t>(ql.change_line)].commit;
    r.emplace_back(contrib(kChangedSincePass),
                   (by.empty() ? std::string("changed") : "changed in " + by.substr(0, 10)) +
                       " since the test last passed at " + change->last_pass.substr(0, 10));
  }
  if (change && ql.change_product >= 0 && ql.x[kUsesProductChange] > 0) {
    const auto& p = change->product[static_cast<size_t>(ql.change_product)];
    r.emplace_back(contrib(kUsesProductChange),
                   (p.literal ? "holds " + p.token + ", an old value that " : "uses " + p.token + ", which ") +
                       (p.commit.empty() ? std::string("a product change") : p.commit.substr(0, 10)) + " changed" +
                       (p.path.empty() ? "" : " in " + p.path) + " since the test last passed at " +
                       change->last_pass.substr(0, 10));
  }
  if (ql.x[kSameTest] > 0)
    r.emplace_back(contrib(kSameTest),
                   "resembles a faulty line of an earlier failure of this same test (trust learnt: " +
                       std::string(model.weights[kSameTest] >= 0 ? "more" : "less") + ")");
  if (ql.x[kTracebackLine] > 0 && gate)
    r.emplace_back(contrib(kGate),
                   "the failure's form (" +
                       (gate->exception.empty() ? std::string("no exception read") : gate->exception) +
                       (gate->raised_in_test ? ", raised in the test's code" : ", raised beneath the test") +
                       (gate->generic_check ? ", a generic check" : "") +
                       ") makes this statement the fault with probability " + fixed(gate->probability, 2));
  std::stable_sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  out.reserve(r.size());
  for (auto& [w, s] : r) out.push_back(std::move(s));
  return out;
}

}  // namespace

// Algorithm 1 of the paper, one function per step over plain data; Localizer::localize runs them in order.
namespace {

// D' = filter(τ_f, D, p): the labelled cases the policy keeps for this query, and the cases never retrieved for it.
struct Filtered {
  std::vector<int64_t> subset;           // rowids, ascending, none of `excluded`
  std::unordered_set<int64_t> excluded;  // the query itself, its exact duplicates, and the caller's exclusions
};

Filtered filter_step(std::span<const CaseFacts> facts, const FactsByHash* by_hash, const std::vector<int64_t>& labelled,
                     const Case& query, const Policy& policy, const std::unordered_set<int64_t>& extra_excluded,
                     Localization& out) {
  Filtered d;
  d.excluded = extra_excluded;
  // The query itself (its id) and its exact duplicates (its content key) are never retrieved. The cases file holds
  // 64-bit hashes of both (with the length): a wrong match is a ~1e-14 chance per query at 10^5 cases.
  const uint64_t id_hash = fact_hash(query.id), key_hash = fact_hash(content_key(query));
  if (by_hash) {
    for (const auto* sorted : {&by_hash->id, &by_hash->key}) {
      const uint64_t h = sorted == &by_hash->id ? id_hash : key_hash;
      for (auto it = std::lower_bound(sorted->begin(), sorted->end(),
                                      std::pair<uint64_t, int64_t>{h, std::numeric_limits<int64_t>::min()});
           it != sorted->end() && it->first == h; ++it)
        d.excluded.insert(it->second);
    }
  } else {
    for (const auto& f : facts)
      if (f.id_hash == id_hash || f.key_hash == key_hash) d.excluded.insert(f.rowid);
  }
  out.knowledge_base_size = labelled.size();
  // `all` keeps every labelled case: no pass over the cases per query.
  d.subset = policy.name == "all" ? labelled : filter_by_policy(facts, query.failure_epoch, policy);
  if (d.excluded.size() > 64) {
    std::erase_if(d.subset, [&](int64_t id) { return d.excluded.contains(id); });
  } else {
    for (int64_t id : d.excluded)  // ascending rowids: each excluded one found by bisection
      if (auto at = std::lower_bound(d.subset.begin(), d.subset.end(), id); at != d.subset.end() && *at == id)
        d.subset.erase(at);
  }
  out.filtered_size = d.subset.size();
  return d;
}

// S = search(τ_f, D', r): the r most similar cases of D' (or r drawn at random, or none, by the mode's retrieval),
// those below the similarity floor dropped. The notes say why S is empty when it is.
Result<std::vector<SearchHit>> search_step(const KnowledgeBase* kb, SearchEngine* engine,
                                           const std::vector<int64_t>& labelled, const Case& query,
                                           const LocalizeOptions& options, const Filtered& d, Localization& out) {
  std::vector<SearchHit> similar;
  if (options.retrieval == Retrieval::none) {
    // The baseline: no knowledge is used.
  } else if (options.retrieval == Retrieval::random && !d.subset.empty()) {
    std::vector<int64_t> drawn;
    for (int64_t id : d.subset)
      if (std::binary_search(labelled.begin(), labelled.end(), id)) drawn.push_back(id);
    std::mt19937_64 rng(options.seed ^ fnv1a64(query.id.empty() ? query.test_id : query.id));
    std::shuffle(drawn.begin(), drawn.end(), rng);
    auto qv = engine->embed(query);
    TRY(qv);
    for (size_t i = 0; i < std::min(options.r, drawn.size()); ++i) {
      const auto v = engine->index().vector(drawn[i]);
      double dot = 0;
      for (size_t j = 0; j < v.size() && j < qv->size(); ++j) dot += static_cast<double>(v[j]) * (*qv)[j];
      similar.push_back({drawn[i], static_cast<float>(dot)});
    }
  } else if (!d.subset.empty()) {
    auto qv = engine->embed(query);
    TRY(qv);
    const bool everything = d.subset.size() + d.excluded.size() >= engine->index().size() &&
                            out.knowledge_base_size == engine->facts().size();
    similar = engine->search(*qv, options.r, everything ? std::nullopt : std::optional(d.subset), d.excluded);
    const size_t before = similar.size();
    std::erase_if(similar, [&](const SearchHit& h) { return h.similarity < options.similarity_floor; });
    if (similar.empty() && before > 0)
      out.notes.push_back("no case in the knowledge base is similar enough (best cosine below the floor " +
                          fixed(options.similarity_floor, 2) + "): baseline behaviour, no annotations");
  } else if (!kb) {
    out.notes.push_back("no knowledge base yet: baseline behaviour, no annotations");
  } else if (!engine || out.knowledge_base_size == 0) {
    out.notes.push_back(
        "the knowledge base has no labelled case yet (it learns one when a failing test is fixed): "
        "baseline behaviour, no annotations");
  } else {
    out.notes.push_back("the policy " + options.policy.name +
                        " leaves no case for this failure: baseline behaviour, no annotations");
  }
  return similar;
}

// X = retrieve(S): the faulty lines' contents of the similar cases, with the cases' summaries in out.retrieved. Each
// case's label comes from the index's labels file, else (a case embedded after the build) from the store.
Result<std::vector<RetrievedFaultyLine>> retrieve_step(KnowledgeBase& kb, const SearchEngine* engine,
                                                       const std::vector<SearchHit>& similar, std::vector<double>& sims,
                                                       Localization& out) {
  std::vector<RetrievedFaultyLine> faulty;
  for (const auto& hit : similar) {
    auto kept = engine ? engine->label(hit.rowid) : Result<std::optional<CaseLabel>>{std::nullopt};
    TRY(kept);
    std::optional<CaseLabel> label = std::move(*kept);
    if (!label) {
      auto c = kb.load(hit.rowid);
      TRY(c);
      label = case_label(*c);
    }
    RetrievedCase rc;
    rc.rowid = hit.rowid;
    rc.id = label->id;
    rc.test_id = label->test_id;
    rc.project = label->project;
    rc.faulty_commit = label->faulty_commit;
    rc.fixed_commit = label->fixed_commit;
    rc.similarity = hit.similarity;
    const size_t first = faulty.size();
    append_faulty_lines(*label, out.retrieved.size(), faulty);
    for (const auto& l : label->lines) rc.faulty_lines.push_back(l.at);
    rc.fixes = std::move(label->fixes);
    for (size_t i = first; i < faulty.size(); ++i) rc.faulty_text.push_back(faulty[i].text);
    sims.push_back(hit.similarity);
    out.retrieved.push_back(std::move(rc));
  }

  return faulty;
}

// The change since the last pass on the lines the test runs, as the change features found it (before their scaling: a
// change of every line the test runs still changed them).
ChangeEvidence change_evidence(const QueryView& view) {
  ChangeEvidence e;
  e.last_pass = view.change->last_pass;
  e.break_commit = view.change->break_commit;
  for (const auto& ql : view.lines) {
    const std::string& path = view.files[ql.file].source->path;
    if (ql.change_line >= 0)
      e.changed.push_back({{path, ql.line}, view.change->lines[static_cast<size_t>(ql.change_line)].commit});
    if (ql.change_product >= 0) {
      const auto& p = view.change->product[static_cast<size_t>(ql.change_product)];
      e.uses.push_back({{path, ql.line}, p.token, p.literal, p.path, p.commit});
    }
  }
  e.changed_elsewhere = view.change->lines.size() - e.changed.size();
  e.product_changes = view.change->product.size();
  return e;
}

// τ' = annotate(τ_f, X, ε): each query line's closest retrieved faulty line, the lines within ε annotated
// (out.annotations), and the features the ranker weighs; the notes say what the ranker could read only in part.
// The annotation stops at options.deadline (seconds since `start`): the lines compared by then keep what they found,
// the others are ranked without it, and a note says so.
void annotate_step(QueryView& view, const Case& query, const std::vector<RetrievedFaultyLine>& faulty,
                   const std::vector<double>& sims, const LocalizeOptions& options, const RankerModel& model,
                   std::chrono::steady_clock::time_point start, Localization& out) {
  const auto progress =
      compute_features(view, faulty, sims, options.epsilon, model.kind_prior, query.error_message,
                       [&] { return seconds_since(start) >= options.deadline; });
  if (progress.stopped)
    out.notes.push_back("annotation stopped at the deadline (" + defaults::shortest(options.deadline) + " s) after " +
                        std::to_string(progress.compared) + " of " + std::to_string(progress.lines) +
                        " lines: the others were ranked without their resemblance to the retrieved faulty lines");
  apply_gate(model.gate, view);
  if (view.change) out.change = change_evidence(view);
  // Inputs the ranker can read only in part: said in the notes, the ranking goes on.
  for (const auto& f : view.files)
    if (f.structure->language == Language::other)
      out.notes.push_back(f.source->path +
                          ": spark reads no structure in this language (it knows Python, Java, "
                          "JavaScript and TypeScript): its lines are ranked one by one, without statements, blocks, "
                          "functions or the test's scope");
    else if (f.structure->has_syntax_errors)
      out.notes.push_back(f.source->path + " does not parse cleanly as " +
                          std::string(language_display_name(f.structure->language)) +
                          " (syntax errors): its statements, blocks and data flow near the errors are approximate; "
                          "every line is still ranked");
  if (view.frames.empty())
    out.notes.push_back("the error message holds no traceback: ranked without a failing statement");
  else if (view.stop_file < 0)
    out.notes.push_back(
        "the traceback names no line of the test files (it ends in other code): ranked without a "
        "failing statement");
  if (!query.test_id.empty() &&
      std::none_of(view.files.begin(), view.files.end(), [](const QueryView::File& f) { return f.scope.found; }))
    out.notes.push_back("the test id " + query.test_id +
                        " names no function found in the test files: ranked without "
                        "the test's scope (every line alike)");
  // A message over the limit, or one cut to it where it entered spark (the line that notes the cut says how much).
  if (const size_t cut = bytes_cut(query.error_message); query.error_message.size() > kErrorMessageReadLimit || cut > 0)
    out.notes.push_back("the error message is " +
                        fixed(static_cast<double>(query.error_message.size() + cut) / (1 << 20), 1) +
                        " MB: the ranker read its first " + std::to_string(kErrorMessageReadLimit / 4 / 1024) +
                        " KB and its last " + std::to_string(kErrorMessageReadLimit * 3 / 4 / 1024) + " KB");
  if (view.has_stop) {
    GateReport g;
    g.line = {view.files[static_cast<size_t>(view.stop_file)].source->path, view.stop_line};
    g.probability = model.gate.probability(view.gate);
    g.exception = view.form.exception;
    g.form = std::string(exception_group_name(view.form.group));
    g.raised_in_test = view.raised_in_test;
    g.generic_check = view.form.generic_check;
    out.gate = g;
  }
  for (const auto& ql : view.lines)
    if (ql.best_match >= 0 && ql.best_distance <= options.epsilon) {
      const auto& fl = faulty[static_cast<size_t>(ql.best_match)];
      out.annotations.push_back(
          {{view.files[ql.file].source->path, ql.line}, ql.best_distance, fl.case_index, {fl.path, fl.line}});
    }
}

// A parametrized Python test's failing row is named by its id: the rest of the parametrize decorator that holds it
// (the decorator's head, the argnames, the list's brackets) holds none of the row's data, and ranks right below the
// row instead of beside it. A line of it with evidence of its own (annotated, a traceback frame, repeated by the
// error) keeps its score.
void rank_rows_above_their_decorator(const QueryView& view, std::vector<double>& probability) {
  if (view.files.empty() || !view.test_id.ends_with(']')) return;
  const QueryView::File& file = view.files.front();
  if (!file.structure || file.structure->language != Language::python) return;
  const CodeStructure& s = *file.structure;
  const ParamRows rows = match_param_rows(s, file.source->content, view.test_id);
  const auto in_a_row = [&](int line) {
    for (const auto* spans : {&rows.failing, &rows.others})
      for (const auto& [first, last] : *spans)
        if (line >= first && line <= last) return true;
    return false;
  };
  for (const auto& [first, last] : rows.failing) {
    if (first < 1 || first > s.line_count) continue;
    const int decorator = s.statement[static_cast<size_t>(first - 1)];
    double row = 0;
    for (size_t li = 0; li < view.lines.size(); ++li)
      if (view.lines[li].file == 0 && view.lines[li].line >= first && view.lines[li].line <= last)
        row = std::max(row, probability[li]);
    for (size_t li = 0; li < view.lines.size(); ++li) {
      const QueryLine& ql = view.lines[li];
      if (ql.file != 0 || ql.line < 1 || ql.line > s.line_count || in_a_row(ql.line) ||
          s.statement[static_cast<size_t>(ql.line - 1)] != decorator)
        continue;
      if (ql.x[kAnnotated] > 0 || ql.x[kTracebackLine] > 0 || ql.x[kTracebackFrame] > 0 || ql.x[kErrorOverlap] > 0 ||
          ql.x[kValueMatch] > 0 || ql.x[kNameMatch] > 0)
        continue;
      probability[li] = std::min(probability[li], std::nextafter(row, 0.0));
    }
  }
}

// One element of the ranking: the lines of one unit at the requested level (one line at the line level), scored
// by their best line.
struct Element {
  const QueryLine* best = nullptr;
  double score = -1e300;
  int first = 0, last = 0;
  bool annotated = false;
  const char* cannot_be_faulty = nullptr;  // why it comes last (set once, before sorting)
};

// The query's lines gathered into elements at options.level, in file and unit order.
std::vector<Element> elements_of(const QueryView& view, const std::vector<double>& probability,
                                 const LocalizeOptions& options) {
  std::map<std::pair<size_t, int>, Element> elements;
  for (size_t li = 0; li < view.lines.size(); ++li) {
    const QueryLine& ql = view.lines[li];
    const auto& s = *view.files[ql.file].structure;
    const int unit = unit_of(s, options.level, ql.line);
    Element& g = elements[{ql.file, options.level == Level::line ? ql.line : unit}];
    const double score = probability[li];
    if (!g.best || score > g.score) {
      g.best = &ql;
      g.score = score;
    }
    g.first = g.first == 0 ? ql.line : std::min(g.first, ql.line);
    g.last = std::max(g.last, ql.line);
    g.annotated = g.annotated || (ql.best_match >= 0 && ql.best_distance <= options.epsilon);
  }
  std::vector<Element> out;
  out.reserve(elements.size());
  for (auto& [key, g] : elements) out.push_back(g);
  return out;
}

// Lines that cannot be the fault come after every other element unless evidence says otherwise (a similar case's
// faulty line resembles them, the traceback names them, or the error repeats their names or values): comments,
// `def`/`class` header lines, imports, docstrings and `pass`. Decorators are not among them: a parametrize list
// holds test data that can be wrong. (Tree-sitter puts a comment that opens a block into that block's statement,
// so a comment is told by its text.) Returns why, or nullptr.
const char* cannot_be_faulty(const QueryView& view, const Element& g, const LocalizeOptions& options) {
  if (options.level != Level::line && options.level != Level::statement) return nullptr;
  const QueryLine& ql = *g.best;
  if (g.annotated || ql.x[kTracebackLine] > 0 || ql.x[kTracebackFrame] > 0 || ql.x[kErrorOverlap] > 0) return nullptr;
  const std::string_view text = trim(ql.text);
  const CodeStructure& s = *view.files[ql.file].structure;
  const bool braces =
      s.language == Language::java || s.language == Language::javascript || s.language == Language::typescript;
  if (text.starts_with('#') && !braces) return "a comment";
  if (braces && (text.starts_with("//") || text.starts_with("/*") || text.starts_with("*"))) return "a comment";
  const std::string& kind = s.kind[static_cast<size_t>(ql.line - 1)];
  if ((kind == "def" && (text.starts_with("def ") || text.starts_with("async def "))) ||
      (kind == "class" && text.starts_with("class ")))
    return "a definition's header";
  // A Java method's header (not a JavaScript test's call, whose arguments can hold test data).
  if (kind == "def" && s.language == Language::java && text.find('=') == std::string_view::npos)
    return "a definition's header";
  if (kind == "brace") return "a closing bracket";
  if (kind == "import" || kind == "import_from" || kind == "future_import" || kind == "package") return "an import";
  if (kind == "docstring") return "a docstring";
  if (kind == "pass") return "a pass statement";
  return nullptr;
}

// --explain's breakdown of one line: its features, weights and score, and the rank of the element holding it.
LineExplanation explain_line(const QueryView& view, const std::vector<double>& probability,
                             const std::vector<const Element*>& order, const RankerModel& model,
                             const LocalizeOptions& options) {
  LineExplanation ex;
  ex.line = *options.explain;
  if (ex.line.path.empty() && !view.files.empty()) ex.line.path = view.files.front().source->path;
  const QueryLine* found = nullptr;
  for (const auto& ql : view.lines)
    if (ql.line == ex.line.line && same_file(view.files[ql.file].source->path, ex.line.path)) found = &ql;
  if (!found) {
    ex.note = ex.line.path + ":" + std::to_string(ex.line.line) +
              " is not a non-blank line of the test files: blank lines and lines outside them are not ranked";
    return ex;
  }
  ex.code = std::string(trim(found->text));
  for (size_t f = 0; f < kFeatureCount; ++f) {
    const double c = model.weights[f] * found->x[f];
    ex.terms.push_back({std::string(feature_name(f)), found->x[f], model.weights[f], c});
  }
  ex.score = probability[static_cast<size_t>(found - view.lines.data())];
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i]->best->file == found->file && order[i]->first <= found->line && found->line <= order[i]->last &&
        (options.level != Level::line || order[i]->best == found))
      ex.rank = i + 1;
  return ex;
}

// L = rank(τ', k): line scores from the ranker, aggregated to the requested element level by their best line, the
// top k with their reasons (and --explain's breakdown).
void rank_step(const QueryView& view, const std::vector<RetrievedFaultyLine>& faulty, const LocalizeOptions& options,
               const RankerModel& model, Localization& out) {
  std::vector<double> probability;
  {
    std::vector<FeatureVector> rows;
    rows.reserve(view.lines.size());
    for (const auto& ql : view.lines) rows.push_back(ql.x);
    probability = model.probabilities(rows);
  }
  rank_rows_above_their_decorator(view, probability);
  std::vector<Element> elements = elements_of(view, probability, options);
  // Once per element, not per comparison: a 7,000-line file sorts ~90,000 times.
  for (auto& g : elements) g.cannot_be_faulty = cannot_be_faulty(view, g, options);
  std::vector<const Element*> order;
  order.reserve(elements.size());
  for (const auto& g : elements) order.push_back(&g);
  const auto distance_to_stop = [&](const Element* g) {
    return view.stop_file == static_cast<int>(g->best->file) ? std::abs(g->best->line - view.stop_line) : 1 << 30;
  };
  std::stable_sort(order.begin(), order.end(), [&](const Element* a, const Element* b) {
    const bool a_last = a->cannot_be_faulty != nullptr, b_last = b->cannot_be_faulty != nullptr;
    if (a_last != b_last) return b_last;
    if (a->score != b->score) return a->score > b->score;
    if (a->annotated != b->annotated) return a->annotated;
    return distance_to_stop(a) < distance_to_stop(b);
  });
  if (options.explain) out.explanation = explain_line(view, probability, order, model, options);
  if (order.size() > options.k) order.resize(options.k);
  for (const Element* g : order) {
    const QueryLine& ql = *g->best;
    RankedElement e;
    e.path = view.files[ql.file].source->path;
    e.line = options.level == Level::line ? ql.line : g->first;
    e.end_line = options.level == Level::line ? ql.line : g->last;
    e.score = g->score;
    e.code = std::string(trim(view.files[ql.file].lines[static_cast<size_t>(e.line - 1)]));
    e.annotated = g->annotated;
    e.reasons =
        explain(ql, model, out.retrieved, faulty, view.files[ql.file].structure->kind[static_cast<size_t>(ql.line - 1)],
                options.epsilon, out.gate, view.change);
    if (const char* what = g->cannot_be_faulty)
      e.reasons.push_back(std::string(what) +
                          " with no evidence against it: ranked after the lines that can be faulty");
    out.ranked.push_back(std::move(e));
  }
}

}  // namespace

Result<Localization> Localizer::localize(const Case& query, const LocalizeOptions& options,
                                         const std::unordered_set<int64_t>& extra_excluded) {
  const auto start = std::chrono::steady_clock::now();
  Localization out;
  out.test_id = query.test_id;
  StructureCache& cache = engine_ ? engine_->structures() : fallback_structures_;
  const RankerModel model = options.ranker ? *options.ranker : engine_ ? engine_->ranker() : RankerModel::prior();
  out.ranker = "builtin (" + model.origin + ")";

  Filtered d;
  d.excluded = extra_excluded;
  static const std::vector<int64_t> kNone;
  const std::vector<int64_t>& labelled = kb_ && engine_ ? labelled_rowids() : kNone;
  if (kb_ && engine_)
    d = filter_step(engine_->facts(), facts_by_hash(), labelled, query, options.policy, extra_excluded, out);
  auto similar = search_step(kb_, engine_, labelled, query, options, d, out);
  TRY(similar);
  out.degraded = similar->empty();
  std::vector<double> sims;
  auto faulty =
      similar->empty() ? Result<std::vector<RetrievedFaultyLine>>{} : retrieve_step(*kb_, engine_, *similar, sims, out);
  TRY(faulty);
  QueryView view = make_query_view(query, cache);
  const auto test_file =
      std::find_if(view.files.begin(), view.files.end(), [](const auto& f) { return f.scope.found; });
  if (const auto* f = test_file != view.files.end() ? &*test_file : view.files.empty() ? nullptr : &view.files.front())
    out.language = std::string(language_name(f->structure->language));
  annotate_step(view, query, *faulty, sims, options, model, start, out);
  rank_step(view, *faulty, options, model, out);
  out.suggestions = suggest_edits(query, out);
  return out;
}

const FactsByHash* Localizer::facts_by_hash() {
  // A process that localizes one failure scans the facts once; from the second failure on, a lookup pays.
  if (!facts_by_hash_ && ++localized_ >= 2) {
    facts_by_hash_.emplace();
    const auto facts = engine_->facts();
    facts_by_hash_->id.reserve(facts.size());
    facts_by_hash_->key.reserve(facts.size());
    for (const auto& f : facts) {
      facts_by_hash_->id.emplace_back(f.id_hash, f.rowid);
      facts_by_hash_->key.emplace_back(f.key_hash, f.rowid);
    }
    std::sort(facts_by_hash_->id.begin(), facts_by_hash_->id.end());
    std::sort(facts_by_hash_->key.begin(), facts_by_hash_->key.end());
  }
  return facts_by_hash_ ? &*facts_by_hash_ : nullptr;
}

const std::vector<int64_t>& Localizer::labelled_rowids() {
  if (!labelled_rowids_) {
    labelled_rowids_.emplace();
    labelled_rowids_->reserve(engine_->facts().size());
    for (const auto& f : engine_->facts())
      if (f.labelled) labelled_rowids_->push_back(f.rowid);
    // The facts are in rowid order (the cases file, the store's rows): sorted already, but for a caller's own order.
    if (!std::is_sorted(labelled_rowids_->begin(), labelled_rowids_->end()))
      std::sort(labelled_rowids_->begin(), labelled_rowids_->end());
  }
  return *labelled_rowids_;
}

std::string annotation_marker(Language language) {
  return std::string(comment_prefix(language)) + " " + std::string(kAnnotationText);
}

bool strip_annotation_marker(std::string& line) {
  const auto at = line.find(kAnnotationText);
  if (at == std::string::npos) return false;
  size_t cut = at;
  while (cut > 0 && line[cut - 1] == ' ') --cut;
  if (cut >= 2 && line.compare(cut - 2, 2, "//") == 0)
    cut -= 2;
  else if (cut >= 1 && line[cut - 1] == '#')
    cut -= 1;
  line.erase(cut);
  return true;
}

std::string Localizer::render_annotated(const Case& query, const std::vector<Annotation>& annotations) {
  std::set<std::pair<std::string, int>> marked;
  for (const auto& a : annotations) marked.insert({a.line.path, a.line.line});
  std::string out;
  for (const auto& f : query.files) {
    const Language language = language_for(f.path, query.language);
    if (query.files.size() > 1) out += std::string(comment_prefix(language)) + " file: " + f.path + "\n";
    const std::string marker = annotation_marker(language);
    const auto lines = split_lines(f.content);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (is_blank(lines[i])) continue;  // the paper's preprocessing: blank lines hidden, comments kept
      out += std::to_string(i + 1) + ": " + std::string(lines[i]);
      if (marked.contains({f.path, static_cast<int>(i) + 1})) out += "  " + marker;
      out += "\n";
    }
  }
  return out;
}

}  // namespace spark
