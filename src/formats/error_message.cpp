#include "formats/error_message.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <span>

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
  // One alternation so frames come out in the order printed. pytest's long form ends a frame's code with
  // "path.py:12: " (nothing after the space) or "path.py:12" (a fixture it could not find).
  static const Regex frames = Regex::must(
      R"re(^\s*([^\s:"][^:\n"]*?\.py):(\d+)(?:: (?:in (\S+)|(\w+))|:? *$)|File "([^"\n]+)", line (\d+)(?:, in ([^\s\n]+))?)re",
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

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// "path.py:12" (or a frame with no source file, "<frozen abc>:12") followed by `rest`; false for anything else. The
// path starts the line and holds no space (but for the angle brackets').
bool split_location(std::string_view line, std::string_view& path, int& number, std::string_view& rest) {
  size_t end = std::string_view::npos;  // the path's end
  if (line.starts_with('<')) {
    if (const size_t close = line.find(">:"); close != std::string_view::npos) end = close + 1;
  } else if (const size_t py = line.find(".py:");
             py != std::string_view::npos && py > 0 && line.substr(0, py).find_first_of(" \t\"") == std::string_view::npos) {
    end = py + 3;
  }
  if (end == std::string_view::npos) return false;
  size_t i = end + 1, start = i;
  while (i < line.size() && is_digit(line[i])) ++i;
  if (i == start || i - start > 9) return false;
  path = line.substr(0, end);
  number = 0;
  std::from_chars(line.data() + start, line.data() + i, number);
  rest = line.substr(i);
  return number > 0;
}

// pytest's long form's location line, after a frame's code: "path.py:12: ", "path.py:12: ValueError",
// "path.py:12: mod.Error", "path.py:12".
bool long_location(std::string_view line, std::string_view& path, int& number) {
  std::string_view rest;
  if (!split_location(line, path, number, rest)) return false;
  if (rest.empty() || rest == ":") return true;
  if (!rest.starts_with(": ")) return false;
  rest.remove_prefix(2);
  for (char c : rest)
    if (!is_word(c) && c != '.') return false;
  return true;
}

// The short form's frame line: "path.py:12: in name".
bool short_frame(std::string_view line) {
  std::string_view path, rest;
  int number = 0;
  return split_location(line, path, number, rest) && rest.starts_with(": in ");
}

// "_ _ _ _": pytest's separator between the frames of one traceback.
bool frame_separator(std::string_view line) {
  line = trim(line);
  if (line.size() < 5) return false;
  for (size_t i = 0; i < line.size(); ++i)
    if (line[i] != (i % 2 == 0 ? '_' : ' ')) return false;
  return true;
}

bool chain_line(std::string_view line) {
  return line == "During handling of the above exception, another exception occurred:" ||
         line == "The above exception was the direct cause of the following exception:";
}

// A banner of pytest's terminal output, "____ title ____", "==== title ====", "---- title ----" (the fill at least
// three characters each side; a test's title wider than the terminal leaves one, "_ title _"): its title, else
// nullopt. The frame separator "_ _ _ _" is none.
std::optional<std::string_view> banner(std::string_view line, char fill) {
  if (line.size() < 5 || line.front() != fill || line.back() != fill || frame_separator(line)) return std::nullopt;
  size_t a = 0, b = line.size();
  while (a < b && line[a] == fill) ++a;
  while (b > a && line[b - 1] == fill) --b;
  const size_t least = fill == '_' ? 1 : 3;
  if (a < least || line.size() - b < least) return std::nullopt;
  const std::string_view title = trim(line.substr(a, b - a));
  if (title.empty() || line[a] != ' ' || line[b - 1] != ' ') return std::nullopt;
  return title;
}

// The function a line of code defines ("def name(", "async def name("), else "".
std::string_view defined_function(std::string_view code) {
  for (std::string_view p : {"async def ", "def "})
    if (code.starts_with(p)) {
      const std::string_view rest = code.substr(p.size());
      const size_t paren = rest.find('(');
      if (paren != std::string_view::npos && paren > 0) return rest.substr(0, paren);
    }
  return {};
}

// One long frame (its lines before the location line) in the short form.
void append_short_frame(std::string& out, std::span<const std::string_view> block, std::string_view path,
                        int number) {
  std::string_view function;
  std::vector<std::string_view> code, errors;
  bool missing_fixture = false;
  for (std::string_view l : block) {
    const std::string_view t = trim(l);
    if (l.starts_with("file ") && l.find(", line ") != std::string_view::npos && code.empty()) {
      missing_fixture = true;  // "file /abs/tests/test_x.py, line 5", then the `def` line it failed at
    } else if (l == "E" || l.starts_with("E ")) {
      errors.push_back(l.substr(1));
    } else if (missing_fixture) {
      if (code.empty() && !t.empty()) {
        code.push_back(t);
        function = defined_function(t);
      }
    } else if (l.starts_with(">")) {
      if (!trim(l.substr(1)).empty()) code.push_back(trim(l.substr(1)));
    } else if (code.empty() && function.empty()) {
      function = defined_function(t);  // the first `def`: pytest prints the frame's function from its start
    }
  }
  // No `def` printed: a lambda's frame prints the lambda alone.
  if (function.empty() && !code.empty() && code.front().find("lambda") != std::string_view::npos)
    function = "<lambda>";
  out.append(path);
  out += ':' + std::to_string(number) + ": ";
  if (!function.empty()) out.append("in ").append(function);
  out += '\n';
  for (std::string_view c : code) out.append("    ").append(c) += '\n';
  // pytest aligns the "E" lines with the failing statement; the short form puts them three spaces after the "E".
  size_t indent = std::string_view::npos;
  for (std::string_view e : errors)
    if (!trim(e).empty()) indent = std::min(indent, e.find_first_not_of(' '));
  for (std::string_view e : errors) {
    out += "E   ";
    if (indent != std::string_view::npos && e.size() > indent) out.append(e.substr(indent));
    out += '\n';
  }
}

// unittest's failures: "FAIL: test_f (tests.test_x.C.test_f)" (Python 3.11; "(tests.test_x.C)" before it) after a
// line of "=", the traceback after a line of "-", up to the next line of "=" or "-".
std::vector<OutputSection> unittest_sections(const std::vector<std::string_view>& lines) {
  std::vector<OutputSection> out;
  const auto rule = [](std::string_view l, char c) { return l.size() >= 20 && l.find_first_not_of(c) == l.npos; };
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const std::string_view l = lines[i];
    const bool fail = l.starts_with("FAIL: "), error = l.starts_with("ERROR: ");
    if (!(fail || error) || !rule(lines[i - 1], '=') || !rule(lines[i + 1], '-') || !l.ends_with(")")) continue;
    const std::string_view head = l.substr(fail ? 6 : 7);
    const size_t paren = head.find(" (");
    if (paren == std::string_view::npos) continue;
    const std::string_view name = head.substr(0, paren), dotted = head.substr(paren + 2, head.size() - paren - 3);
    std::vector<std::string_view> parts;
    for (size_t a = 0; a <= dotted.size();) {
      const size_t b = std::min(dotted.find('.', a), dotted.size());
      parts.push_back(dotted.substr(a, b - a));
      a = b + 1;
    }
    if (!parts.empty() && parts.back() == name) parts.pop_back();
    OutputSection s;
    s.title = std::string(l);
    s.error = error;
    if (parts.size() >= 2) {
      for (size_t p = 0; p + 1 < parts.size(); ++p) s.test_id.append(parts[p]) += p + 2 < parts.size() ? "/" : ".py";
      s.test_id.append("::").append(parts.back()).append("::").append(name);
    }
    for (size_t j = i + 2; j < lines.size() && !rule(lines[j], '=') && !rule(lines[j], '-'); ++j)
      s.text.append(lines[j]) += '\n';
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string canonical_traceback(std::string_view message) {
  const auto lines = split_lines(message);
  std::string_view path;
  int number = 0;
  if (std::none_of(lines.begin(), lines.end(), [&](std::string_view l) { return long_location(l, path, number); }))
    return std::string(message);
  std::string out;
  out.reserve(message.size() / 2);
  size_t pending = 0;  // the first line not yet written
  const auto write_through = [&](size_t end) {
    for (; pending < end; ++pending)
      if (!is_blank(lines[pending]) && !frame_separator(lines[pending])) out.append(lines[pending]) += '\n';
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (long_location(l, path, number)) {
      append_short_frame(out, std::span(lines).subspan(pending, i - pending), path, number);
      pending = i + 1;
    } else if (frame_separator(l) || short_frame(l) || chain_line(l)) {
      write_through(i);
      if (chain_line(l)) out.append("\n").append(l) += '\n';
      if (!short_frame(l)) pending = i + 1;
    }
  }
  write_through(lines.size());
  if (!out.empty() && !message.ends_with('\n')) out.pop_back();
  return out;
}

std::string failure_text(std::string_view message) { return canonical_traceback(bounded_error_message(message)); }

std::vector<OutputSection> split_test_output(std::string_view output) {
  const auto lines = split_lines(output);
  std::vector<OutputSection> out;
  std::vector<std::string_view> failed, errors;  // the summary's ids, with what follows them
  std::vector<std::string_view> line_form;        // --tb=line's "path.py:12: message", one per failure
  bool in_sections = false, in_section = false, in_captured = false;
  for (std::string_view l : lines) {
    if (auto t = banner(l, '=')) {
      in_sections = *t == "FAILURES" || *t == "ERRORS";
      in_section = in_captured = false;
      continue;
    }
    if (l.starts_with("FAILED ")) failed.push_back(l.substr(7));
    if (l.starts_with("ERROR ")) errors.push_back(l.substr(6));
    if (!in_sections) continue;
    if (auto t = banner(l, '_')) {
      OutputSection s;
      s.title = std::string(*t);
      s.error = s.title.starts_with("ERROR ");
      out.push_back(std::move(s));
      in_section = true;
      in_captured = false;
      continue;
    }
    if (auto t = banner(l, '-')) {
      in_captured = true;  // "Captured stdout call", "generated xml file": not the failure's
      continue;
    }
    if (in_section && !in_captured) out.back().text.append(l) += '\n';
    std::string_view path, rest;
    int number = 0;
    if (!in_section && split_location(l, path, number, rest) && rest.starts_with(": ")) line_form.push_back(l);
  }
  // The summary line that names a section's test: its id part, with "::" as the banner's ".", equals the title.
  const auto id_for = [](std::string_view title, const std::vector<std::string_view>& summary) -> std::string {
    const size_t bracket = std::min(title.find('['), title.size());
    std::string expect;
    for (size_t i = 0; i < bracket; ++i) expect += title[i] == '.' ? std::string("::") : std::string(1, title[i]);
    expect.append(title.substr(bracket));
    for (std::string_view s : summary) {
      const size_t colons = s.find("::");
      if (colons == std::string_view::npos) continue;
      const std::string_view rest = s.substr(colons + 2);
      if (rest.starts_with(expect) && (rest.size() == expect.size() || rest.substr(expect.size()).starts_with(" - ")))
        return std::string(s.substr(0, colons + 2 + expect.size()));
    }
    return "";
  };
  if (out.empty() && failed.empty() && errors.empty()) return unittest_sections(lines);
  if (out.empty()) {
    // --tb=line and --tb=no print no sections: the summary's lines are all there is ("FAILED id - message").
    for (const auto* summary : {&failed, &errors})
      for (std::string_view l : *summary) {
        const size_t colons = l.find("::"), bracket = l.find('[', colons == std::string_view::npos ? 0 : colons);
        size_t end = l.find(bracket == std::string_view::npos ? " - " : "] - ", bracket == std::string_view::npos ? 0 : bracket);
        if (end != std::string_view::npos && bracket != std::string_view::npos) ++end;
        OutputSection s;
        s.test_id = std::string(l.substr(0, end));
        s.title = s.test_id;
        s.error = summary == &errors;
        if (summary == &failed && line_form.size() == failed.size())
          s.text = std::string(line_form[out.size()]) + "\n";  // pytest prints both in the same order
        if (end != std::string_view::npos) s.text += "E   " + std::string(l.substr(end + 3)) + "\n";
        out.push_back(std::move(s));
      }
    return out;
  }
  for (auto& s : out) {
    std::string_view title = s.title;
    if (title.starts_with("ERROR collecting ")) {
      s.test_id = std::string(trim(title.substr(17)));
      continue;
    }
    for (std::string_view p : {"ERROR at setup of ", "ERROR at teardown of "})
      if (title.starts_with(p)) title.remove_prefix(p.size());
    s.test_id = id_for(title, s.error ? errors : failed);
  }
  return out;
}

namespace {

// The bytes kept of a message over the limit: its first kHeadBytes and its last kTailBytes, with room left for the
// line that notes the cut.
constexpr size_t kHeadBytes = kErrorMessageReadLimit / 4;
constexpr size_t kCutLineRoom = 64;
constexpr size_t kTailBytes = kErrorMessageReadLimit - kHeadBytes - kCutLineRoom;
// How far from a cut a line's end is looked for.
constexpr size_t kLineSearch = 4096;

bool utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The length of `text`'s longest prefix that does not end inside a UTF-8 sequence.
size_t whole_characters(std::string_view text) {
  size_t start = text.size();
  while (start > 0 && text.size() - start < 4 && utf8_continuation(text[start - 1])) --start;
  if (start == 0) return text.size();
  const auto lead = static_cast<unsigned char>(text[start - 1]);
  const size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return start - 1 + length > text.size() ? start - 1 : text.size();
}

// `head` and `tail` (the first and last bytes of a message of which `cut` bytes between them are left out) joined:
// the head cut back to a line's end and the tail forward to a line's start when one is near (else to a character's
// boundary), the cut noted on a line of its own.
std::string join_cut(std::string_view head, std::string_view tail, size_t cut) {
  const size_t head_nl = head.rfind('\n');
  size_t head_end = head.size();
  if (head_nl != std::string_view::npos && head.size() - (head_nl + 1) <= kLineSearch)
    head_end = head_nl + 1;
  else
    head_end = whole_characters(head);
  const size_t tail_nl = tail.substr(0, kLineSearch).find('\n');
  size_t tail_start = 0;
  if (tail_nl != std::string_view::npos)
    tail_start = tail_nl + 1;
  else
    while (tail_start < tail.size() && utf8_continuation(tail[tail_start])) ++tail_start;
  cut += head.size() - head_end + tail_start;
  std::string out(head.substr(0, head_end));
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "[... " + std::to_string(cut) + " bytes cut ...]\n";
  out += tail.substr(tail_start);
  return out;
}

}  // namespace

std::string bounded_error_message(std::string_view message) {
  if (message.size() <= kErrorMessageReadLimit) return std::string(message);
  return join_cut(message.substr(0, kHeadBytes), message.substr(message.size() - kTailBytes),
                  message.size() - kHeadBytes - kTailBytes);
}

size_t cap_error_message(std::string& message) {
  if (message.size() <= kErrorMessageReadLimit) return 0;
  const size_t before = message.size();
  message = bounded_error_message(message);
  return before - message.size();
}

size_t bytes_cut(std::string_view message) {
  constexpr std::string_view open = "\n[... ", close = " bytes cut ...]\n";
  for (size_t at = message.find(open); at != std::string_view::npos; at = message.find(open, at + 1)) {
    size_t end = at + open.size(), n = 0;
    while (end < message.size() && message[end] >= '0' && message[end] <= '9' && end - at < open.size() + 19)
      n = n * 10 + static_cast<size_t>(message[end++] - '0');
    if (end > at + open.size() && message.substr(end).starts_with(close)) return n;
  }
  return 0;
}

void ErrorMessageCap::append(std::string_view piece) {
  total_ += piece.size();
  if (tail_.empty() && total_ <= kErrorMessageReadLimit) {
    head_.append(piece);
    return;
  }
  if (tail_.empty()) {  // past the limit: the head keeps its first bytes, the tail the rest
    head_.append(piece);
    tail_.assign(head_, kHeadBytes);
    head_.resize(kHeadBytes);
    head_.shrink_to_fit();
  } else {
    tail_.append(piece);
  }
  if (tail_.size() >= 2 * kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);  // amortised: a copy per kTailBytes
}

std::string ErrorMessageCap::take() {
  std::string out;
  if (tail_.empty()) {
    out = std::move(head_);
  } else {
    if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
    out = join_cut(head_, tail_, total_ - kHeadBytes - kTailBytes);
  }
  head_.clear();
  tail_.clear();
  total_ = 0;
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
