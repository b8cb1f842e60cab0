// A whole file mapped read-only. The index's files are written once under fresh names and never changed in place
// (a save writes new files, then the manifest, then removes the old ones; an unlinked file stays mapped), so a
// mapping stays valid for as long as it is held. Reading a file that is already in the page cache through a mapping
// costs no copy and no zero-filled buffer: what a new `spark localize` process reads of a 100k-case index.
//
// A mapping of 2 MiB or more is marked MADV_HUGEPAGE. Where the kernel offers transparent huge pages on request
// (/sys/kernel/mm/transparent_hugepage/enabled: [madvise] or [always]), a page fault on a part of the file that is not
// in the page cache then reads it as one 2 MiB folio, which every later process maps with one page-table entry
// instead of 512 (Linux 6.x). Without it, an index file read back after the page cache dropped it (a reboot, memory
// pressure) stays in 4 KiB pieces, and a new process pays a fault per page it touches: on this project's 2-core VM,
// 3,000 rows of a 100k-case vectors file took 270–410 ms to touch in 4 KiB pieces against 4–8 ms in 2 MiB ones
// (docs/PERFORMANCE.md). Elsewhere the advice is ignored.
// Thread safety: immutable after open; share it with std::shared_ptr.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "base/result.h"

namespace spark {

class MappedFile {
 public:
  // What the file system said of the file when it was opened (fstat of the descriptor that was mapped): any write
  // through the file system changes its change time (ctime), which no user can set back, and a replaced file has
  // another inode. See VectorIndex's verified files (vector_index.h).
  struct Identity {
    uint64_t device = 0, inode = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Identity&) const = default;
  };
  // Errors name the file (cannot open, stat or map). An empty file maps to an empty view.
  static Result<std::shared_ptr<const MappedFile>> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {data_, size_}; }
  const Identity& identity() const { return identity_; }

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  size_t size_ = 0;
  Identity identity_;
};

}  // namespace spark
