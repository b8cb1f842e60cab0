// Shared by the libFuzzer targets: a scratch file per process for parsers that read files, and an invariant check
// that aborts (libFuzzer then saves the input as a crash) with a message saying which invariant broke.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace spark::fuzz {

// Writes `data` to this process's scratch file with the given suffix and returns its path.
inline std::filesystem::path scratch(std::string_view data, const std::string& suffix) {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp && *tmp ? tmp : "/tmp");
  }();
  const std::filesystem::path p = dir + "/spark-fuzz-" + std::to_string(::getpid()) + suffix;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(data.data(), static_cast<std::streamsize>(data.size()));
  return p;
}

#define SPARK_FUZZ_CHECK(cond, what)                                                        \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "invariant broken: %s (%s) at %s:%d\n", what, #cond, __FILE__, __LINE__); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

inline size_t count_lines(std::string_view s) {
  size_t n = 1;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace spark::fuzz
