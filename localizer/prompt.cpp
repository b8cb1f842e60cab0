#include "localizer/prompt.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/text.h"
#include "code/scope.h"
#include "code/structure_cache.h"
#include "code/tokens.h"
#include "formats/error_message.h"

namespace spark {

namespace {

const std::map<std::string, std::string_view, std::less<>>& templates() {
  static const std::map<std::string, std::string_view, std::less<>> t = {
#include "templates.inc"
  };
  return t;
}

struct ModeInfo {
  Mode mode;
  std::string_view name;
  Retrieval retrieval;
  bool annotates;
  std::string_view template_name;
};

constexpr ModeInfo kModes[] = {
    {Mode::builtin, "builtin", Retrieval::similar, true, "baseline"},
    {Mode::baseline, "baseline", Retrieval::none, false, "baseline"},
    {Mode::default_mode, "default", Retrieval::similar, true, "baseline"},
    {Mode::random, "random", Retrieval::random, true, "baseline"},
    {Mode::annotation_free, "annotation-free", Retrieval::similar, false, "annotation-free"},
    {Mode::directive, "directive", Retrieval::similar, true, "directive"},
    {Mode::naive_rag, "naive-rag", Retrieval::similar, false, "naive-rag"},
    {Mode::hybrid, "hybrid", Retrieval::similar, true, "hybrid"},
};

const ModeInfo& info(Mode m) {
  for (const auto& i : kModes)
    if (i.mode == m) return i;
  return kModes[0];
}

// One file's lines as candidates for the prompt.
struct Candidate {
  size_t file = 0;
  int line = 0;      // 1-based, in the file
  int id = 0;        // element id
  std::string text;  // rendered, with newline
  size_t tokens = 0;
  int tier = 0;      // lower = kept first when the code must be cut
  int distance = 0;  // within a tier, nearer first
};

// Chooses which candidates fit in `budget` tokens, by (tier, distance, line); returns how many tokens they use.
// A count of estimate_tokens() in the model's tokens, and back (rounded against the prompt: up, then down).
size_t scaled_tokens(size_t estimate, const TokenBudget& b) {
  return static_cast<size_t>(std::ceil(static_cast<double>(estimate) * std::clamp(b.scale, 0.25, kMaxTokenScale)));
}
size_t estimate_units(size_t tokens, const TokenBudget& b) {
  return static_cast<size_t>(static_cast<double>(tokens) / std::clamp(b.scale, 0.25, kMaxTokenScale));
}

size_t choose(const std::vector<Candidate>& lines, size_t budget, std::vector<bool>& keep) {
  keep.assign(lines.size(), false);
  size_t total = 0;
  for (const auto& c : lines) total += c.tokens;
  if (total <= budget) {
    keep.assign(lines.size(), true);
    return total;
  }
  std::vector<size_t> order(lines.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (lines[a].tier != lines[b].tier) return lines[a].tier < lines[b].tier;
    return lines[a].distance < lines[b].distance;
  });
  size_t used = 0;
  for (size_t i : order) {
    if (used + lines[i].tokens > budget) continue;  // a shorter line further down may still fit
    keep[i] = true;
    used += lines[i].tokens;
  }
  return used;
}

// Renders the kept lines in file order, with a header per file and a note when lines were left out.
std::string render(const std::vector<Candidate>& lines, const std::vector<bool>& keep,
                   const std::vector<std::string>& file_paths, size_t kept_count) {
  std::string out;
  if (kept_count < lines.size())
    out += "# (" + std::to_string(kept_count) + " of " + std::to_string(lines.size()) +
           " lines shown: the rest did not fit the model's context)\n";
  size_t file = static_cast<size_t>(-1);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!keep[i]) continue;
    if (lines[i].file != file) {
      file = lines[i].file;
      if (file_paths.size() > 1) out += "# file: " + file_paths[file] + "\n";
    }
    out += lines[i].text;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int tier_of_role(ScopeRole r) {
  switch (r) {
    case ScopeRole::own:
      return 2;
    case ScopeRole::support:
      return 3;
    case ScopeRole::module:
      return 4;
    case ScopeRole::outside:
      return 5;
  }
  return 5;
}

// Cuts an over-long error message to `max_tokens`: a quarter from its head, the rest from its tail (the exception
// and the deepest frames are at the end), with a marker saying how much was cut.
std::string cut_error(const std::string& message, size_t max_tokens, size_t& cut_chars) {
  const size_t tokens = estimate_tokens(message);
  cut_chars = 0;
  if (tokens <= max_tokens) return message;
  const double chars_per_token = static_cast<double>(message.size()) / static_cast<double>(std::max<size_t>(1, tokens));
  const size_t keep = static_cast<size_t>(static_cast<double>(max_tokens) * chars_per_token * 0.95);
  size_t head = keep / 4, tail = keep - head;
  while (head > 0 && (static_cast<unsigned char>(message[head]) & 0xC0) == 0x80) --head;
  size_t tail_start = message.size() - std::min(tail, message.size());
  while (tail_start < message.size() && (static_cast<unsigned char>(message[tail_start]) & 0xC0) == 0x80) ++tail_start;
  cut_chars = tail_start - head;
  return message.substr(0, head) + "\n[… " + std::to_string(cut_chars) + " characters cut …]\n" +
         message.substr(tail_start);
}

struct CodeView {
  std::vector<Candidate> lines;
  std::vector<std::string> paths;
};

// The candidates of a case's files: ids, tiers and distances per the cutting rule.
CodeView candidates(const QueryView& view, const std::set<std::pair<std::string, int>>& marked,
                    const std::set<std::pair<std::string, int>>& anchors, const Redactor* redactor,
                    std::map<std::string, size_t>& redactions, std::vector<LineRef>* elements, bool scope_only,
                    const std::map<std::pair<std::string, int>, size_t>& ranker_rank = {}) {
  CodeView cv;
  int offset = 0;
  if (elements) elements->assign(1, LineRef{});
  for (size_t f = 0; f < view.files.size(); ++f) {
    const SourceFile& src = *view.files[f].source;
    cv.paths.push_back(src.path);
    std::string content = src.content;
    if (redactor) redactor->redact(content, redactions);
    const auto lines = split_lines(content);
    const auto& role = view.files[f].scope.role;
    const Language language = view.files[f].structure ? view.files[f].structure->language : Language::python;
    // Anchors in this file: the traceback's lines (query) or the faulty lines (a retrieved case).
    std::vector<int> anchor_lines;
    for (const auto& [path, line] : anchors)
      if (path == src.path) anchor_lines.push_back(line);
    for (size_t i = 0; i < lines.size(); ++i) {
      const int line = static_cast<int>(i) + 1;
      if (elements) elements->push_back({src.path, line});
      if (is_blank(lines[i])) continue;
      Candidate cand;
      cand.file = f;
      cand.line = line;
      cand.id = offset + line;
      cand.text = std::to_string(cand.id) + ": " + std::string(lines[i]);
      if (marked.contains({src.path, line})) cand.text += "  " + annotation_marker(language);
      const auto ranked = ranker_rank.find({src.path, line});
      if (ranked != ranker_rank.end()) cand.text += "  " + ranker_marker(ranked->second, language);
      cand.text += "\n";
      cand.tokens = estimate_tokens(cand.text);
      int nearest = 1 << 30;
      for (int a : anchor_lines) nearest = std::min(nearest, std::abs(a - line));
      if (nearest <= 2)
        cand.tier = 0;
      else if (marked.contains({src.path, line}) || ranked != ranker_rank.end())
        cand.tier = 1;
      else
        cand.tier = i < role.size() ? tier_of_role(role[i]) : 5;
      cand.distance = nearest == (1 << 30) ? line : nearest;
      // Another test's line, annotated or not, cannot have caused this failure; a line the traceback names stays.
      if (scope_only && view.files[f].scope.found && cand.tier != 0 && i < role.size() && role[i] == ScopeRole::outside)
        continue;
      cv.lines.push_back(std::move(cand));
    }
    offset += static_cast<int>(lines.size());
  }
  return cv;
}

std::set<std::pair<std::string, int>> traceback_anchors(const QueryView& view) {
  std::set<std::pair<std::string, int>> out;
  for (const auto& fr : view.frames)
    for (const auto& f : view.files)
      if (same_file(fr.path, f.source->path)) out.insert({f.source->path, fr.line});
  return out;
}

// Trailing blank lines of runner output carry nothing.
std::string rstrip_output(std::string t) {
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ' || t.back() == '\t')) t.pop_back();
  return t;
}

// The language the prompt names and comments in: the test files' (the first file's), else the case's field; and the
// name the prompt shows for it.
std::pair<Language, std::string> prompt_language(const Case& query, const QueryView& view) {
  Language language = language_for(
      query.files.empty() ? std::string_view() : std::string_view(query.files.front().path), query.language);
  if (!view.files.empty() && view.files.front().structure) language = view.files.front().structure->language;
  return {language, language == Language::other && !query.language.empty()
                        ? query.language
                        : std::string(language_display_name(language))};
}

// {similar_faulty_lines}: annotation-free mode's retrieved faulty lines, or naive RAG's labelled faulty lines of the
// similar case with their line numbers as its code shows them; redacted.
std::string similar_faulty_lines(const std::vector<RetrievedCase>& retrieved, const Case* similar_case,
                                 const PromptOptions& options, std::map<std::string, size_t>& redactions) {
  std::string similar_lines;
  if (options.mode == Mode::annotation_free) {
    for (const auto& rc : retrieved)
      for (const auto& t : rc.faulty_text) similar_lines += std::string(trim(t)) + "\n";
  } else if (options.mode == Mode::naive_rag && similar_case) {
    for (const auto& fl : similar_case->faulty_lines)
      for (const auto& f : similar_case->files)
        if (f.path == fl.path) {
          const auto lines = split_lines(f.content);
          if (fl.line >= 1 && static_cast<size_t>(fl.line) <= lines.size())
            similar_lines +=
                std::to_string(fl.line) + ": " + std::string(lines[static_cast<size_t>(fl.line - 1)]) + "\n";
        }
  }
  if (!similar_lines.empty()) similar_lines.pop_back();
  if (options.redactor) options.redactor->redact(similar_lines, redactions);
  return similar_lines;
}

// Naive RAG's similar case as the prompt shows it: its code (faulty lines anchored) and error message, redacted.
struct SimilarContext {
  CodeView code;
  std::string error;
};
SimilarContext similar_context(const Case& similar_case, StructureCache& cache, const PromptOptions& options,
                               std::map<std::string, size_t>& redactions) {
  SimilarContext out;
  const QueryView similar_view = make_query_view(similar_case, cache);
  std::set<std::pair<std::string, int>> faulty;
  for (const auto& fl : similar_case.faulty_lines) faulty.insert({fl.path, fl.line});
  out.code = candidates(similar_view, {}, faulty, options.redactor, redactions, nullptr, options.test_scope_only);
  out.error = rstrip_output(canonical_traceback(similar_case.error_message));
  if (options.redactor) options.redactor->redact(out.error, redactions);
  return out;
}

// Chooses the code lines that fit `code_room` tokens and fills {test_code} (and naive RAG's {similar_test_code}).
// Token estimates of pieces do not add up exactly (pieces merge at their seams), and the cut notes cost a few
// tokens: the whole prompt is measured, and the code's room shrinks by the overshoot until it fits.
Status fit_code(Prompt& p, std::map<std::string, std::string>& values, std::string_view tpl, const CodeView& code,
                const CodeView* similar_code, size_t code_room, const PromptOptions& options) {
  const bool rag = similar_code != nullptr;
  for (int attempt = 0; attempt < 4; ++attempt) {
    p.notes.clear();
    if (p.error_chars_cut)
      p.notes.push_back("the error message was cut by " + std::to_string(p.error_chars_cut) +
                        " characters to fit the context");
    std::vector<bool> keep;
    size_t query_need = 0;
    for (const auto& c : code.lines) query_need += c.tokens;
    // Naive RAG: the query's code first; the retrieved case gets what is left, but at least 40 % when both are long.
    size_t query_room = code_room;
    if (rag) {
      size_t similar_need = 0;
      for (const auto& c : similar_code->lines) similar_need += c.tokens;
      if (query_need + similar_need > code_room)
        query_room = std::max(code_room * 6 / 10, code_room - std::min(code_room, similar_need));
    }
    const size_t used = choose(code.lines, query_room, keep);
    p.shown_lines = static_cast<size_t>(std::count(keep.begin(), keep.end(), true));
    p.truncated = p.shown_lines < p.total_lines;
    values["test_code"] = render(code.lines, keep, code.paths, p.shown_lines);
    p.shown.assign(p.elements.size(), false);
    for (size_t i = 0; i < code.lines.size(); ++i)
      if (keep[i]) p.shown[static_cast<size_t>(code.lines[i].id)] = true;
    if (p.truncated)
      p.notes.push_back("the test code was cut to " + std::to_string(p.shown_lines) + " of " +
                        std::to_string(p.total_lines) + " lines to fit the context (" +
                        std::to_string(options.tokens.context) + " tokens)");
    if (rag) {
      std::vector<bool> keep2;
      choose(similar_code->lines, code_room - std::min(code_room, used), keep2);
      const size_t shown2 = static_cast<size_t>(std::count(keep2.begin(), keep2.end(), true));
      values["similar_test_code"] = render(similar_code->lines, keep2, similar_code->paths, shown2);
      if (shown2 < similar_code->lines.size())
        p.notes.push_back("the similar case's code was cut to " + std::to_string(shown2) + " of " +
                          std::to_string(similar_code->lines.size()) + " lines to fit the context");
    }
    p.text = fill_template(tpl, values);
    p.estimated_tokens = scaled_tokens(estimate_tokens(p.text), options.tokens);
    const size_t limit = options.tokens.context - options.tokens.answer;
    if (p.estimated_tokens <= limit) break;
    const size_t over = estimate_units(p.estimated_tokens - limit, options.tokens) + 8;
    code_room -= std::min(code_room, over);
    if (attempt == 3 || code_room == 0)
      return fail("the prompt does not fit the context window (" + std::to_string(options.tokens.context) + " tokens)");
  }
  return {};
}

// The answer's JSON schema: exactly k items of a line id and its code, in that order (a server's grammar writes the
// keys as they are sent: the id first, so that a weak model's endless code string cannot use up max_tokens before
// any id). The id is one of the ids the prompt shows (an enum: a server that enforces the schema, as llama.cpp and
// vLLM do with a grammar, then never names a hidden or made-up line), or, past kMaxEnumIds shown lines, any id from
// 1 to the last. Only keywords OpenAI's strict mode takes.
constexpr size_t kMaxEnumIds = 1000;

nlohmann::ordered_json answer_schema(const Prompt& p, size_t k) {
  using ojson = nlohmann::ordered_json;
  ojson ids = ojson::array();
  for (size_t id = 1; id < p.shown.size(); ++id)
    if (p.shown[id]) ids.push_back(id);
  ojson line = {{"type", "integer"}};
  if (!ids.empty() && ids.size() <= kMaxEnumIds) {
    line["enum"] = std::move(ids);
  } else {
    line["minimum"] = 1;
    line["maximum"] = p.max_element_id;
  }
  ojson item = {{"type", "object"}};
  item["properties"] = {{"line", std::move(line)}, {"code", {{"type", "string"}}}};
  item["required"] = {"line", "code"};
  item["additionalProperties"] = false;
  ojson list = {{"type", "array"}};
  list["items"] = std::move(item);
  list["minItems"] = k;
  list["maxItems"] = k;
  ojson schema = {{"type", "object"}};
  schema["properties"] = {{"faulty_lines", std::move(list)}};
  schema["required"] = {"faulty_lines"};
  schema["additionalProperties"] = false;
  return schema;
}

}  // namespace

