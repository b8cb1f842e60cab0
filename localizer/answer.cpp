#include "localizer/answer.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <set>

#include "base/pcre_regex.h"
#include "base/text.h"
#include "localizer/localizer.h"

namespace spark {

namespace {

constexpr int kMaxRange = 50;  // "lines 1-100000" names no lines in particular

struct Collector {
  int max_id;
  const std::function<bool(int)>& is_element;
  ParsedAnswer& out;
  std::set<int> seen;

  void add(long long id) {
    if (id < 1 || id > max_id) {
      ++out.out_of_range;
      return;
    }
    const int i = static_cast<int>(id);
    if (!is_element(i)) {
      ++out.not_code;
      return;
    }
    if (!seen.insert(i).second) {
      ++out.duplicates;
      return;
    }
    out.ids.push_back(i);
  }
  void add_range(long long a, long long b) {
    if (b < a || b - a >= kMaxRange) {
      add(a);
      return;
    }
    for (long long i = a; i <= b; ++i) add(i);
  }
};

long long to_int(std::string_view s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() ? v : -1;
}

// Free text, line by line: "line 12", "Line 12: code", "12: code", "12-14", "L12", "[3, 7, 9]", "1. line 12".
bool parse_text(std::string_view text, Collector& c,
                const std::function<std::optional<int>(std::string_view)>& id_of_code) {
  static const Regex numbering = Regex::must(R"(^\s*(?:[-*•>]+|\(?\d{1,3}[.)](?=\s)|#+)\s*)");
  static const Regex line_ref = Regex::must(
      R"((?i)\b(?:lines?|ln|l)(?:[\s_]*(?:numbers?|no\.?|#))?["']?\s*[:#=]?\s*(\d+)(?:\s*(?:-|–|—|to|through)\s*(?:lines?\s*)?(\d+))?)");
  static const Regex leading = Regex::must(R"(^\s*[`*\[]*(\d+)(?:\s*(?:-|–)\s*(\d+))?[`*\]]*\s*(?:[:|)\].,-]|$))");
  static const Regex numbers_only = Regex::must(R"(^[\s\d,;\[\]\-–()]+$)");
  static const Regex number = Regex::must(R"((\d+)(?:\s*(?:-|–)\s*(\d+))?)");
  const size_t before = c.out.ids.size() + c.out.out_of_range + c.out.duplicates + c.out.not_code;
  for (std::string_view raw : split_lines(text)) {
    std::string line(raw);
    strip_annotation_marker(line);
    if (is_blank(line)) continue;
    // A list's own numbering goes ("1. line 12"), unless the number is all the line holds ("12. assert x").
    const std::string stripped = numbering.replace_all(line, "");
    const auto numeric = [&](const std::string& t) {
      bool found = false;
      const auto take = [&](const std::vector<std::string_view>& g) {
        if (g.size() > 2 && !g[2].empty())
          c.add_range(to_int(g[1]), to_int(g[2]));
        else
          c.add(to_int(g[1]));
      };
      line_ref.for_each_match(t, [&](const std::vector<std::string_view>& g) {
        found = true;
        take(g);
      });
      if (found) return true;
      bool only = false;
      numbers_only.for_each_match(t, [&](const std::vector<std::string_view>&) { only = true; });
      if (only) {
        number.for_each_match(t, [&](const std::vector<std::string_view>& g) { take(g); });
        return true;
      }
      leading.for_each_match(t, [&](const std::vector<std::string_view>& g) {
        if (!found) take(g);
        found = true;
      });
      return found;
    };
    const auto by_code = [&](const std::string& t) {
      if (!id_of_code) return false;
      std::string code(trim(t));
      while (!code.empty() && (code.front() == '`' || code.front() == '"')) code.erase(0, 1);
      while (!code.empty() && (code.back() == '`' || code.back() == '"' || code.back() == ',')) code.pop_back();
      auto id = id_of_code(trim(code));
      if (id) c.add(*id);
      return id.has_value();
    };
    if (numeric(stripped) || by_code(stripped) || (stripped != line && numeric(line))) continue;
  }
  return c.out.ids.size() + c.out.out_of_range + c.out.duplicates + c.out.not_code > before;
}

void walk_json(const nlohmann::json& j, Collector& c,
               const std::function<std::optional<int>(std::string_view)>& id_of_code, int depth) {
  if (depth > 8) return;
  static const char* kKeys[] = {"line", "line_number", "lineno",  "line_no", "id",
                                "ID",   "element_id",  "element", "number",  "index"};
  // A number no line has (huge, negative, not finite) is out of range: converting it as is would be undefined
  // (tests/fuzz found 1.8e20).
  if (j.is_number_unsigned()) {
    const auto v = j.get<unsigned long long>();
    c.add(v > static_cast<unsigned long long>(std::numeric_limits<int>::max()) ? -1 : static_cast<long long>(v));
  } else if (j.is_number_integer()) {
    c.add(j.get<long long>());
  } else if (j.is_number_float()) {
    const double d = j.get<double>();
    c.add(std::isfinite(d) && std::fabs(d) <= std::numeric_limits<int>::max() ? static_cast<long long>(d) : -1);
  } else if (j.is_string()) {
    parse_text(j.get<std::string>(), c, id_of_code);
  } else if (j.is_array()) {
    for (const auto& x : j) walk_json(x, c, id_of_code, depth + 1);
  } else if (j.is_object()) {
    for (const char* k : kKeys)
      if (j.contains(k) && (j[k].is_number() || j[k].is_string())) {
        walk_json(j[k], c, id_of_code, depth + 1);
        return;
      }
    if (j.contains("code") && j["code"].is_string() && id_of_code) {
      std::string code = j["code"].get<std::string>();
      strip_annotation_marker(code);
      if (auto id = id_of_code(trim(code))) c.add(*id);
      return;
    }
    // {"faulty_lines": [...]} or any other wrapper: its arrays, in order.
    for (const auto& [key, value] : j.items())
      if (value.is_array() || value.is_object()) walk_json(value, c, id_of_code, depth + 1);
  }
}

std::string strip_thinking(std::string_view answer) {
  std::string s(answer);
  for (;;) {
    const size_t open = s.find("<think>");
    if (open == std::string::npos) break;
    const size_t close = s.find("</think>", open);
    s.erase(open, close == std::string::npos ? std::string::npos : close + 8 - open);
  }
  return s;
}

// A JSON text cut short (an answer stopped at max_tokens, a structured one included): its longest prefix that ends
// just after a closed object or array inside the outermost one, with the brackets still open there closed. "" when
// the text has no such prefix. `cut`: where the prefix ends in `t` (0: cut short before any closed value; npos: the
// text is not a JSON text cut short — complete, or its brackets do not match).
std::string close_cut_json(std::string_view t, size_t& cut) {
  std::string open, open_at_cut;
  bool in_string = false, escaped = false;
  cut = 0;
  size_t i = 0;
  for (; i < t.size(); ++i) {
    const char ch = t[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      if (open.size() >= kMaxJsonDepth) break;
      open.push_back(ch);
    } else if (ch == '}' || ch == ']') {
      if (open.empty() || (ch == '}') != (open.back() == '{')) break;
      open.pop_back();
      if (open.empty()) break;  // complete: not cut short
      cut = i + 1;
      open_at_cut = open;
    }
  }
  if (i < t.size()) {  // stopped early: not a JSON text cut short
    cut = std::string_view::npos;
    return "";
  }
  if (cut == 0) return "";
  std::string closed(t.substr(0, cut));
  for (auto it = open_at_cut.rbegin(); it != open_at_cut.rend(); ++it) closed.push_back(*it == '{' ? '}' : ']');
  return closed;
}

}  // namespace

ParsedAnswer parse_answer(std::string_view answer, int max_id, const std::function<bool(int)>& is_element,
                          const std::function<std::optional<int>(std::string_view)>& id_of_code) {
  ParsedAnswer out;
  Collector c{max_id, is_element, out, {}};
  const std::string text = strip_thinking(answer);
  // JSON: the whole answer, a fenced block, or the span from the first { or [ to the last } or ].
  std::vector<std::string> tries;
  tries.emplace_back(trim(text));
  if (auto f = text.find("```"); f != std::string::npos) {
    const size_t body = text.find('\n', f);
    const size_t end = body == std::string::npos ? std::string::npos : text.find("```", body);
    if (end != std::string::npos) tries.push_back(text.substr(body + 1, end - body - 1));
  }
  const size_t first = text.find_first_of("{[");
  const size_t last = text.find_last_of("}]");
  if (first != std::string::npos && last != std::string::npos && last > first)
    tries.push_back(text.substr(first, last - first + 1));
  for (const auto& t : tries) {
    if (t.empty() || (t.front() != '{' && t.front() != '[') || json_too_deep(t)) continue;
    auto j = nlohmann::json::parse(t, nullptr, false);
    if (j.is_discarded()) continue;
    walk_json(j, c, id_of_code, 0);
    if (!out.ids.empty() || out.out_of_range + out.duplicates + out.not_code > 0) {
      out.format = "json";
      return out;
    }
  }
  // An answer cut off at max_tokens: the objects it completed, then what the unfinished rest names as free text
  // ({"line": 3, "code": "y = … names 3).
  if (first != std::string::npos) {
    size_t cut = 0;
    const std::string closed = close_cut_json(std::string_view(text).substr(first), cut);
    auto j = closed.empty() ? nlohmann::json() : nlohmann::json::parse(closed, nullptr, false);
    ParsedAnswer scratch;  // kept only if it names ids: the free-text rules below would count the same ids again
    Collector sc{max_id, is_element, scratch, {}};
    if (!closed.empty() && !j.is_discarded()) walk_json(j, sc, id_of_code, 0);
    // The unfinished rest: only a "line": N key counts (its code string may hold anything, "l2 = f(l1" too).
    const std::string_view tail =
        cut == std::string_view::npos ? std::string_view() : std::string_view(text).substr(first + cut);
    for (size_t at = tail.find("\"line\""); at != std::string_view::npos; at = tail.find("\"line\"", at + 6)) {
      size_t i = at + 6;
      while (i < tail.size() && std::isspace(static_cast<unsigned char>(tail[i]))) ++i;
      if (i >= tail.size() || tail[i] != ':') continue;
      ++i;
      while (i < tail.size() && std::isspace(static_cast<unsigned char>(tail[i]))) ++i;
      long long id = 0;
      size_t digits = 0;
      for (; i < tail.size() && std::isdigit(static_cast<unsigned char>(tail[i])) && digits < 9; ++i, ++digits)
        id = id * 10 + (tail[i] - '0');
      if (digits > 0 && (i >= tail.size() || !std::isdigit(static_cast<unsigned char>(tail[i])))) sc.add(id);
    }
    if (!scratch.ids.empty()) {
      scratch.format = "json";
      return scratch;
    }
  }
  std::string plain = text;
  // Fence lines carry no ids.
  for (size_t at; (at = plain.find("```")) != std::string::npos;) plain.erase(at, 3);
  if (parse_text(plain, c, id_of_code)) out.format = "text";
  return out;
}

}  // namespace spark
