// What the vector index (vector_index.h) needs of FAISS, in one place: its flat storage with spark's inner product,
// an HNSW graph over that storage, and FAISS's own file format for the graph, written and read through checksums.
//
// Debian's faiss (1.7.3) is a generic build whose inner product is a single-accumulator loop; FastFlatIP is the flat
// inner-product storage whose distances (the HNSW graph's, as it is built and searched) and exact searches use
// spark's inner_product() instead, and whose rows may lie in a read-only mapping of the index's vectors file.
// Internal to src/retrieval/: callers use VectorIndex. Thread safety: as FAISS's (searches concurrent, adds not).
#pragma once

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/io.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "base/mapped_file.h"
#include "base/result.h"

namespace spark {

using idx_t = faiss::Index::idx_t;

// A similarity that sorts: NaN or infinity (a damaged vectors file, whose whole checksum a query does not read) ranks
// last instead of breaking the ordering of a sort.
inline float finite_or_lowest(float v) { return std::isfinite(v) ? v : -std::numeric_limits<float>::max(); }

// Flat inner-product storage. Its rows are its own (faiss's `codes`) or a read-only map of the vectors file (a load);
// the first add copies mapped rows into `codes`. Every faiss path spark calls reads rows through rows().
struct FastFlatIP final : faiss::IndexFlatIP {
  explicit FastFlatIP(idx_t dimension) : faiss::IndexFlatIP(dimension) {}

  std::shared_ptr<const MappedFile> map;
  const uint8_t* mapped = nullptr;  // the first row inside `map`
  const uint8_t* rows() const { return mapped ? mapped : codes.data(); }
  const float* xb() const { return reinterpret_cast<const float*>(rows()); }
  // The rows are the `count` rows at `offset` in `file`, used where they lie.
  void use_mapped(std::shared_ptr<const MappedFile> file, size_t offset, idx_t count);
  void materialize();  // mapped rows copied into `codes`
  void add(idx_t n, const float* x) override;
  void reset() override;
  void reconstruct(idx_t key, float* recons) const override {
    std::memcpy(recons, rows() + static_cast<size_t>(key) * code_size, code_size);
  }
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;
  // Exact top-k by inner product, one query at a time, honouring the selector; equal similarities by position.
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;
};

// A new HNSW graph (inner product, `m` links a node) over an empty FastFlatIP.
std::unique_ptr<faiss::IndexHNSWFlat> new_hnsw(size_t dimension, int m);
// The flat storage of an index VectorIndex made or loaded (a FastFlatIP, or an HNSW graph over one).
const FastFlatIP& flat_of(const faiss::Index& index);

// Writes a new file at `path` through `write` (a FAISS writer that checksums the bytes as they pass, so a file is
// written once), flushed to disk under a temporary name and then renamed into place; returns its checksum
// (index_checksums.h). A failed write leaves no file; errors name it.
Result<std::string> write_checksummed(const std::filesystem::path& path,
                                      const std::function<void(faiss::IOWriter&)>& write);
// Reads a FAISS index file from its mapping, whose checksum the caller has verified (faiss 1.7.3's reader leaks what
// it was reading when it throws on damaged bytes): the bytes the checksum read are the bytes FAISS reads.
Result<std::unique_ptr<faiss::Index>> read_verified_faiss(const std::filesystem::path& path, const MappedFile& map);

}  // namespace spark
