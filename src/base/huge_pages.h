// Transparent huge pages for the allocations of a short-lived process that loads a large index.
//
// A new `spark localize` process at 100k cases allocates ~30 MB at once (faiss's HNSW graph, the cases' facts) and
// fills it; each 4 KiB page is a page fault, and on virtual machines a fault costs several microseconds. Where the
// kernel offers transparent huge pages on request (/sys/kernel/mm/transparent_hugepage/enabled: [madvise] or
// [always]), one 2 MiB page replaces 512 of those faults. glibc can ask for them itself (GLIBC_TUNABLES
// glibc.malloc.hugetlb=1), but only from the environment a process starts with; this does the same for the first
// `bytes` of the main heap from inside the process: allocations up to 32 MiB come from the heap (glibc's
// mmap threshold, at its maximum), the heap is grown by `bytes` at once (M_TOP_PAD and one probe allocation), the
// memory past its old end is marked MADV_HUGEPAGE before anything is written in it, and the allocations that follow
// start at a 2 MiB boundary, so they take huge pages. No effect (and no error) without glibc, under a sanitizer's
// allocator, or where the kernel has transparent huge pages off; nothing either when not `allowed` (the caller's
// setting: `spark localize` reads SPARK_HUGE_PAGES, docs/SETTINGS.md).
// Call early, from the main thread; once the heap is prepared, a later call does nothing and returns true.
#pragma once
#include <cstddef>

namespace spark {

// Whether the heap was prepared.
bool prefer_huge_pages(size_t bytes, bool allowed);

// For a process that allocates and frees blocks of tens to hundreds of KiB over and over (`spark index`: a chunk of
// test files, their terms, their views): freed memory stays with the process for the next allocation instead of going
// back to the kernel and being faulted in again (glibc's mmap threshold at its maximum, 32 MiB, and trimming above
// 512 MiB only). Measured on `spark index --rebuild` at 10k cases: 152k page faults -> 87k, peak RSS 302 -> 318 MB.
// No effect without glibc or under a sanitizer's allocator. Call early, from the main thread.
void keep_freed_memory();

}  // namespace spark
