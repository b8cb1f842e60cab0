// How the page cache holds a file, and what touching it costs a new process (docs/PERFORMANCE.md has the figures):
// maps FILE read-only (with MADV_HUGEPAGE when --huge is given, as spark's MappedFile does from 2 MiB on),
// reads one byte of each of N random 4 KiB pages (a fixed seed: the same pages every run), and prints the time and
// how much of the mapping is resident and how much of it is mapped in 2 MiB pieces (FilePmdMapped).
//
//   build/bench/spark_page_touch FILE N [--huge]
//
// To see a file read back after the page cache dropped it: `dd if=FILE iflag=nocache count=0` drops it (clean
// pages only), then run this with and without --huge, then again without.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "smaps.h"

int main(int argc, char** argv) {
  if (argc < 3 || (argc == 4 && std::strcmp(argv[3], "--huge") != 0) || argc > 4) {
    std::fprintf(stderr, "usage: %s FILE N [--huge]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const long n = std::strtol(argv[2], nullptr, 10);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size < 4096 || n <= 0) {
    std::fprintf(stderr, "%s: cannot open, or smaller than a page (%s)\n", path, std::strerror(errno));
    return 1;
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    std::fprintf(stderr, "%s: cannot map: %s\n", path, std::strerror(errno));
    return 1;
  }
  if (argc == 4) (void)::madvise(map, size, MADV_HUGEPAGE);
  const auto* bytes = static_cast<const unsigned char*>(map);
  std::mt19937_64 rng(5);
  unsigned sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) sum += bytes[(rng() % (size / 4096)) * 4096 + 100];
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::string entry = spark::testing::smaps_entry(map);
  const long rss = spark::testing::smaps_kb(entry, "Rss"), pmd = spark::testing::smaps_kb(entry, "FilePmdMapped");
  std::printf("%s: %ld pages touched in %.2f ms; resident %ld KiB of %zu, in 2 MiB pieces %ld KiB (%u)\n", path, n, ms,
              rss, size / 1024, pmd, sum & 1u);
  ::munmap(map, size);
  return 0;
}
