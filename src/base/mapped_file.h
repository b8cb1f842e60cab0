// A whole file mapped read-only. The index's files are written once under fresh names and never changed in place
// (a save writes new files, then the manifest, then removes the old ones; an unlinked file stays mapped), so a
// mapping stays valid for as long as it is held. Reading a file that is already in the page cache through a mapping
// costs no copy and no zero-filled buffer: what a new `spark localize` process reads of a 100k-case index.
// Thread safety: immutable after open; share it with std::shared_ptr.
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string_view>

#include "base/result.h"

namespace spark {

class MappedFile {
 public:
  // Errors name the file (cannot open, stat or map). An empty file maps to an empty view.
  static Result<std::shared_ptr<const MappedFile>> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace spark
