#include "error_message.h"

#include <charconv>

#include "pcre_regex.h"

namespace spark {

std::string normalize_error_message(std::string_view message) {
  static const Regex uuid = Regex::must(R"re([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})re");
  static const Regex addr = Regex::must(R"re(\b0x[0-9a-fA-F]{4,}\b)re");
  static const Regex tmp = Regex::must(
      R"re((?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)/[^\s'":,)\]]*|\b[A-Za-z]:\\(?:Users\\[^\\]+\\AppData\\Local\\)?Temp\\[^\s'":,)\]]*)re");
  static const Regex iso_time = Regex::must(
      R"re(\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b)re");
  static const Regex hex_id = Regex::must(R"re(\b[0-9a-fA-F]{12,}\b)re");
  std::string s = uuid.replace_all(message, "<UUID>");
  s = addr.replace_all(s, "<ADDR>");
  s = tmp.replace_all(s, "<TMP>");
  s = iso_time.replace_all(s, "<TIME>");
  s = hex_id.replace_all(s, "<HEX>");
  return s;
}

std::vector<TracebackFrame> parse_traceback(std::string_view message) {
  // One alternation so frames come out in the order printed.
  static const Regex frames = Regex::must(
      R"re(^\s*([^\s:"][^:\n"]*?\.py):(\d+): (?:in (\S+)|(\w+))|File "([^"\n]+)", line (\d+)(?:, in ([^\s\n]+))?)re", true);
  std::vector<TracebackFrame> out;
  frames.for_each_match(message, [&](const std::vector<std::string_view>& g) {
    TracebackFrame f;
    std::string_view line_text;
    if (g.size() > 2 && !g[1].empty()) {
      f.path = std::string(g[1]);
      line_text = g[2];
      if (g.size() > 3 && !g[3].empty()) f.function = std::string(g[3]);
    } else if (g.size() > 6 && !g[5].empty()) {
      f.path = std::string(g[5]);
      line_text = g[6];
      if (g.size() > 7) f.function = std::string(g[7]);
    } else {
      return;
    }
    int n = 0;
    std::from_chars(line_text.data(), line_text.data() + line_text.size(), n);
    f.line = n;
    if (f.line > 0) out.push_back(std::move(f));
  });
  return out;
}

std::string bounded_error_message(std::string_view message) {
  if (message.size() <= kErrorMessageReadLimit) return std::string(message);
  const size_t head = kErrorMessageReadLimit / 4, tail = kErrorMessageReadLimit - head;
  std::string out(message.substr(0, head));
  out += "\n…\n";
  out += message.substr(message.size() - tail);
  return out;
}

bool same_file(std::string_view a, std::string_view b) {
  while (a.starts_with("./")) a.remove_prefix(2);
  while (b.starts_with("./")) b.remove_prefix(2);
  if (a == b) return true;
  const auto ends_with_at_slash = [](std::string_view longer, std::string_view shorter) {
    return longer.size() > shorter.size() && longer.ends_with(shorter) &&
           longer[longer.size() - shorter.size() - 1] == '/';
  };
  return ends_with_at_slash(a, b) || ends_with_at_slash(b, a);
}

}  // namespace spark
