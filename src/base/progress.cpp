#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace spark {

ProgressLine::ProgressLine() : tty_(::isatty(STDERR_FILENO) != 0) {}

void ProgressLine::show(const std::string& text, bool last) const {
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s%s", text.c_str(), last ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", text.c_str());
}

void ProgressLine::end() const {
  if (tty_) std::fputc('\n', stderr);
}

double eta_seconds(double elapsed, size_t done, size_t total) {
  if (done == 0) return 0;
  return elapsed / static_cast<double>(done) * static_cast<double>(total - std::min(done, total));
}

}  // namespace spark
