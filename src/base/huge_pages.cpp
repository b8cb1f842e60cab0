#include "base/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spark {

namespace {

bool prepare_heap(size_t bytes) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kPage = 4096;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  constexpr size_t kSlack = size_t{2} * 4096;
  constexpr int kDefaultTopPad = 128 * 1024;  // glibc's (mallopt(3))
  // glibc's largest mmap threshold (32 MiB on 64-bit): allocations below it come from the heap. Freed memory
  // stays in the heap for reuse instead of being trimmed.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0) return false;
  const size_t room = std::min<size_t>(bytes, size_t{512} << 20);  // the thresholds are ints
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * room + (64u << 20)));
  // The heap grows by `room` more than asked the next time it grows (M_TOP_PAD), and a probe a little larger than
  // the free memory at its top (the top chunk, mallinfo2's keepcost) makes it grow now: the probe starts where the
  // top chunk did, and past it lies memory never written. That is marked as one range, from the probe on. A page
  // written before the advice makes the 2 MiB around it take 4 KiB pages, a page fault each (as the headers between
  // the blocks of 16 MiB this reserved before did: 828 faults in one query at 100k cases); the only ones
  // are the probe's header and the one malloc writes after it, a few KiB past the heap's old end.
  const size_t top_room = mallinfo2().keepcost;
  void* probe = nullptr;
  if (top_room + kSlack < (31u << 20)) {
    mallopt(M_TOP_PAD, static_cast<int>(room));
    probe = std::malloc(top_room + kSlack);
    mallopt(M_TOP_PAD, kDefaultTopPad);
  } else {
    probe = std::malloc(64);  // room enough already: where the free memory at the top begins
  }
  if (!probe) return false;
  const auto at = reinterpret_cast<uintptr_t>(probe);
  const auto written = at + (top_room + kSlack < (31u << 20) ? top_room + kSlack : 64) + 32;
  // The page boundaries are found on the addresses' values and reached from the probe's pointer (no
  // integer-to-pointer cast).
  const auto begin = (at + kPage - 1) & ~(kPage - 1);
  const auto end = reinterpret_cast<uintptr_t>(::sbrk(0)) & ~(kPage - 1);
  // The heap is one contiguous range from the probe up to the break only while glibc grows it with brk; a heap that
  // had to move to mmap'ed memory is left alone.
  const bool contiguous = end > begin && end - begin <= room + top_room + (64u << 20);
  const bool advised =
      contiguous && ::madvise(static_cast<char*>(probe) + (begin - at), end - begin, MADV_HUGEPAGE) == 0;
  std::free(probe);
  if (advised) {
    // The 2 MiB around the pages written before the advice stay in 4 KiB pages: the allocations that follow start
    // at the next 2 MiB boundary, past an allocation that fills the gap and is never written (its pages are never
    // faulted in), kept, reachable, for the life of the process.
    static void* gap = nullptr;
    const uintptr_t boundary = (written + kHuge - 1) & ~(kHuge - 1);
    if (gap == nullptr && boundary - at > 64 && boundary - at < (31u << 20))
      gap = std::malloc(static_cast<size_t>(boundary - at - 32));
  }
  return advised;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace

void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

bool prefer_huge_pages(size_t bytes, bool allowed) {
  static bool prepared = false;
  if (!prepared && allowed) prepared = prepare_heap(bytes);
  return prepared;
}

}  // namespace spark
