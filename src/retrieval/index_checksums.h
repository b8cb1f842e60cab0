// The checksums of the vector index's files, and the index folder's list of the files a load verified.
//
// Every file of a saved index (vector_index.h) is named by its manifest with a 64-bit checksum: four independent
// chains over the 32-byte strides of its bytes (word i of a stride into chain i), the last < 32 bytes bytewise into
// chain 0, then the chains folded together and the length folded in, as 16 hex digits. The four chains run side by
// side, about four times the speed of one: what a new `spark localize` process pays on the ~30 MB it verifies at 100k
// cases. They catch damage, not forgery.
//
// The `verified` list (VectorIndexOptions::trust_verified_files) lets a query's load skip hashing a file an earlier
// load hashed and nothing has written since. Internal to src/retrieval/ (and its tests): callers use VectorIndex.
// Thread safety: StreamChecksum and FileVerifier are for one thread; the free functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "base/mapped_file.h"
#include "base/result.h"

namespace spark {

// The checksum over a stream of bytes fed in pieces of any size (the same sum for any split).
class StreamChecksum {
 public:
  void update(const char* p, size_t n);
  std::string finish() const;

 private:
  static constexpr size_t kStride = 32;
  void strides(const char* p, size_t count);
  std::string partial_;  // a stride's bytes not yet hashed (< kStride)
  uint64_t lane_[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL};
  uint64_t total_ = 0;
};

// The checksum of bytes already read (one read of a file serves its check and its use).
std::string checksum_of(std::string_view bytes);
// A file's checksum, hashed through a mapping of it; errors name the file.
Result<std::string> file_checksum(const std::filesystem::path& path);

// The index folder's list of verified files, named "verified": a first line "spark verified files 1", then a line per
// file: its name, its checksum, and its identity when it was verified (device, inode, size, mtime and ctime in ns).
// A cache, not a record: a missing or damaged list vouches for nothing.
inline constexpr const char* kVerifiedList = "verified";

// One load's verification of its files against the manifest: each file's checksum is computed, unless the folder's
// verified list vouches for it (when `trust`); what was verified is listed for the next load. A file changed less
// than `min_age_ms` before the load is verified but not listed (a change in the same tick of the file system's clock
// could leave its times as they were).
class FileVerifier {
 public:
  FileVerifier(const std::filesystem::path& dir, bool trust, int min_age_ms);
  // True when the list vouches for `file` as it is mapped (and trust was asked for).
  bool vouched(const std::string& file, const std::string& checksum, const MappedFile& map);
  // The checksum `sum` computed over the mapping against the manifest's `checksum`.
  bool hashed(const std::string& file, const std::string& checksum, const MappedFile& map, const std::string& sum);
  // vouched(), else hashed() over the mapping's bytes.
  bool verify(const std::string& file, const std::string& checksum, const MappedFile& map);
  size_t files_hashed() const { return hashed_; }
  // After a load that verified everything: the list written again when this load verified a file it did not hold,
  // keeping what it held of the state's other files (`current`; a query does not verify the vectors file). A folder
  // spark may not write keeps no list (every load then hashes).
  void update_list(const std::set<std::string>& current);

 private:
  struct Listed {
    std::string checksum;
    MappedFile::Identity identity;
  };
  using Listing = std::map<std::string, Listed>;
  static Listing read_list(const std::filesystem::path& dir);
  std::filesystem::path dir_;
  bool trust_;
  Listing known_, seen_;
  int64_t listable_before_ns_ = 0;
  size_t hashed_ = 0;
  bool listed_new_ = false;
};

}  // namespace spark
