#include "localizer/suggest.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>

#include "base/text.h"
#include "code/levenshtein.h"
#include "localizer/line_features.h"
#include "localizer/localizer.h"

namespace spark {

namespace {

bool token_name_start(unsigned char c) { return std::isalpha(c) || c == '_' || c == '$' || c >= 0x80; }

// The languages' constants: literals, not names (a True → False fix is a changed literal).
bool constant_word(std::string_view w) {
  return w == "True" || w == "False" || w == "None" || w == "true" || w == "false" || w == "null" || w == "undefined" ||
         w == "NaN";
}
bool token_name_char(unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

// A token-level change: the tokens between the common prefix and suffix of a faulty line and its one-line fix.
struct TokenChange {
  std::string old_tokens, new_tokens;  // the replaced and the replacing text, as written
  std::vector<std::string> old_seq;    // the replaced tokens' texts
  std::vector<CodeToken::Kind> old_kinds;
  bool after_dot = false;  // the first replaced token followed a "."
  bool names_only = true;  // every replaced token is a name or punctuation
};

std::string_view text_of(std::string_view line, const CodeToken& t) { return line.substr(t.begin, t.end - t.begin); }

constexpr size_t kMaxChangedTokens = 3;

std::optional<TokenChange> token_change(std::string_view faulty, std::string_view fix, Language language) {
  const auto a = code_tokens(faulty, language), b = code_tokens(fix, language);
  if (a.empty() || b.empty()) return std::nullopt;
  size_t p = 0;
  while (p < a.size() && p < b.size() && text_of(faulty, a[p]) == text_of(fix, b[p])) ++p;
  size_t s = 0;
  while (s < a.size() - p && s < b.size() - p &&
         text_of(faulty, a[a.size() - 1 - s]) == text_of(fix, b[b.size() - 1 - s]))
    ++s;
  const size_t na = a.size() - p - s, nb = b.size() - p - s;
  if (na == 0 || nb == 0 || na > kMaxChangedTokens || nb > kMaxChangedTokens) return std::nullopt;
  if (p + s == 0) return std::nullopt;  // nothing kept: another line, not a change of this one
  TokenChange c;
  bool meaningful = false;
  for (size_t i = p; i < p + na; ++i) {
    c.old_seq.emplace_back(text_of(faulty, a[i]));
    c.old_kinds.push_back(a[i].kind);
    meaningful = meaningful || a[i].kind != CodeToken::punct;
    if (a[i].kind == CodeToken::number || a[i].kind == CodeToken::string) c.names_only = false;
  }
  for (size_t i = p; i < p + nb; ++i) {
    meaningful = meaningful || b[i].kind != CodeToken::punct;
    if (b[i].kind == CodeToken::number || b[i].kind == CodeToken::string) c.names_only = false;
  }
  if (!meaningful) return std::nullopt;
  c.old_tokens = std::string(faulty.substr(a[p].begin, a[p + na - 1].end - a[p].begin));
  c.new_tokens = std::string(fix.substr(b[p].begin, b[p + nb - 1].end - b[p].begin));
  c.after_dot = p > 0 && text_of(faulty, a[p - 1]) == ".";
  return c;
}

// Where the change's old tokens stand on `line` (token indices), with the same "." before them when they had one.
std::vector<std::pair<size_t, size_t>> occurrences(std::string_view line, const std::vector<CodeToken>& toks,
                                                   const TokenChange& c) {
  std::vector<std::pair<size_t, size_t>> at;
  const size_t n = c.old_seq.size();
  for (size_t i = 0; i + n <= toks.size(); ++i) {
    bool same = true;
    for (size_t k = 0; k < n && same; ++k) same = text_of(line, toks[i + k]) == c.old_seq[k];
    if (!same) continue;
    const bool dot_before = i > 0 && text_of(line, toks[i - 1]) == ".";
    if (c.old_kinds.front() == CodeToken::name && dot_before != c.after_dot) continue;
    at.emplace_back(toks[i].begin, toks[i + n - 1].end);
    i += n - 1;  // occurrences do not overlap
  }
  return at;
}

}  // namespace

std::vector<CodeToken> code_tokens(std::string_view line, Language language) {
  std::vector<CodeToken> out;
  size_t i = 0;
  const size_t n = line.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (std::isspace(c)) {
      ++i;
      continue;
    }
    if (language == Language::python ? c == '#' : (c == '/' && i + 1 < n && line[i + 1] == '/')) break;
    const size_t start = i;
    // A string, with its prefix letters (f"", b'', r"") when they lead it.
    size_t q = i;
    while (q < n && q - i < 3 && std::isalpha(static_cast<unsigned char>(line[q]))) ++q;
    if (q < n && (line[q] == '"' || line[q] == '\'' || line[q] == '`') && (q == i || language == Language::python)) {
      const char quote = line[q];
      size_t j = q + 1;
      while (j < n && line[j] != quote) j += line[j] == '\\' ? 2 : 1;
      i = std::min(n, j + 1);
      out.push_back({CodeToken::string, start, i});
      continue;
    }
    if (std::isdigit(c) || (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(line[i + 1])))) {
      while (i < n && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '.' || line[i] == '_')) ++i;
      out.push_back({CodeToken::number, start, i});
      continue;
    }
    if (token_name_start(c)) {
      while (i < n && token_name_char(static_cast<unsigned char>(line[i]))) ++i;
      out.push_back({constant_word(line.substr(start, i - start)) ? CodeToken::number : CodeToken::name, start, i});
      continue;
    }
    ++i;
    out.push_back({CodeToken::punct, start, i});
  }
  return out;
}