std::vector<std::string> mode_names() {
  std::vector<std::string> names;
  for (const auto& i : kModes) names.emplace_back(i.name);
  return names;
}

Result<Mode> parse_mode(std::string_view name) {
  for (const auto& i : kModes)
    if (i.name == name) return i.mode;
  std::string known;
  for (const auto& i : kModes) known += (known.empty() ? "" : ", ") + std::string(i.name);
  return fail("unknown mode \"" + std::string(name) + "\" (known: " + known + ")");
}

std::string ranker_marker(size_t rank, Language language) {
  return std::string(comment_prefix(language)) + " " + std::string(kRankerMarkerText) + std::to_string(rank) + " >>>";
}

std::string_view mode_name(Mode mode) { return info(mode).name; }
Retrieval mode_retrieval(Mode mode) { return info(mode).retrieval; }
bool mode_annotates(Mode mode) { return info(mode).annotates; }
std::string_view mode_template(Mode mode) { return info(mode).template_name; }

std::optional<std::string_view> builtin_template(std::string_view name) {
  auto it = templates().find(name);
  if (it == templates().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> builtin_template_names() {
  std::vector<std::string> out;
  for (const auto& [name, text] : templates()) out.push_back(name);
  return out;
}

Status check_template(std::string_view text, const std::string& origin) {
  for (const char* needed : {"{test_code}", "{err_msg}"})
    if (text.find(needed) == std::string_view::npos)
      return fail(origin + ": the template has no " + needed + " placeholder");
  return {};
}

std::string output_template() {
  return R"({"faulty_lines": [{"line": <line number>, "code": "<the code of that line>"}, ...]})";
}

std::string fill_template(std::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '{') {
      const size_t close = text.find('}', i + 1);
      if (close != std::string_view::npos && close - i <= 40) {
        auto it = values.find(std::string(text.substr(i + 1, close - i - 1)));
        if (it != values.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

Result<Prompt> build_prompt(const Case& query, const QueryView& view, const std::vector<Annotation>& annotations,
                            const std::vector<RetrievedCase>& retrieved, const Case* similar_case,
                            StructureCache& cache, const PromptOptions& options) {
  Prompt p;
  const auto [language, language_shown] = prompt_language(query, view);
  std::string_view tpl = options.template_text;
  if (tpl.empty()) {
    auto t = builtin_template(mode_template(options.mode));
    if (!t) return fail("no built-in template \"" + std::string(mode_template(options.mode)) + "\"");
    tpl = *t;
  }
  std::set<std::pair<std::string, int>> marked;
  if (mode_annotates(options.mode))
    for (const auto& a : annotations) marked.insert({a.line.path, a.line.line});

  // The query's lines, with ids, and the retrieved context, redacted before anything is measured.
  std::map<std::pair<std::string, int>, size_t> ranker_rank;
  if (options.mode == Mode::hybrid)
    for (size_t i = 0; i < options.ranker_top.size(); ++i)
      ranker_rank.emplace(std::make_pair(options.ranker_top[i].path, options.ranker_top[i].line), i + 1);
  CodeView code = candidates(view, marked, traceback_anchors(view), options.redactor, p.redactions, &p.elements,
                             options.test_scope_only, ranker_rank);
  p.max_element_id = static_cast<int>(p.elements.size()) - 1;
  p.total_lines = code.lines.size();
  if (options.test_scope_only) {
    size_t all = 0;
    for (const auto& f : view.files)
      for (auto l : split_lines(f.source->content)) all += is_blank(l) ? 0 : 1;
    if (all > p.total_lines)
      p.notes.push_back("prompt scope test: " + std::to_string(all - p.total_lines) +
                        " line(s) of other tests left out");
  }
  std::string error = rstrip_output(canonical_traceback(query.error_message));
  if (options.redactor) options.redactor->redact(error, p.redactions);

  const std::string similar_lines = similar_faulty_lines(retrieved, similar_case, options, p.redactions);
  const bool rag = options.mode == Mode::naive_rag && similar_case;
  SimilarContext similar;
  if (rag) similar = similar_context(*similar_case, cache, options, p.redactions);
  std::map<std::string, std::string> values = {
      {"programming_language", language_shown},
      {"element", "line"},
      {"k", std::to_string(options.k)},
      {"ID", "line number"},
      {"max_element_id", std::to_string(p.max_element_id)},
      {"output_template", output_template()},
      {"marker", annotation_marker(language)},
      {"ranker_marker", std::string(comment_prefix(language)) + " " + std::string(kRankerMarkerText) + "N >>>"},
      {"similar_faulty_lines", similar_lines},
      {"err_msg", ""},
      {"test_code", ""},
      {"similar_err_msg", ""},
      {"similar_test_code", ""},
  };

  // The budget: context minus the answer, the fixed text and the (possibly cut) error messages.
  // The pieces are measured in estimate_tokens' units; the window, in the model's, is turned into those.
  const size_t fixed = estimate_tokens(fill_template(tpl, values));
  const size_t window = options.tokens.context > options.tokens.answer
                            ? estimate_units(options.tokens.context - options.tokens.answer, options.tokens)
                            : 0;
  if (fixed + 64 > window)
    return fail("the context window (" + std::to_string(options.tokens.context) +
                " tokens) cannot hold the template (" + std::to_string(scaled_tokens(fixed, options.tokens)) +
                " tokens) and an answer of " + std::to_string(options.tokens.answer) + " tokens");
  const size_t room = window - fixed;
  const size_t error_cap = room * (rag ? 2 : 3) / 10;  // at most 30 % of the room (20 % each with naive RAG)
  values["err_msg"] = cut_error(error, error_cap, p.error_chars_cut);
  size_t code_room = room - std::min(room, estimate_tokens(values["err_msg"]));
  if (rag) {
    size_t cut = 0;
    values["similar_err_msg"] = cut_error(similar.error, error_cap, cut);
    code_room -= std::min(code_room, estimate_tokens(values["similar_err_msg"]));
  }

  TRY(fit_code(p, values, tpl, code, rag ? &similar.code : nullptr, code_room, options));
  p.schema = answer_schema(p, options.k);
  return p;
}

}  // namespace spark
