#include "retrieval/faiss_adapter.h"

#include <unistd.h>

#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>
#include <vector>

#include "retrieval/index_checksums.h"
#include "retrieval/vector_index.h"

namespace spark {

namespace fs = std::filesystem;

float inner_product(const float* x, const float* y, size_t d) {
  using v4 = float __attribute__((vector_size(16)));
  v4 a0 = {0, 0, 0, 0}, a1 = a0;
  size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    v4 x0, x1, y0, y1;
    std::memcpy(&x0, x + i, 16);
    std::memcpy(&x1, x + i + 4, 16);
    std::memcpy(&y0, y + i, 16);
    std::memcpy(&y1, y + i + 4, 16);
    a0 += x0 * y0;
    a1 += x1 * y1;
  }
  const v4 a = a0 + a1;
  float sum = (a[0] + a[1]) + (a[2] + a[3]);
  for (; i < d; ++i) sum += x[i] * y[i];
  return sum;
}

void FastFlatIP::use_mapped(std::shared_ptr<const MappedFile> file, size_t offset, idx_t count) {
  codes.clear();
  codes.shrink_to_fit();
  map = std::move(file);
  mapped = reinterpret_cast<const uint8_t*>(map->data()) + offset;
  ntotal = count;
}

void FastFlatIP::materialize() {
  if (!mapped) return;
  codes.assign(mapped, mapped + static_cast<size_t>(ntotal) * code_size);
  mapped = nullptr;
  map.reset();
}

void FastFlatIP::add(idx_t n, const float* x) {
  materialize();
  faiss::IndexFlatIP::add(n, x);
}

void FastFlatIP::reset() {
  mapped = nullptr;
  map.reset();
  faiss::IndexFlatIP::reset();
}

namespace {

// The distances FAISS's HNSW computes as it builds and walks the graph, by inner_product().
struct Distance final : faiss::FlatCodesDistanceComputer {
  const float* query = nullptr;
  size_t dim;
  Distance(const uint8_t* stored, size_t bytes, size_t dimension)
      : faiss::FlatCodesDistanceComputer(stored, bytes), dim(dimension) {}
  void set_query(const float* x) override { query = x; }
  float distance_to_code(const uint8_t* code) override {
    return inner_product(query, reinterpret_cast<const float*>(code), dim);
  }
  float symmetric_dis(idx_t i, idx_t j) override {
    return inner_product(reinterpret_cast<const float*>(codes + i * code_size),
                         reinterpret_cast<const float*>(codes + j * code_size), dim);
  }
};

}  // namespace

faiss::FlatCodesDistanceComputer* FastFlatIP::get_FlatCodesDistanceComputer() const {
  return new Distance(rows(), code_size, static_cast<size_t>(d));
}

void FastFlatIP::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                        const faiss::SearchParameters* params) const {
  const faiss::IDSelector* sel = params ? params->sel : nullptr;
  const float* base = xb();
  const size_t dim = static_cast<size_t>(d);
  std::vector<std::pair<float, idx_t>> best;
  const auto worse = [](const std::pair<float, idx_t>& a, const std::pair<float, idx_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  for (idx_t q = 0; q < n; ++q) {
    best.clear();
    const float* query = x + static_cast<size_t>(q) * dim;
    for (idx_t i = 0; i < ntotal; ++i) {
      if (sel && !sel->is_member(i)) continue;
      const std::pair<float, idx_t> cand{
          finite_or_lowest(inner_product(query, base + static_cast<size_t>(i) * dim, dim)), i};
      if (static_cast<idx_t>(best.size()) < k) {
        best.push_back(cand);
        std::push_heap(best.begin(), best.end(), worse);
      } else if (k > 0 && worse(cand, best.front())) {
        std::pop_heap(best.begin(), best.end(), worse);
        best.back() = cand;
        std::push_heap(best.begin(), best.end(), worse);
      }
    }
    std::sort_heap(best.begin(), best.end(), worse);
    for (idx_t j = 0; j < k; ++j) {
      const bool has = j < static_cast<idx_t>(best.size());
      distances[q * k + j] = has ? best[static_cast<size_t>(j)].first : -std::numeric_limits<float>::max();
      labels[q * k + j] = has ? best[static_cast<size_t>(j)].second : -1;
    }
  }
}

std::unique_ptr<faiss::IndexHNSWFlat> new_hnsw(size_t dimension, int m) {
  auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<idx_t>(dimension), m, faiss::METRIC_INNER_PRODUCT);
  delete hnsw->storage;
  hnsw->storage = new FastFlatIP(static_cast<idx_t>(dimension));
  return hnsw;
}

const FastFlatIP& flat_of(const faiss::Index& index) {
  if (const auto* hnsw = dynamic_cast<const faiss::IndexHNSWFlat*>(&index))
    return *dynamic_cast<const FastFlatIP*>(hnsw->storage);
  return *dynamic_cast<const FastFlatIP*>(&index);
}

namespace {

// A FAISS writer that checksums the bytes as they pass.
struct ChecksumWriter final : faiss::IOWriter {
  FILE* f = nullptr;
  StreamChecksum sum;
  size_t operator()(const void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return nitems;  // an empty vector (the graph's storage): its data() may be null
    const size_t put = std::fwrite(ptr, size, nitems, f);
    sum.update(static_cast<const char*>(ptr), put * size);
    return put;
  }
};

// A FAISS reader over bytes in memory (a mapped file): reads are copies out of the page cache, with no read() calls.
struct BytesReader final : faiss::IOReader {
  std::string_view bytes;
  size_t at = 0;
  size_t operator()(void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return 0;
    const size_t items = std::min(nitems, (bytes.size() - at) / size);
    if (items > 0) std::memcpy(ptr, bytes.data() + at, items * size);
    at += items * size;
    return items;
  }
};

}  // namespace

Result<std::string> write_checksummed(const fs::path& path, const std::function<void(faiss::IOWriter&)>& write) {
  const fs::path tmp = path.string() + ".tmp";
  ChecksumWriter writer;
  writer.name = tmp.string();
  writer.f = std::fopen(tmp.c_str(), "wb");
  if (!writer.f) return fail(tmp.string() + ": cannot create: " + std::strerror(errno));
  bool written = true;
  std::string why;
  try {
    write(writer);
  } catch (const faiss::FaissException& e) {
    written = false;
    why = e.what();
  }
  written = std::fflush(writer.f) == 0 && ::fsync(::fileno(writer.f)) == 0 && !std::ferror(writer.f) && written;
  if (std::fclose(writer.f) != 0) written = false;
  std::error_code ec;
  if (!written) {
    fs::remove(tmp, ec);
    return fail(tmp.string() + ": cannot write" + (why.empty() ? " (disk full?)" : ": " + why));
  }
  fs::rename(tmp, path, ec);
  if (ec) return fail(path.string() + ": " + ec.message());
  return writer.sum.finish();
}

Result<std::unique_ptr<faiss::Index>> read_verified_faiss(const fs::path& path, const MappedFile& map) {
  BytesReader reader;
  reader.name = path.string();
  reader.bytes = map.view();
  try {
    return std::unique_ptr<faiss::Index>(faiss::read_index(&reader));
  } catch (const faiss::FaissException& e) {
    return fail(path.string() + ": cannot read the index: " + e.what());
  }
}

}  // namespace spark
