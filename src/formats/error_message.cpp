#include "formats/error_message.h"

#include <algorithm>
#include <charconv>

#include "base/pcre_regex.h"
#include "base/text.h"

namespace spark {

std::string normalize_error_message(std::string_view message) {
  static const Regex uuid =
      Regex::must(R"re([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})re");
  static const Regex addr = Regex::must(R"re(\b0x[0-9a-fA-F]{4,}\b)re");
  static const Regex tmp = Regex::must(
      R"re((?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)/[^\s'":,)\]]*|\b[A-Za-z]:\\(?:Users\\[^\\]+\\AppData\\Local\\)?Temp\\[^\s'":,)\]]*)re");
  static const Regex iso_time = Regex::must(
      R"re(\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b)re");
  static const Regex hex_id = Regex::must(R"re(\b[0-9a-fA-F]{12,}\b)re");
  // Java's default toString ("com.x.Cart@5e9f23b4") and the loopback ports a test server binds ("localhost:54321").
  static const Regex object_hash = Regex::must(R"re((?<=[\w$])@[0-9a-f]{5,8}\b)re");
  static const Regex port = Regex::must(R"re((?<=localhost:|127\.0\.0\.1:|0\.0\.0\.0:|\[::1\]:)\d{2,5}\b)re");
  std::string s = uuid.replace_all(message, "<UUID>");
  s = addr.replace_all(s, "<ADDR>");
  s = tmp.replace_all(s, "<TMP>");
  s = iso_time.replace_all(s, "<TIME>");
  s = hex_id.replace_all(s, "<HEX>");
  s = object_hash.replace_all(s, "@<HASH>");
  s = port.replace_all(s, "<PORT>");
  return s;
}

std::vector<TracebackFrame> parse_traceback(std::string_view message) {
  // One alternation so frames come out in the order printed.
  static const Regex frames = Regex::must(
      R"re(^\s*([^\s:"][^:\n"]*?\.py):(\d+): (?:in (\S+)|(\w+))|File "([^"\n]+)", line (\d+)(?:, in ([^\s\n]+))?)re",
      true);
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
  if (out.empty()) out = parse_stack_trace(message);
  return out;
}

std::vector<TracebackFrame> parse_stack_trace(std::string_view message) {
  // Java: "at com.x.FooTest.testBar(FooTest.java:42)", with a module ("app//", "java.base/") before the class.
  // JavaScript/TypeScript (V8): "at fn (tests/x.test.js:12:5)", "at async fn (file:///abs/x.test.mjs:3:9)",
  // "at tests/x.test.js:12:5". One alternation, so frames come out in the order printed.
  static const Regex frames = Regex::must(
      R"re(^[ \t]*at[ \t]+(?:[^\s(]*/)?([\w$.]+)\.([\w$<>-]+)\(([\w$-]+\.(?:java|kt|groovy|scala)):(\d+)\)[ \t]*$)re"
      R"re(|^[ \t]*at[ \t]+(?:(?:async[ \t]+)?(\S[^\n]*?)[ \t]+\()?(?:file://)?(?!node:)([^\s()]+?\.(?:[cm]?[jt]sx?)):(\d+):\d+\)?[ \t]*$)re",
      true);
  std::vector<TracebackFrame> out;
  // Stack traces print the innermost frame first; spark's frames are outermost first, as Python prints them. Each
  // run of frames (the exception, each "Caused by:", each "Suppressed:") is turned around on its own: a line that is
  // not a frame ends a run.
  size_t block_start = 0;
  const char* prev_end = nullptr;
  const auto close_block = [&] {
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(block_start), out.end());
    block_start = out.size();
  };
  frames.for_each_match(message, [&](const std::vector<std::string_view>& g) {
    TracebackFrame f;
    std::string_view line_text;
    if (g.size() > 4 && !g[3].empty()) {
      std::string cls(g[1]);
      const auto dot = cls.rfind('.');
      std::string dir = dot == std::string::npos ? "" : cls.substr(0, dot + 1);
      std::replace(dir.begin(), dir.end(), '.', '/');
      f.path = dir + std::string(g[3]);
      f.function = std::string(g[2]);
      line_text = g[4];
    } else if (g.size() > 7 && !g[6].empty()) {
      f.path = std::string(g[6]);
      f.function = std::string(g[5]);
      line_text = g[7];
    } else {
      return;
    }
    std::from_chars(line_text.data(), line_text.data() + line_text.size(), f.line);
    if (f.line <= 0) return;
    if (prev_end) {
      // Frames spark skips ("at … (Native Method)", "at node:internal/…") keep the run going.
      const std::string_view between(prev_end, static_cast<size_t>(g[0].data() - prev_end));
      for (std::string_view l : split_lines(between))
        if (const auto t = trim(l); !t.empty() && !t.starts_with("at ")) {
          close_block();
          break;
        }
    }
    prev_end = g[0].data() + g[0].size();
    out.push_back(std::move(f));
  });
  close_block();
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
