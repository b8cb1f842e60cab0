#include "base/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spark {

bool prefer_huge_pages(size_t bytes) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  if (const char* off = std::getenv("SPARK_HUGE_PAGES"); off && std::strcmp(off, "0") == 0) return false;
  constexpr size_t kBlock = 16u << 20;  // below the mmap threshold: from the heap
  constexpr size_t kPage = 4096;
  // glibc's largest mmap threshold (32 MiB on 64-bit): allocations below it come from the heap. Freed memory
  // stays in the heap for reuse instead of being trimmed.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0) return false;
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<size_t>(bytes * 2, size_t{1} << 30)));
  std::vector<void*> blocks;
  blocks.reserve(bytes / kBlock + 1);
  bool advised = false;
  for (size_t done = 0; done < bytes; done += kBlock) {
    void* p = std::malloc(kBlock);
    if (!p) break;
    blocks.push_back(p);
    // The block's whole pages (malloc's header before it is not the block's); neighbouring blocks are contiguous,
    // so the marked ranges join into one.
    // The page boundaries are found on the address's value and reached from p (no integer-to-pointer cast).
    const auto at = reinterpret_cast<uintptr_t>(p);
    const auto begin = (at + kPage - 1) & ~uintptr_t{kPage - 1};
    const auto end = (at + kBlock) & ~uintptr_t{kPage - 1};
    if (end > begin && ::madvise(static_cast<char*>(p) + (begin - at), end - begin, MADV_HUGEPAGE) == 0) advised = true;
  }
  for (void* p : blocks) std::free(p);
  return advised;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace spark
