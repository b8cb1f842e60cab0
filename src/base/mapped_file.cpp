#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spark {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return fail(path.string() + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(path.string() + ": not a regular file");
  }
  auto m = std::shared_ptr<MappedFile>(new MappedFile);
  m->size_ = static_cast<size_t>(st.st_size);
  const auto ns = [](const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; };
  m->identity_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                  ns(st.st_mtim), ns(st.st_ctim)};
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return fail(path.string() + ": cannot map: " + std::strerror(e));
    }
    m->data_ = static_cast<const char*>(p);
#ifdef MADV_HUGEPAGE
    // Advice only: an error (no transparent huge pages in this kernel) changes nothing.
    if (m->size_ >= kHugePage) (void)::madvise(p, m->size_, MADV_HUGEPAGE);
#endif
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<const MappedFile>(std::move(m));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace spark
