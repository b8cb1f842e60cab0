#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/mapped_file.h"
#include "smaps.h"
#include "test_util.h"

namespace spark {
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

}  // namespace

// Each ctest test is a process of its own, so the heap this changes is this test's alone.
TEST(prefer_huge_pages, marks_the_heap_the_next_large_allocations_take) {
  const std::string mode = slurp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[never]") != std::string::npos || mode.empty())
    GTEST_SKIP() << "the kernel has transparent huge pages off: " << mode;
  ::setenv("SPARK_HUGE_PAGES", "0", 1);
  EXPECT_FALSE(prefer_huge_pages(32u << 20));  // turned off: nothing done
  ::unsetenv("SPARK_HUGE_PAGES");
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitizer's allocator has no glibc heap to prepare";
#else
  ASSERT_TRUE(prefer_huge_pages(48u << 20));
  // 20 MB, as faiss's HNSW graph at 100k cases: from the heap, in the range marked for huge pages ("hg").
  void* p = std::malloc(20u << 20);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 20u << 20);
  const std::string flags = vm_flags_at(static_cast<char*>(p) + (10u << 20));
  std::free(p);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
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

}  // namespace spark
