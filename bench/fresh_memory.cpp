// What fresh memory costs a process on this machine (docs/PERFORMANCE.md has the figures): maps MB MiB of
// anonymous memory in pages of 4 KiB (MADV_NOHUGEPAGE) or 2 MiB (MADV_HUGEPAGE, the mapping aligned to 2 MiB), writes
// one byte of each 4 KiB, and prints milliseconds per MiB three ways:
//  - first write: a page fault per page, the kernel finding and zeroing each;
//  - again at once, after the first mapping was unmapped: the pages the kernel just got back;
//  - a memset of memory already written: what filling memory costs once it is there.
// A virtual machine whose guest hands freed memory back to its host (free page reporting, virtio-balloon) pays the
// host again for each page it takes back; the first line then costs far more than the other two. The kernel's
// reporting settings are printed when it has them (/sys/module/page_reporting/parameters). Run each page size as its
// own process, a few seconds apart: memory one run freed is what the next run's first write finds.
//
//   build/bench/spark_fresh_memory MB 4k|2m
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kHuge = 2 * kMiB;
constexpr size_t kPage = 4096;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `bytes` of anonymous memory starting at a 2 MiB boundary (so that every 2 MiB of it can be one huge page), with
// `advice`; the mapping's start and length for munmap in *whole.
char* map_aligned(size_t bytes, int advice, void** whole, size_t* whole_size) {
  *whole_size = bytes + kHuge;
  void* p = ::mmap(nullptr, *whole_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  *whole = p;
  const auto at = reinterpret_cast<uintptr_t>(p);
  char* aligned = static_cast<char*>(p) + (((at + kHuge - 1) & ~uintptr_t{kHuge - 1}) - at);
  (void)::madvise(aligned, bytes, advice);
  return aligned;
}

// Milliseconds to write one byte of each page of a new mapping of `bytes`, with `advice`.
double first_touch(size_t bytes, int advice) {
  void* whole = nullptr;
  size_t whole_size = 0;
  char* p = map_aligned(bytes, advice, &whole, &whole_size);
  if (!p) return -1;
  const double t0 = now_ms();
  for (size_t i = 0; i < bytes; i += kPage) p[i] = 1;
  const double ms = now_ms() - t0;
  ::munmap(whole, whole_size);
  return ms;
}

std::string setting(const char* name) {
  std::ifstream in(std::string("/sys/module/page_reporting/parameters/") + name);
  std::string value;
  if (!(in >> value)) return "";
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const long mb = argc == 3 ? std::strtol(argv[1], nullptr, 10) : 0;
  const std::string size = argc == 3 ? argv[2] : "";
  if (mb < 2 || mb > 4096 || (size != "4k" && size != "2m")) {
    std::fprintf(stderr, "usage: %s MB 4k|2m   (MB from 2 to 4096)\n", argv[0]);
    return 2;
  }
  const int advice = size == "2m" ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
  const size_t bytes = static_cast<size_t>(mb) * kMiB;
  const double first = first_touch(bytes, advice);
  const double again = first_touch(bytes, advice);
  void* whole = nullptr;
  size_t whole_size = 0;
  char* p = map_aligned(bytes, advice, &whole, &whole_size);
  if (first < 0 || again < 0 || !p) {
    std::fprintf(stderr, "%s: cannot map %ld MiB\n", argv[0], mb);
    return 1;
  }
  std::memset(p, 1, bytes);
  const double t0 = now_ms();
  std::memset(p, 2, bytes);
  const double fill = now_ms() - t0;
  const int check = static_cast<unsigned char>(p[bytes - 1]);
  ::munmap(whole, whole_size);
  const double per = static_cast<double>(mb);
  std::printf("fresh memory, %ld MiB in %s pages, ms per MiB:\n", mb, size == "2m" ? "2 MiB" : "4 KiB");
  std::printf("  first write:                       %7.3f\n", first / per);
  std::printf("  again at once:                     %7.3f\n", again / per);
  std::printf("  memset of memory already written:  %7.3f  (%d)\n", fill / per, check);
  const std::string order = setting("page_reporting_order"), delay = setting("min_free_ms");
  if (!order.empty())
    std::printf("the kernel's free page reporting settings: page_reporting_order %s%s%s\n", order.c_str(),
                delay.empty() ? "" : ", min_free_ms ", delay.c_str());
  else
    std::printf("the kernel has no free page reporting settings (/sys/module/page_reporting/parameters)\n");
  return 0;
}
