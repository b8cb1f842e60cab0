#include "base/text.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

namespace spark {

namespace {

// The code point at s[i] and its length in bytes; length 0 when s[i] starts no valid UTF-8 sequence (overlongs,
// surrogates and code points past U+10FFFF are invalid).
std::pair<char32_t, size_t> utf8_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {c, 1};
  size_t len = 0;
  char32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return {0, 0};
  }
  if (i + len > s.size()) return {0, 0};
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (cc & 0x3F);
  }
  const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, len};
}

// White space .NET's String.Trim() strips (char.IsWhiteSpace) beyond ASCII's and the controls: the GitHub runner
// trims a line so before it looks for "::".
bool is_unicode_space(char32_t cp) {
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Code points a terminal or a log viewer acts on, beyond the C0 controls: C1 controls (U+009B is CSI on its own),
// bidirectional overrides and isolates (text shown in another order than it is), line and paragraph separators.
bool is_control_beyond_ascii(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0x2028 || cp == 0x2029;
}

std::string neutralised(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  const auto escape = [&out](unsigned value, bool code_point) {  // a byte as \xNN, a code point as \uNNNN
    char buf[12];
    std::snprintf(buf, sizeof buf, code_point ? "\\u%04x" : "\\x%02x", value);
    out += buf;
  };
  bool line_start = true;  // nothing but white space since the line began
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' && keep_newlines) {
      out += '\n';
      line_start = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7F) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\r')
        out += "\\r";
      else
        escape(c, false);
      line_start = false;
      ++i;
      continue;
    }
    if (c == ':' && line_start && s.substr(i).starts_with("::")) {
      out += "\\x3a";
      line_start = false;
      ++i;
      continue;
    }
    if (c == '#' && s.substr(i).starts_with("##[")) {
      out += "##\\x5b";
      line_start = false;
      i += 3;
      continue;
    }
    const auto [cp, len] = utf8_at(s, i);
    if (len == 0) {
      escape(c, false);
      line_start = false;
      ++i;
      continue;
    }
    if (is_control_beyond_ascii(cp))
      escape(static_cast<unsigned>(cp), true);
    else
      out.append(s.substr(i, len));
    line_start = line_start && is_unicode_space(cp);
    i += len;
  }
  return out;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII, eight bytes at a time: most of any test file.
    uint64_t word = 0;
    while (i + 8 <= s.size() && (std::memcpy(&word, s.data() + i, 8), (word & 0x8080808080808080ULL) == 0)) i += 8;
    if (i == s.size()) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = utf8_at(s, i).second;
    if (len == 0) return i;
    i += len;
  }
  return std::nullopt;
}

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ordered_json_text(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string terminal_line(std::string_view untrusted) { return neutralised(untrusted, false); }

std::string terminal_lines(std::string_view untrusted) { return neutralised(untrusted, true); }

std::optional<size_t> json_too_deep(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return std::nullopt;
}

std::string json_too_deep_message(size_t at) {
  return "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (at byte " + std::to_string(at + 1) +
         ")";
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(U'\uFFFD');
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::string sanitize_utf8(std::string_view text) {
  if (!find_invalid_utf8(text)) return std::string(text);
  return encode_utf8(decode_utf8(text));
}

void end_lone_carriage_returns(std::string& text) {
  for (size_t i = text.find('\r'); i != std::string::npos; i = text.find('\r', i + 1))
    if (i + 1 == text.size() || text[i + 1] != '\n') text[i] = '\n';
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

uint64_t fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (char c : data) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string seconds_text(double seconds) { return fixed(seconds, 1) + " s"; }

std::string duration_text(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
  return buf;
}

std::string clip(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "…";
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string plural(size_t n, const std::string& word, const std::string& words) {
  return std::to_string(n) + " " + (n == 1 ? word : words.empty() ? word + "s" : words);
}

}  // namespace spark
