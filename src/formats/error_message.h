// What spark reads from a failure's error message: volatile tokens normalised away (for embedding), and the
// traceback's frames (file, line, function) for the ranker.
// Contract: pure functions (their patterns compiled once, read-only): thread-safe; any text is accepted (a message
// with no frames gives none; huge messages are read to a bound, as said below).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark {

// Replaces volatile tokens that differ between two runs of the same failure with placeholders: memory addresses
// (0x7f3a…) → <ADDR>, temporary paths (/tmp/…, pytest's tmp_path) → <TMP>, ISO and clock times → <TIME>,
// UUIDs → <UUID>, long hex ids (≥ 12 hex digits) → <HEX>, Java object hashes ("Cart@5e9f23b4") → Cart@<HASH>,
// loopback ports ("localhost:54321", "127.0.0.1:…", "[::1]:…") → <PORT>. Line numbers and other numbers are kept.
std::string normalize_error_message(std::string_view message);

struct TracebackFrame {
  std::string path;  // as printed
  int line = 0;
  std::string function;  // "" when the format has none
};

// Frames in the order printed (outermost first, as Python prints them). Recognises pytest's --tb=short/long/line
// ("path.py:12: in test_f", "path.py:12: AssertionError") and Python's native form ('File "path.py", line 12, in f').
// Without Python frames, the stack-trace frames of parse_stack_trace.
std::vector<TracebackFrame> parse_traceback(std::string_view message);

// Frames of Java stack traces ("at com.x.FooTest.testBar(FooTest.java:42)": the path is the package's folders and
// the file, "com/x/FooTest.java") and of V8's JavaScript/TypeScript ones ("at Object.<anonymous>
// (tests/x.test.js:12:5)", file:// URLs made paths), outermost first like Python's: each run of frames ("Caused by:",
// "Suppressed:" start new runs) is printed innermost first and turned around. Frames without a file and line
// ("Native Method", "Unknown Source", "node:internal/…") are skipped.
std::vector<TracebackFrame> parse_stack_trace(std::string_view message);

// What the ranker reads of a very long error message: all of it up to kErrorMessageReadLimit bytes, else its first
// quarter of that (the outermost frames) and its last three quarters (the innermost frames and the exception).
inline constexpr size_t kErrorMessageReadLimit = 1u << 20;
std::string bounded_error_message(std::string_view message);

// True when a traceback path names the file `file_path` (same path, or one ends with the other at a '/').
bool same_file(std::string_view traceback_path, std::string_view file_path);

}  // namespace spark
