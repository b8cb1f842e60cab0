// The entry of /proc/self/smaps for the mapping that holds an address: its field lines ("Rss:       12 kB", ...,
// "VmFlags: rd mr ..."), one per line, without the range line; "" when no mapping holds it. Header-only, for the
// tests and the benches that check how memory is mapped (huge pages).
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace spark::testing {

inline std::string smaps_entry(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  std::string out;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      if (inside) break;
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside) out += line + "\n";
  }
  return out;
}

// The value in kB of `field` ("Rss", "FilePmdMapped", ...) in an entry from smaps_entry; -1 when it has none.
inline long smaps_kb(const std::string& entry, const std::string& field) {
  std::istringstream lines(entry);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with(field + ":")) return std::stol(line.substr(field.size() + 1));
  return -1;
}

}  // namespace spark::testing
