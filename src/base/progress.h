// A command's progress on stderr: on a terminal one line rewritten in place, otherwise a line of its own each time (a
// CI log keeps every one, so callers show those seldom: each tenth, every ten seconds).
// Contract: prints only to stderr; nothing fails.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace spark {

class ProgressLine {
 public:
  ProgressLine();
  bool terminal() const { return tty_; }
  // Shows `text`: on a terminal over the line shown before (`last` ends the line), else as a line of its own.
  void show(const std::string& text, bool last) const;
  // Ends a terminal's line that a stop left open.
  void end() const;

 private:
  bool tty_;
};

// Seconds left at the pace so far: `done` of `total` took `elapsed` seconds; 0 before the first is done.
double eta_seconds(double elapsed, size_t done, size_t total);

}  // namespace spark