std::vector<Suggestion> suggest_edits(const Case& query, const Localization& loc) {
  // The query's candidate lines: those of its ranked elements (weight: the element's score; order: its rank), then
  // its annotated lines the ranker left out of its top k (they resemble a past faulty line, but the ranker, which
  // weighs the test's scope and the traceback, does not place them near this failure: weight one half).
  constexpr double kUnrankedAnnotated = 0.5;
  std::map<LineRef, double> weight;
  std::map<LineRef, size_t> rank;
  for (size_t r = 0; r < loc.ranked.size(); ++r) {
    const auto& e = loc.ranked[r];
    for (int l = e.line; l <= std::max(e.line, e.end_line); ++l) {
      weight.emplace(LineRef{e.path, l}, e.score);
      rank.emplace(LineRef{e.path, l}, r);
    }
  }
  for (const auto& a : loc.annotations) weight.emplace(a.line, kUnrankedAnnotated);
  const auto rank_of = [&rank](const LineRef& l) {
    const auto it = rank.find(l);
    return it == rank.end() ? std::numeric_limits<size_t>::max() : it->second;
  };

  std::map<std::string, std::vector<std::string_view>> lines_of;  // each query file split once
  for (const auto& f : query.files) lines_of.emplace(f.path, split_lines(f.content));
  std::vector<Suggestion> out;
  for (const auto& rc : loc.retrieved) {
    for (size_t i = 0; i < rc.faulty_lines.size() && i < rc.faulty_text.size(); ++i) {
      const auto fix = rc.fixes.find(rc.faulty_lines[i]);
      if (fix == rc.fixes.end() || fix->second.size() != 1) continue;
      // A hunk that removed more lines than it added gives each of them its whole new side: two faulty lines with
      // the same one-line fix are such a hunk, no line-for-line change.
      if (std::count_if(rc.fixes.begin(), rc.fixes.end(), [&](const auto& other) {
            return other.first.path == fix->first.path && other.second == fix->second;
          }) > 1)
        continue;
      const std::string& faulty_text = rc.faulty_text[i];
      const Language past_language = language_for(rc.faulty_lines[i].path, query.language);
      const auto change = token_change(faulty_text, fix->second.front(), past_language);
      if (!change) continue;
      const PreparedLine past(faulty_text);
      for (const auto& [ref, w] : weight) {
        const auto file = lines_of.find(ref.path);
        if (file == lines_of.end()) continue;
        const auto& lines = file->second;
        if (ref.line < 1 || ref.line > static_cast<int>(lines.size())) continue;
        const std::string_view line = lines[static_cast<size_t>(ref.line - 1)];
        const Language language = language_for(ref.path, query.language);
        const auto toks = code_tokens(line, language);
        const auto at = occurrences(line, toks, *change);
        if (at.empty()) continue;
        if (!change->names_only) {
          // A literal's change: only on a line like the faulty one, and only where the literal is one.
          if (at.size() > 1) continue;
          if (normalized_levenshtein_bounded(PreparedLine(line), past, kResemblanceRadius) > kResemblanceRadius)
            continue;
        }
        Suggestion s;
        s.line = ref;
        s.old_line = std::string(line);
        for (size_t k = at.size(); k-- > 0;) {
          if (k == at.size() - 1) s.new_line = s.old_line;
          s.new_line.replace(at[k].first, at[k].second - at[k].first, change->new_tokens);
        }
        s.old_tokens = change->old_tokens;
        s.new_tokens = change->new_tokens;
        s.from_case = rc.id;
        s.from_line = rc.faulty_lines[i];
        s.confidence = std::clamp(std::max(0.0, rc.similarity) * w, 0.0, 1.0);
        out.push_back(std::move(s));
      }
    }
  }
  // One suggestion per (line, edit): the most confident; then per line, the most confident edit is preferred.
  // Ranked lines first, in rank order, then the rest; on one line the most confident first.
  std::stable_sort(out.begin(), out.end(), [&](const Suggestion& a, const Suggestion& b) {
    const size_t ra = rank_of(a.line), rb = rank_of(b.line);
    return ra != rb ? ra < rb : a.confidence > b.confidence;
  });
  std::set<std::pair<LineRef, std::string>> seen;
  std::set<LineRef> edited;
  std::vector<Suggestion> kept;
  for (auto& s : out) {
    if (!seen.insert({s.line, s.new_line}).second) continue;
    s.preferred = edited.insert(s.line).second;
    kept.push_back(std::move(s));
  }
  return kept;
}

}  // namespace spark
