#include "base/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/mapped_file.h"
#include "smaps.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

std::string slurp(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The VmFlags line of the mapping that holds `address` ("" when none does).
std::string vm_flags_at(const void* address) {
  std::istringstream entry(testing::smaps_entry(address));
  for (std::string line; std::getline(entry, line);)
    if (line.starts_with("VmFlags:")) return line;
  return "";
}

// The process's minor page faults so far. (Unused under a sanitizer, whose allocator the heap tests skip.)
[[maybe_unused]] long minor_faults() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The process's anonymous memory in huge pages, kB (/proc/self/smaps_rollup). (Unused under a sanitizer.)
[[maybe_unused]] long anon_huge_kb() {
  std::istringstream lines(slurp("/proc/self/smaps_rollup"));
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("AnonHugePages:")) return std::stol(line.substr(14));
  return -1;
}

}  // namespace

// Each ctest test is a process of its own, so the heap this changes is this test's alone.
TEST(prefer_huge_pages, marks_the_heap_the_next_large_allocations_take) {
  const std::string mode = slurp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[never]") != std::string::npos || mode.empty())
    GTEST_SKIP() << "the kernel has transparent huge pages off: " << mode;
  EXPECT_FALSE(prefer_huge_pages(32u << 20, /*allowed=*/false));  // turned off (SPARK_HUGE_PAGES=0): nothing done
#if defined(SPARK_ASAN)
  GTEST_SKIP() << "a sanitizer's allocator has no glibc heap to prepare";
#else
  ASSERT_TRUE(prefer_huge_pages(48u << 20, true));
  // 20 MB, as faiss's HNSW graph at 100k cases: from the heap, in the range marked for huge pages ("hg"), and all of
  // it but the partial 2 MiB at either end in huge pages: a 4 KiB page is a page fault of its own.
  const long before = anon_huge_kb();
  void* p = std::malloc(20u << 20);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 20u << 20);
  const long huge = anon_huge_kb() - before;
  const std::string flags = vm_flags_at(static_cast<char*>(p) + (10u << 20));
  std::free(p);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  EXPECT_GE(huge, 16L << 10) << "kB of the 20 MB in huge pages";
  EXPECT_TRUE(prefer_huge_pages(48u << 20, true));  // prepared already: nothing more done
#endif
}

// 24 MB from a 2 MiB boundary, in a heap just prepared: twelve huge pages, a page fault each. No part of it takes
// 4 KiB pages (512 faults per 2 MiB), as the 2 MiB around a block's header did when the heap was prepared in blocks
// of 16 MiB, each marked apart.
TEST(prefer_huge_pages, a_load_of_24_mb_takes_huge_pages_only) {
  const std::string mode = slurp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[never]") != std::string::npos || mode.empty())
    GTEST_SKIP() << "the kernel has transparent huge pages off: " << mode;
#if defined(SPARK_ASAN)
  GTEST_SKIP() << "a sanitizer's allocator has no glibc heap to prepare";
#else
  ASSERT_TRUE(prefer_huge_pages(64u << 20, true));
  void* aligned = nullptr;
  ASSERT_EQ(::posix_memalign(&aligned, 2u << 20, 24u << 20), 0);
  const long faults_before = minor_faults();
  std::memset(aligned, 1, 24u << 20);
  const long faults = minor_faults() - faults_before;
  std::free(aligned);
  EXPECT_LE(faults, 64) << "page faults to fill 24 MB";
#endif
}

// An index file's mapping (2 MiB or more) asks for huge pages, so the parts of it the page cache does not hold are
// read back as 2 MiB folios; a small file's mapping does not ask.
TEST(MappedFile, a_mapping_of_2_mib_or_more_asks_for_huge_pages) {
  const std::string mode = slurp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[never]") != std::string::npos || mode.empty())
    GTEST_SKIP() << "the kernel has transparent huge pages off: " << mode;
  testing::TempDir dir;
  testing::write_file(dir / "large.bin", std::string(4u << 20, 'x'));
  testing::write_file(dir / "small.bin", std::string(64u << 10, 'x'));
  auto large = MappedFile::open(dir / "large.bin");
  auto small = MappedFile::open(dir / "small.bin");
  ASSERT_TRUE(large && small);
  EXPECT_EQ((*large)->view(), std::string(4u << 20, 'x'));
  const std::string large_flags = vm_flags_at((*large)->data());
  const std::string small_flags = vm_flags_at((*small)->data());
  ASSERT_FALSE(large_flags.empty());
  ASSERT_FALSE(small_flags.empty());
  EXPECT_NE(large_flags.find(" hg"), std::string::npos) << large_flags;
  EXPECT_EQ(small_flags.find(" hg"), std::string::npos) << small_flags;
}

}  // namespace spark::SPARK_TEST_FILE_ID
