// Text helpers shared by every part: UTF-8 checks, line splitting, trimming, stable hashing.
// Contract: pure functions of their arguments: thread-safe, never throw on bad text (invalid UTF-8 is reported or
// replaced, as each says).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace spark {

// Byte offset of the first invalid UTF-8 sequence (overlongs, surrogates and > U+10FFFF are invalid),
// or nullopt when the whole text is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// How deep JSON may nest where spark reads it: nlohmann's parser is iterative, but copying, dumping and walking a
// value recurse, and a case whose "meta" nests 100,000 deep overflowed the stack. Real records nest a few levels.
inline constexpr size_t kMaxJsonDepth = 256;

// Byte offset of the bracket that opens nesting level `limit` + 1 in JSON text (strings and escapes skipped), or
// nullopt when the text stays within `limit` levels. One pass, no allocation; the text need not be valid JSON.
std::optional<size_t> json_too_deep(std::string_view text, size_t limit = kMaxJsonDepth);
// "JSON nested deeper than 256 levels (at byte N)" for a json_too_deep answer (N 1-based).
std::string json_too_deep_message(size_t at);

// The JSON text of `value` (nlohmann's dump; `indent` as there, -1 for one line) made valid UTF-8 on the way: each
// invalid byte of a string becomes U+FFFD, where dump itself throws type_error.316. Every JSON spark writes (output,
// files, the store) is made by it: text from outside (an LLM's answer, a server's error body, a test's output) may
// hold any bytes, and a JSON document must hold none of them.
std::string json_text(const nlohmann::json& value, int indent = -1);
// json_text of JSON whose keys keep the order they were set in (a schema a server's grammar writes in that order).
std::string ordered_json_text(const nlohmann::ordered_json& value, int indent = -1);

// Untrusted text (test names, messages, code, a server's or a model's answer) made harmless to print on a terminal
// or into a CI log, where a GitHub Actions runner reads every line of stdout and stderr for workflow commands:
//  - control characters are written as escapes: "\n", "\r", "\x1b" (ESC: no OSC 52 clipboard write, window title
//    or clear screen gets through), "\x07"; a tab stays. C1 controls (U+0080-U+009F), bidirectional overrides and
//    isolates (U+202A-U+202E, U+2066-U+2069) and the line and paragraph separators as "\u009b";
//  - an invalid UTF-8 byte as "\xff";
//  - a "::" opening a line (after white space: the runner trims it) has its first colon written "\x3a", and "##["
//    (the runner's older command form, found anywhere in a line) is written "##\x5b".
// Backslashes are not doubled: the result is for reading, not for decoding back. Text with none of these is returned
// unchanged, and the result is its own neutral form (applying it again changes nothing).
// terminal_line: for a field printed inside a line of spark's own: newlines are escaped too, so the field cannot
// start a line. terminal_lines: for a message printed whole: newlines stay, and each line is defused.
std::string terminal_line(std::string_view untrusted);
std::string terminal_lines(std::string_view untrusted);

// Decodes valid UTF-8 into code points; an invalid byte becomes U+FFFD (callers validate first where it matters).
std::u32string decode_utf8(std::string_view text);

// Encodes code points as UTF-8.
std::string encode_utf8(std::u32string_view text);

// Valid UTF-8 stays as it is; each invalid byte becomes U+FFFD.
std::string sanitize_utf8(std::string_view text);

// Makes each lone carriage return (one not before '\n') a '\n': Python, Java and JavaScript end a line of source at
// one (classic Mac OS files), and so do their tracebacks' line numbers, where split_lines and tree-sitter count only
// '\n'. "\r\n" stays. Applied where test code comes in (case files, --test, --junit, git), so that every part
// counts the lines the test runner counted.
void end_lone_carriage_returns(std::string& text);

// Splits into lines as a user counts them: '\n' ends a line, a trailing '\r' is dropped, and a final newline does not
// start another line. Line i (1-based) is result[i-1]. The views point into `text`.
std::vector<std::string_view> split_lines(std::string_view text);

// Strips ASCII white space (space, tab, CR, LF, FF, VT) from both ends.
std::string_view trim(std::string_view text);

// The text with A-Z made a-z; every other byte (UTF-8 included) as it is.
std::string ascii_lower(std::string_view text);

inline bool is_blank(std::string_view line) { return trim(line).empty(); }

// FNV-1a 64-bit: a stable hash for feature hashing and content keys (not for security).
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ULL);

// Hex string of a 64-bit value, 16 characters.
std::string hex64(uint64_t value);

// `value` with `digits` decimals, as printf's "%.*f" prints it ("0.05", "12.3"): the one way spark prints a number.
std::string fixed(double value, int digits);
// A duration with one decimal and its unit: "2.5 s".
std::string seconds_text(double seconds);
// "42s", "3m04s", "1h02m": a duration at a glance (an ETA, a run's length).
std::string duration_text(double seconds);
// "1 test", "2 tests"; `words` is the plural when it is not `word` + "s" ("fix", "fixes").
std::string plural(size_t n, const std::string& word, const std::string& words = "");

// Clips text for messages: the first `max_chars` bytes (on a UTF-8 boundary) and "…" when cut.
std::string clip(std::string_view text, size_t max_chars);

// Text for HTML element content and attribute values (both quote styles).
std::string html_escape(std::string_view s);

}  // namespace spark
