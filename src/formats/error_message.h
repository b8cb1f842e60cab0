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
// ("path.py:12: in test_f", "path.py:12: AssertionError", "path.py:12: ", "path.py:12") and Python's native form
// ('File "path.py", line 12, in f'). A long-form frame names no function: read canonical_traceback's text to have it.
// Without Python frames, the stack-trace frames of parse_stack_trace.
std::vector<TracebackFrame> parse_traceback(std::string_view message);

// pytest's long frames (--tb=long, and the default --tb=auto's first and last frames) rewritten as its short form
// writes them, so that every form reads alike: a frame printed as
//     self = <...>, x = 1                  (the arguments)
//         def test_f(self, x):             (the function's code, from its decorators and `def` line)
//     >       assert f(x) == 2             (the failing statement)
//     E       assert 3 == 2                (the exception, aligned with the statement)
//     tests/test_x.py:12: AssertionError   (the location, after the code)
// becomes "tests/test_x.py:12: in test_f", "    assert f(x) == 2", "E   assert 3 == 2". A fixture pytest could
// not find ("file /abs/tests/test_x.py, line 5" ... "/abs/tests/test_x.py:5") becomes a frame at the `def` line it
// quotes. Frame separators ("_ _ _") and blank lines go; the chained-exception lines stay, after one blank line.
// Text with no long frame (the short, line and native forms, JUnit's and unittest's) is returned unchanged.
// Linear in the text's size.
std::string canonical_traceback(std::string_view message);

// What the ranker, the embedder and the miner read of an error message: bounded_error_message's part of it, in
// canonical_traceback's form.
std::string failure_text(std::string_view message);

// One failure of a test runner's terminal output. pytest's: a `___ name ___` section under "FAILURES" or "ERRORS",
// with the node id its summary line gives ("FAILED tests/x.py::C::test_f - msg", "ERROR tests/x.py::test_f",
// "ERROR tests/x.py" for a module that did not collect). unittest's: "FAIL: test_f (tests.test_x.C.test_f)" or
// "ERROR: ..." between a line of "=" and one of "-", its id made from the dotted name (tests/test_x.py::C::test_f).
struct OutputSection {
  // pytest's banner text ("test_f", "C.test_f", "ERROR at setup of test_f", "ERROR collecting x"), unittest's header
  std::string title;
  std::string test_id;  // from the summary (or a collection banner's path); "" when the output has no summary line
  bool error = false;   // an ERRORS section (set-up, tear-down, collection), not a FAILURES one
  std::string text;     // the section's lines, without its banner
};

// The failure sections of pytest's terminal output (any --tb form; `line` and `no` print no sections, and then each
// summary line is one; with -rN no id is known), else of unittest's, in the order printed; empty when the text has
// none (it is not a runner's terminal output).
std::vector<OutputSection> split_test_output(std::string_view output);

// Frames of Java stack traces ("at com.x.FooTest.testBar(FooTest.java:42)": the path is the package's folders and
// the file, "com/x/FooTest.java") and of V8's JavaScript/TypeScript ones ("at Object.<anonymous>
// (tests/x.test.js:12:5)", file:// URLs made paths), outermost first like Python's: each run of frames ("Caused by:",
// "Suppressed:" start new runs) is printed innermost first and turned around. Frames without a file and line
// ("Native Method", "Unknown Source", "node:internal/…") are skipped.
std::vector<TracebackFrame> parse_stack_trace(std::string_view message);

// What spark keeps and reads of a very long error message: all of it up to kErrorMessageReadLimit bytes (1 MiB), else
// its first quarter of that (the outermost frames: the test's own, in every traceback form spark reads) and the rest
// of it from its end (the innermost frames, the exception and pytest's closing "path:line: Error"), each cut at a
// line's end when one is within 4 KiB of the cut (else at a character's), with a line "[... N bytes cut ...]"
// between them. The result is never longer than kErrorMessageReadLimit; a message within it is returned unchanged.
// Applied wherever a message enters spark (JUnit reports, outcome files, --error, imported cases), so a store grows
// by at most that much per message; and by the ranker to a message stored before that.
inline constexpr size_t kErrorMessageReadLimit = 1u << 20;
std::string bounded_error_message(std::string_view message);
// bounded_error_message in place (no copy when the message is within the limit). Returns the bytes cut (0: none).
size_t cap_error_message(std::string& message);
// The bytes a message's "[... N bytes cut ...]" line says were cut (its first such line); 0 when it has none.
size_t bytes_cut(std::string_view message);

// bounded_error_message of a message that arrives in pieces (an XML parser's character data), holding at most about
// twice the limit whatever the message's size: take() returns what bounded_error_message would of the whole.
class ErrorMessageCap {
 public:
  void append(std::string_view piece);
  std::string take();         // the bounded message; the cap is empty again after
  size_t size() const { return total_; }  // bytes appended since the last take

 private:
  std::string head_, tail_;  // the whole message while it is within the limit (head_), else its first and last bytes
  size_t total_ = 0;
};

// True when a traceback path names the file `file_path` (same path, or one ends with the other at a '/').
bool same_file(std::string_view traceback_path, std::string_view file_path);

}  // namespace spark
